"""The engine's threads: its own workers, and how many threads of the BLAS each matrix product gets. Decided here alone.

Two kinds of work share the cores. The row-wise stages (softmax, activations, norms: ops.rowwise) split
their rows among the engine's workers (NumPy lets go of the GIL inside its loops). The matrix products
go to the BLAS (OpenBLAS in NumPy's wheels), which splits each call among threads of its own, and
those threads wait for each other at the end of every call.

That split pays for a product with a weight ([T, D] x [D, 3D]: one call, millions of multiply-adds for
each thread between two waits). It does not pay for a stack of small products, attention's per-head
scores and mix ([H, 128, dh] x [H, dh, t] in a chunk of query rows: H calls of a few million each, every
one a wait), and on a machine whose cores are busy with other processes a thread that waits for another
waits for the scheduler to give that one a turn: GPT-2's scores of one chunk of 128 rows against 512
keys took 57 ms with the BLAS's two threads and two other processes spinning, 6 ms on one BLAS thread,
under 2 ms on a quieter machine. So (`sized_for_threads`, called by Tape.matmul for every product):

- a product whose b is one matrix for every row of a (a weight: [T, D] x [D, F], a batch's rows folded
  in) is one BLAS call with the BLAS's threads as they are (every core, unless the user set fewer);
- a product over a stack (b has axes of its own: heads, groups of heads, a batch's rows) makes each call
  of the stack on one BLAS thread, and a stack big enough to pay for handing it out is shared among the
  engine's workers, a run of its calls each, written into one output.

Each call of a stack is then the same one-thread BLAS call whichever worker makes it and however many
there are, so its bits are the same on every machine. They are not those of a BLAS call split among
threads: OpenBLAS adds a product's terms in another order when it splits a call (measured on 0.3.31,
[128, 64] x [64, 512]: one result in seven differs, by a rounding of its terms), so attention's products
now have the bits of one thread where they had those of the BLAS's thread count (GPT-2's logits at 512
positions moved by at most 3e-6 on a scale of 3, the same greedy tokens). The products with weights are
computed as before.

The BLAS's threads are set at run time through threadpoolctl, for the product's duration only (the
user's setting is back in force after it); each worker sets its own too, since some BLAS libraries keep
the setting per thread (MKL, OpenBLAS built on OpenMP). A BLAS that threadpoolctl cannot see is left as
it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from math import prod

import numpy as np


def _threads() -> int:
    """As many as the BLAS may use (the benchmark sets the same count for every library)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            return int(os.environ[var])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


THREADS = _threads()  # the engine's workers, the calling thread among them
# A stack of products of fewer multiply-adds than this is one call: handing shares of it to the workers costs
# more than it saves (every decode step's attention, a short prompt's).
SPREAD_MIN_MACS = 1 << 23
_pool: ThreadPoolExecutor | None = None
_blas: list | None = None  # threadpoolctl's controllers of the BLAS libraries loaded (found at the first stack)


def spread(work: Callable[[int, int], None], n: int) -> None:
    """work(first, end) over n items in THREADS runs of them, one each: the calling thread does the first run, the
    engine's workers the others, and all are done when this returns."""
    global _pool
    cuts = [n * i // THREADS for i in range(THREADS + 1)]
    runs = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    if _pool is None and len(runs) > 1:
        _pool = ThreadPoolExecutor(THREADS - 1, thread_name_prefix="minitransformer")
    others = [_pool.submit(work, a, b) for a, b in runs[1:]] if _pool is not None else []
    try:
        work(*runs[0])
    finally:
        for done in others:
            done.result()


def sized_for_threads(matmul, a, b):
    """matmul(a, b) (np.matmul, handed over by Tape.matmul, the one door for products) on as many threads as the
    product is sized for (the module's docstring says which)."""
    if b.ndim <= 2:  # one matrix for every row of a: a weight
        return matmul(a, b)
    batch = b.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    rows, width = a.shape[-2], b.shape[-1]
    split = next((axis for axis, n in enumerate(batch) if n > 1), None)  # the outermost axis with more than one call
    with one_blas_thread():
        if THREADS == 1 or split is None or prod(batch) * rows * a.shape[-1] * width < SPREAD_MIN_MACS:
            return matmul(a, b)
        out = np.empty((*batch, rows, width), np.result_type(a.dtype, b.dtype))

        def run(first: int, end: int) -> None:
            part = (slice(None),) * split + (slice(first, end),)
            with one_blas_thread():
                matmul(_part(a, batch, split, first, end), _part(b, batch, split, first, end), out=out[part])

        spread(run, batch[split])
        return out


def _part(x, batch: tuple[int, ...], axis: int, first: int, end: int):
    """x's share of the calls first..end along `axis` of the product's stack `batch` (x broadcast over the stack, its
    stack axes aligned right): all of x where it has no such axis or size 1 there."""
    own = axis - (len(batch) - (x.ndim - 2))
    if own < 0 or x.shape[own] == 1:
        return x
    return x[(slice(None),) * own + (slice(first, end),)]


def one_blas_thread() -> OneBlasThread:
    """A context in which the calling thread's BLAS calls run on one thread, the BLAS's thread count as it was after."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController().select(user_api="blas").lib_controllers
    return OneBlasThread(_blas)


class OneBlasThread:
    """Each BLAS library's thread count set to one on entering, and back to what it was on leaving, through
    threadpoolctl's controller of each library, asked and set directly: its `limit` context describes every library
    in full each time, which cost more than a decode step's small products themselves (10 to 16 us a product,
    against 3 or 4 here)."""

    __slots__ = ("libraries", "changed")

    def __init__(self, libraries: list) -> None:
        self.libraries = libraries

    def __enter__(self) -> None:
        self.changed = [(lib, n) for lib in self.libraries if (n := lib.get_num_threads()) not in (1, None)]
        for lib, _ in self.changed:
            lib.set_num_threads(1)

    def __exit__(self, *exception) -> None:
        for lib, n in self.changed:
            lib.set_num_threads(n)
            # threadpoolctl 3.8 lets one thread at a time set OpenBLAS's shared pool: give that back once done.
            getattr(lib, "clear_controlling_thread", lambda: None)()
