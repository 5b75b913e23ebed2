"""The engine's threads: its own workers, and how many threads of the BLAS each matrix product gets. Decided here alone.

Two kinds of work share the cores. The row-wise stages (softmax, activations, norms: ops.rowwise) split
their rows among the engine's workers (NumPy lets go of the GIL inside its loops). The matrix products
go to the BLAS (OpenBLAS in NumPy's wheels), which splits each call among threads of its own, and
those threads wait for each other at the end of every call.

On a machine whose cores are busy with other processes, a thread that waits for another waits for the
scheduler to give that one a turn. GPT-2's scores of one chunk of 128 rows against 512 keys took 57 ms
with the BLAS's two threads and two other processes spinning, 6 ms on one BLAS thread, under 2 ms on a
quieter machine; a Llama's [5, 1536] x [1536, 4096] took 40 ms on two threads against 4.8 ms on one. So
(`sized_for_threads`, called by Tape.matmul for every product):

- a product over a stack (b has axes of its own: heads, groups of heads, a batch's rows) makes each call
  of the stack on one BLAS thread, and a stack big enough to pay for handing it out is shared among the
  engine's workers;
- a prompt's product with a weight ([T, D] x [D, F], T of at least BLOCKS_MIN_ROWS: a batch's rows
  folded in) is cut into blocks of the weight's columns, each a call on one BLAS thread, shared the same
  way (`column_blocks`: an even count from 2 to 16, so that two workers finish together, fixed by the weight's
  width alone); up to SWAP_MAX_ROWS rows times a weight stored [out, in], each block's call is taken from the
  weight's side, W @ x^T, and transposed back (`_with_weight` says why);
- a decode step's row times a weight runs on the BLAS's threads, which read a weight faster than one
  thread; while other processes keep the cores busy (`cores_busy_elsewhere`, a look at /proc/stat every
  LOAD_WINDOW), on one thread, if and only if one thread was seen to give that product's layout the same
  bits (`_one_row`);
- a weight held narrower than float32 (a 2-byte checkpoint kept in its bytes, a precision's operands: the
  tape hands it over only where widening it is exact, `widens_itself`) is widened by the product that reads
  it, block by block: a decode step's row in blocks of WIDEN_BYTES, each widened into a buffer of the thread's
  own that stays in its core's cache and multiplied there on one BLAS thread (`_narrow_row`), a prompt's in
  its column blocks as above;
- up to SMALL_BLOCKS_MAX_ROWS rows (a short prompt's, a small batch's decode step) times a weight, where the BLAS has
  a kernel for small products that reads the weight as it lies (OpenBLAS's SkylakeX kernels), are cut into blocks
  small enough for that kernel, each a call on one BLAS thread, shared the same way: a weight stored [out, in] into
  blocks of its rows, each W_block @ x^T (`_small_kernel_rows` says why); one stored [in, out] (GPT-2's Conv1D) into
  blocks of its depth, each x_block @ W_block, their sums added in an order fixed by the shape (`_in_depth_blocks`);
- any other product with a weight (a short prompt's, a batch's decode step, a small model's) is one call on the
  BLAS's threads, taken from the weight's side where a few rows meet a weight stored [out, in], and on one thread
  while the cores are busy elsewhere where one thread was seen to give the same bits, as a decode step's row
  (`_few_rows`).

Sharing (`spread`) hands out runs of the work one at a time to whichever thread is free, the calling
thread among them: a worker that gets no core leaves its runs to the others, and nobody waits for a
run that no one has begun.

The bits of a product therefore never depend on the load or on how many workers share it: a stack's
calls and a prompt's blocks are the same one-thread BLAS calls whoever makes them. They are not the bits
of one BLAS call split among threads: OpenBLAS adds a product's terms in another order when it splits a
call (measured on 0.3.31: [128, 64] x [64, 512], one result in seven differs by a rounding of its terms;
[5, 1536] x [1536, 4096] and [1, 768] x [768, 50257] too, where a single row of GPT-2's or a Llama's layer
weights does not), so attention's products and a prompt's products with weights have the bits of their
one-thread calls (GPT-2's logits at 512 positions moved by at most 3e-6 on a scale of 3 when attention's
did, the same greedy tokens).

The BLAS's threads are set at run time through threadpoolctl, for the product's duration only (the
user's setting is back in force after it); each worker sets its own too, since some BLAS libraries keep
the setting per thread (MKL, OpenBLAS built on OpenMP). A BLAS that threadpoolctl cannot see is left as
it is.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from math import prod

import numpy as np

from .precision import widened


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
# A product with a weight of at least so many rows and multiply-adds is computed in column blocks (the module's docstring
# says why): a prompt's, not a decode step's or a short prompt's, which read more weight than they compute
BLOCKS_MIN_ROWS = 32
BLOCKS_MIN_MACS = 1 << 22
BLOCK_MIN_WIDTH = 512  # columns: a narrower block is too little work for the BLAS's kernel to reach its stride ...
MAX_BLOCKS = 16  # ... and from 2 blocks (GPT-2's [768, 768]) to 16 (the logits), enough for a worker that gets no core
BLOCK_ALIGN = 16  # a block's first column a multiple of 16: 64 bytes of float32, a cache line
# A narrow weight's columns widened at a time for one row: float32 bytes that stay in a core's L2 cache (1 MiB on a
# Zen 4, 2 MiB on a Sapphire Rapids) beside the row, so that the product reads them back from there, not from memory
WIDEN_BYTES = 1 << 20
# Up to so many rows times a weight stored [out, in] are computed from the weight's side: in column blocks (see
# `_with_weight`), and in one call (`_few_rows`)
SWAP_MAX_ROWS = 128
SWAP_ONE_CALL_MAX_ROWS = 16
# OpenBLAS multiplies a small product without first copying its operands into its packed layout, where its permit says
# (0.3.31, kernel/x86_64/sgemm_small_kernel_permit_skylakex.c: M*N*K at most 100^3 and, with W_block @ x^T's
# transposition, M*N at most 1,200 and K at least 32); `_small_kernel_rows` cuts a few rows' product to fit
SMALL_KERNEL_MNK = 100**3
SMALL_KERNEL_MN = 1200
SMALL_KERNEL_MIN_DEPTH = 32
SMALL_BLOCKS_MAX_ROWS = 6  # measured: from 8 rows a loss (see `_small_kernel_rows`, `_in_depth_blocks`)
SMALL_BLOCK_MIN_NUMBERS = 1 << 17  # fewer in a shallow weight's widest block: one call (`_small_kernel_rows`)
SMALL_DEPTH_BLOCK = 64  # a weight stored [in, out]: at most so many of its rows a block (see `_in_depth_blocks`) ...
DEPTH_PARTS = 4  # ... and its blocks in so many runs of their own, each summed apart, the sums added in their order
DEPTH_MIN_WEIGHT = 1 << 18  # numbers (1 MiB of float32): a smaller weight is one call (`_small_kernel_depth`)
SMALL_KERNEL_ARCHITECTURES = ("SkylakeX", "Cooperlake", "SapphireRapids")  # OpenBLAS's kernels that have it
RUNS_PER_WORKER = 4  # spread cuts its items into so many runs per worker, taken one at a time: see `spread`
_tasks: queue.SimpleQueue[Share] = queue.SimpleQueue()  # shares of work handed to the workers
_workers = 0  # workers started (at the first share of work that needs them)
_blas: list | None = None  # threadpoolctl's controllers of the BLAS libraries loaded (found at the first product)
_small_kernel: bool | None = None  # whether the BLAS has OpenBLAS's small-product kernel (found at the first product)


def spread(work: Callable[[int, int], None], n: int) -> None:
    """work(first, end) over n items, in runs that the calling thread and the engine's workers take one at a time
    until none is left; all are done when this returns.

    Each takes the next run when it is free, so a worker that the scheduler leaves waiting (every core busy with other
    processes) only leaves more runs to the others: the calling thread waits for a run a worker has begun, never for
    one it has not. (Cutting the items into one run for each thread made the caller wait for a worker's whole run:
    with two other processes spinning, GPT-2's per-head scores took 2.7 times their quiet time.)"""
    if THREADS == 1 or n <= 1:
        work(0, n)
        return
    count = min(n, RUNS_PER_WORKER * THREADS)
    cuts = [n * i // count for i in range(count + 1)]
    share = Share(work, list(zip(cuts, cuts[1:])))
    _start_workers()
    for _ in range(THREADS - 1):
        _tasks.put(share)
    share.take()
    share.wait()


class Share:
    """One call of spread: its runs, the next one to take, and how many are being worked on."""

    def __init__(self, work: Callable[[int, int], None], runs: list[tuple[int, int]]) -> None:
        self.work, self.runs = work, runs
        self.next = 0
        self.working = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.finished = threading.Condition(self.lock)

    def take(self) -> None:
        """Work through runs until none is left (or one failed)."""
        while True:
            with self.lock:
                if self.next == len(self.runs) or self.error is not None:
                    return
                run = self.runs[self.next]
                self.next += 1
                self.working += 1
            try:
                self.work(*run)
            except BaseException as error:  # the caller raises it, once every run begun has ended
                self.error = self.error or error
            finally:
                with self.lock:
                    self.working -= 1
                    if self.working == 0:
                        self.finished.notify_all()

    def wait(self) -> None:
        """Until no run is being worked on (the caller has taken the last): then the first error, if one came."""
        with self.lock:
            while self.working:
                self.finished.wait()
            # a worker the scheduler kept waiting may find this share in the queue much later: let it not keep the
            # work's arrays alive till then (a [T, 4D] activation past its stage, a higher peak of memory)
            self.work = _nothing
        if self.error is not None:
            raise self.error


def _nothing(first: int, end: int) -> None:
    """The work of a share that is done."""


def _start_workers() -> None:
    """THREADS - 1 workers, each taking shares of work off the queue for as long as the process lives (daemons: they
    hold nothing that needs closing). A share a worker finds with no runs left costs it nothing."""
    global _workers
    while _workers < THREADS - 1:
        threading.Thread(target=_serve, daemon=True, name=f"minitransformer-{_workers}").start()
        _workers += 1


def _serve() -> None:
    while True:
        _tasks.get().take()


def sized_for_threads(matmul, a, b, gil_free=None):
    """matmul(a, b) (np.matmul, handed over by Tape.matmul, the one door for products) on as many threads as the
    product is sized for (the module's docstring says which).

    gil_free (np.dot, handed over by the door too; matmul where none is) makes the blocks that threads make at once
    with a few hundred outputs each: a row's over a narrow weight (`_narrow_row`) and a few rows' taken from the
    weight's side (`_with_weight`). NumPy lets go of the GIL inside a matmul only where its output holds more than
    500 numbers (its ufunc machinery's threshold), so two threads making such blocks took turns for the whole of each
    BLAS call; np.dot lets go of it for any size, and makes the same call of the BLAS with the same arguments (sgemv
    or sgemm, row-major, each operand's transposition read from its layout alike), so the bits are the same. Measured
    on the Zen 4 EPYC without AVX-512 here, in turn in one process: the bench's 1.24B bfloat16 Llama's decode step
    0.381 s with np.matmul's blocks, 0.284 with np.dot's (the float32 step 0.205); the 0.54B Llama's prefill of 5
    positions in the small kernel's blocks (`_small_kernel` set, as on the Xeon), 328 against 280 ms (medians)."""
    if b.ndim <= 2:  # one matrix for every row of a: a weight
        return _with_weight(matmul, a, b, gil_free or matmul)
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


def column_blocks(width: int) -> list[tuple[int, int]]:
    """The column blocks of a product with a weight of `width` columns: fixed by the shape alone, so that the product's
    bits are the same whoever computes which block, on any number of workers. An even count: a Llama's 1,536 columns
    in 3 blocks left one of two workers a third of the product on its own (four of its [128, 4096] x [4096, 1536]:
    56 ms in 3 blocks, 43 in 2)."""
    count = min(MAX_BLOCKS, max(2, width // BLOCK_MIN_WIDTH // 2 * 2), max(1, width // BLOCK_ALIGN))
    cuts = [width * i // count // BLOCK_ALIGN * BLOCK_ALIGN for i in range(count)] + [width]
    return list(zip(cuts, cuts[1:]))


def widens_itself(a, b) -> bool:
    """Whether sized_for_threads, handed a weight b held narrower than float32 (widening it exact), widens it itself as
    its products read it: one row (a decode step's), a prompt's column blocks, a few rows' blocks for the small-product
    kernel. Any other product's weight the caller widens (a short prompt's not cut so: one call on the BLAS's threads,
    as a float32 weight's)."""
    return b.ndim == 2 and (
        a.size == b.shape[0] or _in_column_blocks(a, b) or _small_kernel_rows(a, b) > 0 or _small_kernel_depth(a, b) > 0
    )


def _in_column_blocks(a, b) -> bool:
    """Whether a @ b, b a weight, is a prompt's product, computed in column blocks."""
    return a.size >= BLOCKS_MIN_ROWS * b.shape[0] and a.size * b.shape[-1] >= BLOCKS_MIN_MACS


def _from_weights_side(a, b, max_rows: int) -> bool:
    """Whether a @ b, b a weight, is computed as W @ a^T (and transposed back): 2 to max_rows rows and a weight stored
    [out, in] (a Linear's, used as its view W^T)."""
    return b.strides[0] < b.strides[1] and 1 < a.size // b.shape[0] <= max_rows


def _with_weight(matmul, a, b, gil_free):
    """a @ b for a weight b [D, F]: a prompt's product in column blocks, each a call on one BLAS thread, shared by
    spread; a few rows times a weight stored [out, in] alike, in the narrower blocks of `_small_kernel_rows`, and times
    one stored [in, out] in blocks of its depth (`_in_depth_blocks`); one row (a decode step's) by `_one_row`
    (`_narrow_row` for a narrow weight); anything else one call on the BLAS's threads (`_few_rows`). A narrow weight's
    block is widened as its call comes (a float32 copy in its layout: the call is the float32 weight's, and so are
    its bits).

    Up to SWAP_MAX_ROWS rows times a weight stored [out, in] (used as its view W^T), each block is W_block @ a^T, its
    [block, rows] result transposed back into the block's columns: OpenBLAS's one-thread kernels take such rows faster
    on that side, and the transposition of a block's result is small and stays in cache. Measured on the EPYC here
    (the Llama-shaped bench model, its whole prefill, the same process): 128 positions 1,007 against 899 ms, 64 569
    against 498, 32 388 against 310; its products with 20 layers' weights read from memory, 128 rows 848 against 788
    ms (np.matmul on the BLAS's threads: 832 in this layout, 772 to 790 on the weights stored [in, out]); GPT-2's
    logits, [T, 768] x [768, 50257], 32 rows 25.8 against 21.7 ms, 128 rows alike, 256 rows 111 to 117 against 111
    to 125, where the transposition back costs about what the call saves: hence the limit. a^T is a's view (a
    C-ordered copy of it: 855 against 800 ms). The bits are the block's either way: OpenBLAS 0.3.31's one-thread
    call adds a row's terms in the same order on both sides (the Llama's and GPT-2's shapes and others, depths 64
    to 4,096, all equal), and on any BLAS they are fixed by the block's shape."""
    if b.ndim < 2:
        return matmul(a, b)
    narrow = b.dtype not in (np.float32, np.float64)
    if a.size == b.shape[0]:
        return _narrow_row(gil_free, a, b) if narrow else _one_row(matmul, a, b)
    if step := _small_kernel_depth(a, b):
        return _in_depth_blocks(matmul, a, b, step)
    if step := _small_kernel_rows(a, b):
        blocks, swapped = [(start, min(start + step, b.shape[-1])) for start in range(0, b.shape[-1], step)], True
    elif _in_column_blocks(a, b):
        blocks, swapped = column_blocks(b.shape[-1]), _from_weights_side(a, b, SWAP_MAX_ROWS)
    else:
        return _few_rows(matmul, a, b)
    out = np.empty((*a.shape[:-1], b.shape[-1]), np.float32 if narrow else np.result_type(a.dtype, b.dtype))
    rows_t = a.reshape(-1, b.shape[0]).T if swapped else None  # [D, rows]: a view where a is C-ordered
    out_rows = out.reshape(-1, b.shape[-1])  # [rows, F]

    def run(first: int, end: int) -> None:
        with one_blas_thread():
            for start, stop in blocks[first:end]:
                block = b[:, start:stop]
                block = widened(block) if narrow else block
                if swapped:
                    np.copyto(out_rows[:, start:stop], gil_free(block.T, rows_t).T)
                else:
                    matmul(a, block, out=out[..., start:stop])

    with one_blas_thread():
        spread(run, len(blocks))
    return out


def _small_kernel_rows(a, b) -> int:
    """The rows of the weight in each block of a few rows' product with a weight stored [out, in] (b its view W^T), cut
    so that each block's W_block @ x^T is a product OpenBLAS takes to its small-product kernel; 0 where it is not so
    computed (more than SMALL_BLOCKS_MAX_ROWS rows, one row, a weight stored [in, out], too deep a weight, too shallow
    a weight (the most rows the kernel's permit lets a block have, SMALL_KERNEL_MN // rows, hold fewer than
    SMALL_BLOCK_MIN_NUMBERS numbers), a BLAS without that kernel).

    Measured on the Intel Xeon here (Emerald Rapids; OpenBLAS 0.3.31, its SkylakeX kernels), one BLAS thread, the
    weight read from memory: OpenBLAS's packed product of 5 rows read a weight at 3.5 to 3.9 GB/s (a row alone, its
    matrix-vector kernel, 13 GB/s), first copying the weight into its packed layout; the same 5 rows in blocks that its
    small-product kernel takes, which reads the weight's rows as they lie, 7.5 to 10.9 GB/s (depths 768 to 4,096); 2
    rows 9.9 to 14.8 against 3.0 to 3.6; 8 rows 4.5 to 8.5 against 3.2 to 4.1; 16 rows 3.5 to 5.6 against 2.4 to 3.8.
    The Llama-shaped bench model's whole prefill, both cores, the median of 7 beside the packed product's in the same
    process: 2 positions 196 against 329 ms, 4 205 against 244, 5 271 against 307, 6 256 against 282, 8 320 against 305
    (a loss: hence SMALL_BLOCKS_MAX_ROWS). A weight stored [in, out] is not cut so: its column block's rows are strided
    in memory, and the small kernel read them no faster than the packed product (GPT-2's layers, 5 rows: 84 against
    71 ms in one call on the BLAS's threads); it is cut along its depth instead (`_in_depth_blocks`). The bits are
    the block's one-thread call's, fixed by its shape, on any load. Where the BLAS has no such kernel, blocks this
    narrow would only add calls: 0. The AMD EPYC's OpenBLAS takes the same kernels (this changed its bits there too,
    by a rounding). A small model's blocks are small too, and each costs a call and a turn at the GIL: on the Zen 5
    EPYC here, the demo-llama's prefill of 5 positions (64 wide, its logits' [V, 64] in blocks of 240 x 64) took 3.7
    ms against 1.9 in one call, a 256-wide model's (8 layers) 7.6 against 4.2, a 384-wide one's 10.4 against 6.4;
    with SMALL_BLOCK_MIN_NUMBERS (a weight 768 deep or deeper clears it at 2 to 6 rows), 2.2 against 2.3, 4.4
    against 4.1, 6.7 against 6.3, and the bench's Llama-shaped 0.54B as before (its weights read from memory, the
    blocks' gain: 130 ms against 172)."""
    rows, depth = a.size // b.shape[0], b.shape[0]
    out_in = b.ndim == 2 and b.strides[0] < b.strides[1]  # [out, in] storage read as W^T
    if not (out_in and 1 < rows <= SMALL_BLOCKS_MAX_ROWS and depth >= SMALL_KERNEL_MIN_DEPTH):
        return 0
    step = min(SMALL_KERNEL_MN // rows, SMALL_KERNEL_MNK // (rows * depth)) // BLOCK_ALIGN * BLOCK_ALIGN
    shallow = SMALL_KERNEL_MN // rows * depth < SMALL_BLOCK_MIN_NUMBERS  # its blocks small whatever its width
    return step if step >= BLOCK_ALIGN and not shallow and _has_small_kernel() else 0


def _small_kernel_depth(a, b) -> int:
    """The rows of the weight in each block of a few rows' product with a weight stored [in, out] (its rows lie whole
    in memory), cut so that each block's x_block @ W_block is within the small-product kernel's permit (rows x width x
    block at most 10^6, a multiple of 16 rows, at most SMALL_DEPTH_BLOCK); 0 where it is not so computed (more than
    SMALL_BLOCKS_MAX_ROWS rows, one row, a weight stored [out, in], too wide a weight, a BLAS without that kernel,
    a weight of fewer than DEPTH_MIN_WEIGHT numbers)."""
    rows, width = a.size // b.shape[0], b.shape[-1]
    in_out = b.ndim == 2 and b.strides[0] > b.strides[1]
    if not (in_out and 1 < rows <= SMALL_BLOCKS_MAX_ROWS and b.size >= DEPTH_MIN_WEIGHT):
        return 0
    step = min(SMALL_DEPTH_BLOCK, SMALL_KERNEL_MNK // (rows * width)) // BLOCK_ALIGN * BLOCK_ALIGN
    return step if step >= BLOCK_ALIGN and _has_small_kernel() else 0


def _in_depth_blocks(matmul, a, b, step: int):
    """a @ b for a few rows of a and a weight b stored [in, out], in blocks of `step` of the weight's rows: each
    x[:, block] @ W[block] a call on one BLAS thread that OpenBLAS takes to its small-product kernel, which reads the
    block's rows as they lie (contiguous, where a block of an [in, out] weight's columns is strided). The same dot
    products as one call, each added up in pieces: the blocks fall into DEPTH_PARTS runs of consecutive blocks, each
    run's terms summed in the blocks' order by whoever takes it (spread), then the runs' sums added in their order.
    The blocks and runs are fixed by the shapes alone, so the bits never depend on the load or the workers.

    Measured on the Intel Xeon here (OpenBLAS 0.3.31, its SkylakeX kernels): GPT-2's 48 layer weights times 5 rows,
    one BLAS thread, 40 ms in blocks of 64 against 74 in one packed call (blocks of 128 rows, beyond the permit for
    the wider weights, 58 ms); on both cores, 29 ms against 42 on the BLAS's threads. The bench's GPT-2, its whole
    prefill in turn with the one call's (the median of 11): 2 positions 47 against 62 ms, 5 64 against 82, 6 59
    against 86; a batch of 4 generating 16 tokens 1.14 against 1.32 s (the median of 5). From 8 rows the gain is
    gone (a batch of 8: 1.63 against 1.50 s; of 16, 2.09 against 2.07): hence SMALL_BLOCKS_MAX_ROWS, as for a weight
    stored [out, in]. Weights of GPT-2's four shapes at other widths, 5 rows, layers enough to be read from memory,
    in turn: 1,600 (GPT-2 XL's, blocks of 16 to 64 rows) 67 against 124 ms, 1,024 49 against 79, 512 79 against 103,
    384 107 against 109, 256 147 against 102 (its [256, 1,024] in blocks, the others one call: what a weight so
    small gains is less than handing out its runs costs, and the BLAS's threads, spinning after its one calls, slow
    the workers beside them): hence DEPTH_MIN_WEIGHT, which every weight of GPT-2 small and up clears."""
    depth, width = b.shape
    narrow = b.dtype not in (np.float32, np.float64)
    x = a.reshape(-1, depth)  # [rows, in]
    starts = range(0, depth, step)
    runs = min(DEPTH_PARTS, len(starts))
    cuts = [len(starts) * i // runs for i in range(runs + 1)]
    sums: list = [None] * runs

    def run(first: int, end: int) -> None:
        with one_blas_thread():
            for part in range(first, end):
                for start in starts[cuts[part] : cuts[part + 1]]:
                    block = b[start : start + step]
                    term = matmul(x[:, start : start + step], widened(block) if narrow else block)
                    sums[part] = term if sums[part] is None else np.add(sums[part], term, out=sums[part])

    with one_blas_thread():
        spread(run, runs)
    out = sums[0]
    for part in sums[1:]:
        np.add(out, part, out=out)
    return out.reshape(*a.shape[:-1], width)


def _has_small_kernel() -> bool:
    """Whether every BLAS NumPy loaded is OpenBLAS on kernels with its small-product kernel (found once)."""
    global _small_kernel
    if _small_kernel is None:
        libraries = _blas_libraries()
        _small_kernel = bool(libraries) and all(
            lib.internal_api == "openblas" and getattr(lib, "architecture", None) in SMALL_KERNEL_ARCHITECTURES
            for lib in libraries
        )
    return _small_kernel


def _few_rows(matmul, a, b):
    """a @ b for a short prompt's rows (or a batch's decode step, one row of each prompt) and a weight, where they are
    not cut into the small-product kernel's blocks (`_small_kernel_rows`): one call on the BLAS's threads, on one
    thread while other processes keep the cores busy where the two give the same bits (`_unless_busy`: GPT-2's prefill
    of 5 positions, two other processes spinning, 300 to 328 ms on the BLAS's threads against 128 to 139 on one, the
    Intel Xeon here; quiet, 57 to 66 against 80 to 91). Up to SWAP_ONE_CALL_MAX_ROWS rows times a weight stored [out,
    in] (a Linear's, used as its view W^T) are multiplied as W @ a^T, whose result is transposed back: OpenBLAS's
    kernels take a few rows much faster on that side (a Llama's [5, 1536] times its 20 layers' weights read from
    memory: 150 against 218 ms on the EPYC here, what the weights stored [in, out] cost; at 16 rows 179 against 260;
    a^T is a's view: a C-ordered copy of it, 163 and 191). From 24 rows, transposing the result back costs more than
    the call saves (GPT-2's [24, 768] x [768, 50257]: 25.6 against 23.2 ms). Not in column blocks of one-thread
    calls, though those were faster alone: the BLAS's threads spin for a while after a call on them, and one-thread
    calls beside a spinning one are slower (GPT-2's prefill of 5 positions, its logits in column blocks after its
    layers' products on the BLAS's threads: 51 against 46 ms, the median)."""
    if not _from_weights_side(a, b, SWAP_ONE_CALL_MAX_ROWS):
        return _unless_busy(a, b, lambda: matmul(a, b))
    rows_t = a.reshape(-1, b.shape[0]).T  # [in, rows], a view
    # copy(): C order, and a's or b's class
    return _unless_busy(a, b, lambda: matmul(b.T, rows_t).T.copy().reshape(*a.shape[:-1], b.shape[-1]))


def _narrow_row(gil_free, a, b):
    """a @ b for one row of a and a weight b held narrower than float32: b widened WIDEN_BYTES of float32 at a time
    into a buffer of the calling thread's own, which stays in its core's cache for the call that reads it, a call on
    one BLAS thread (gil_free's: see `sized_for_threads`); the blocks shared by spread.

    A decode step reads each weight once: widened whole first, it was read in its 2 bytes, written to memory in 4 and
    read back (the bench's 1.24B bfloat16 Llama: 3.6 times the float32 mode's step); in blocks, memory sees only its
    2 bytes. The blocks are fixed by the weight's shape alone (whole multiples of BLOCK_ALIGN columns), so the bits
    never depend on the load or on who computes which block; the buffer has the weight's layout (a block of W^T, for
    a weight stored [out, in], is a block of W's rows), so each call is the float32 weight's kind of call, over fewer
    columns. OpenBLAS 0.3.31 gives a row the same bits over such blocks as over the whole weight on one thread (the
    float32 mode's bits, but for the logits, whose one-thread and two-thread bits differ: see `_one_row`) for a weight
    stored [out, in], and for one stored [in, out] whose width is a multiple of 16 (a narrower last block adds in
    another order: its bits are still fixed by its shape); tests/engine/test_threads.py holds both."""
    depth, width = b.shape
    step = max(BLOCK_ALIGN, WIDEN_BYTES // (4 * depth) // BLOCK_ALIGN * BLOCK_ALIGN)
    transposed = b.strides[0] < b.strides[1]  # [out, in] storage read as W^T
    out = np.empty((*a.shape[:-1], width), np.float32)
    row, out_row = a.reshape(depth).astype(np.float32, copy=False), out.reshape(width)  # np.dot's out: its dtype

    def run(first: int, end: int) -> None:
        held = _widening_buffer(depth * step)
        with one_blas_thread():
            for start in range(first * step, min(end * step, width), step):
                stop = min(start + step, width)
                size = depth * (stop - start)
                wide = held[:size].reshape(stop - start, depth).T if transposed else held[:size].reshape(depth, -1)
                widened(b[:, start:stop], out=wide)
                gil_free(row, wide, out=out_row[start:stop])

    spread(run, -(-width // step))
    return out


_own = threading.local()  # each thread's buffer for _narrow_row's blocks


def _widening_buffer(size: int) -> np.ndarray:
    """The calling thread's float32 buffer of at least `size` numbers, kept for its next block (it stays in cache)."""
    held = getattr(_own, "buffer", None)
    if held is None or held.size < size:
        held = _own.buffer = np.empty(size, np.float32)
    return held


# per layout of a product made in one call: do one BLAS thread and the BLAS's threads give it the same bits?
_same_bits: dict[tuple, bool] = {}


def _one_row(matmul, a, b):
    """a @ b for one row of a: on the BLAS's threads while the cores are free, on one thread while other processes
    keep them busy, where the two give the same bits (`_unless_busy`).

    A row times a weight reads the weight once and does little else: the BLAS's threads read it faster than one
    (GPT-2's decode step 23 against 29 ms), but when other processes keep the cores busy they wait for each other at
    every call (394 against 33 to 50 ms, with two other processes spinning)."""
    return _unless_busy(a, b, lambda: matmul(a, b))


def _unless_busy(a, b, product: Callable[[], np.ndarray]) -> np.ndarray:
    """product() (a @ b, one call) on the BLAS's threads while the cores are free, on one thread while other processes
    keep them busy, where the two give the same bits. Whether one thread and the BLAS's threads add a product's terms
    in the same order depends on how the BLAS splits it (OpenBLAS 0.3.31: a row times GPT-2's and a Llama's layer
    weights, yes; times GPT-2's 50,257 logits, no), so it is seen, not assumed: the first product of each layout is
    computed both ways, and a layout whose bits differ keeps the BLAS's threads whatever the load."""
    layout = (a.shape, a.strides, a.dtype.str, b.shape, b.strides, b.dtype.str, _blas_threads())
    same = _same_bits.get(layout)
    if same is None:
        out = product()
        with one_blas_thread():
            _same_bits[layout] = np.array_equal(out, product())
        return out
    if same and cores_busy_elsewhere():
        with one_blas_thread():
            return product()
    return product()


def _blas_threads() -> tuple[int | None, ...]:
    return tuple(lib.get_num_threads() for lib in _blas_libraries())


LOAD_WINDOW = 0.1  # seconds between two looks at the cores
BUSY_ELSEWHERE = 0.5  # cores' worth of other processes' work from which the cores count as busy
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's units a second
_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None  # the cores this process may run on


class _Load:
    """The last look at the cores: when, the seconds all cores and this process had worked by then, and the verdict."""

    when = -1.0
    seconds: tuple[float, float] | None = None
    busy = False


def cores_busy_elsewhere() -> bool:
    """Whether other processes kept the cores busy (BUSY_ELSEWHERE or more) since the last look, at most LOAD_WINDOW
    ago: the time the cores this process may run on worked (/proc/stat, the host's steal included) less this process's
    own. False where /proc/stat is not there to read."""
    now = time.monotonic()
    if now - _Load.when < LOAD_WINDOW:
        return _Load.busy
    seconds = _worked_seconds()
    if seconds is not None and _Load.seconds is not None:
        elsewhere = (seconds[0] - _Load.seconds[0]) - (seconds[1] - _Load.seconds[1])
        _Load.busy = elsewhere / (now - _Load.when) >= BUSY_ELSEWHERE
    _Load.when, _Load.seconds = now, seconds
    return _Load.busy


def _worked_seconds() -> tuple[float, float] | None:
    """(seconds the cores this process may run on have worked since boot, seconds this process has), or None without
    /proc/stat. Only those cores: other processes busy on a big machine's other cores take nothing from ours."""
    try:
        with open("/proc/stat") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu") and line[3].isdigit()]
        worked = 0
        for name, *fields in lines:
            if _CORES is None or int(name[3:]) in _CORES:
                user, nice, system, _idle, _iowait, irq, softirq, steal = [int(n) for n in fields[:8]]
                worked += user + nice + system + irq + softirq + steal
    except (OSError, ValueError, IndexError):
        return None
    own = os.times()
    return worked / _TICKS, own.user + own.system


def _part(x, batch: tuple[int, ...], axis: int, first: int, end: int):
    """x's share of the calls first..end along `axis` of the product's stack `batch` (x broadcast over the stack, its
    stack axes aligned right): all of x where it has no such axis or size 1 there."""
    own = axis - (len(batch) - (x.ndim - 2))
    if own < 0 or x.shape[own] == 1:
        return x
    return x[(slice(None),) * own + (slice(first, end),)]


def one_blas_thread() -> OneBlasThread:
    """A context in which the calling thread's BLAS calls run on one thread, the BLAS's thread count as it was after."""
    return OneBlasThread(_blas_libraries())


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded, found once."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController().select(user_api="blas").lib_controllers
    return _blas


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
