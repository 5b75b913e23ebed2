"""engine/threads.py: each product on the threads it is sized for, chosen in one place, changing no bits.

A stack of products (attention's per-head scores and mix) runs each of its BLAS calls on one thread,
shared among the engine's workers when it is big; a product with a weight keeps the BLAS's threads. No
wall clock here: the benchmark (scripts/bench.py, its busy column) measures the speed. These tests hold
the numbers: a stack's bits are those of one call on one BLAS thread, however the stack is shared out and
whatever the BLAS's own thread count, and a whole pass gives the same logits and the same ledger on one
worker or several.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

import minitransformer
from conftest import write_gpt2, write_llama
from minitransformer import load_model
from minitransformer.engine import row_chunks, threads
from minitransformer.engine.ledger import Phase

PACKAGE = Path(minitransformer.__file__).parent
BLAS = ThreadpoolController().select(user_api="blas")
needs_blas = pytest.mark.skipif(not BLAS.lib_controllers, reason="threadpoolctl sees no BLAS under NumPy here")


def strided(rng, shape):
    """Random float32 numbers in a view that skips every other row, as attention's heads are views of q, k, v."""
    return rng.standard_normal((*shape[:-2], 2 * shape[-2], shape[-1])).astype(np.float32)[..., ::2, :]


def gpt2_chunk(rng):
    """The scores of one chunk of GPT-2's attention: q [12, 128, 64] and K^T [12, 64, 512], views of one qkv."""
    qkv = rng.standard_normal((512, 3 * 768)).astype(np.float32).reshape(512, 3, 12, 64)
    return qkv[128:256, 0].swapaxes(0, 1), qkv[:, 1].swapaxes(0, 1).swapaxes(-1, -2)


STACKS = {
    "gpt2 chunk scores": gpt2_chunk,
    "grouped heads (keys folded)": lambda rng: (strided(rng, (2, 6 * 40, 32)), strided(rng, (2, 32, 70))),
    "batch of heads": lambda rng: (strided(rng, (3, 4, 20, 16)), strided(rng, (3, 4, 16, 50))),
    "a shared by b's stack": lambda rng: (strided(rng, (37, 24)), strided(rng, (5, 24, 33))),
    "each broadcast over the other": lambda rng: (strided(rng, (1, 3, 40, 24)), strided(rng, (4, 1, 24, 33))),
    "decode rows": lambda rng: (strided(rng, (12, 1, 64)), strided(rng, (12, 64, 300))),
}


@needs_blas
@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_gives_the_bits_of_one_call_on_one_blas_thread_however_it_is_shared(stack, monkeypatch):
    """Every call of a stack is the same one-thread BLAS call, whichever worker makes it and however many there
    are, and whatever the BLAS's own thread count outside: OpenBLAS split among threads adds in another order."""
    a, b = STACKS[stack](np.random.default_rng(7))
    with threadpool_limits(limits=1, user_api="blas"):
        one_call = np.matmul(a, b)
    monkeypatch.setattr(threads, "SPREAD_MIN_MACS", 0)  # share out even the small stacks
    for workers in (1, 2, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        for blas_threads in (1, 2):
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                out = threads.sized_for_threads(np.matmul, a, b)
            assert out.shape == one_call.shape and out.dtype == one_call.dtype
            assert np.array_equal(out, one_call), (workers, blas_threads)


@needs_blas
def test_a_weight_keeps_the_blas_threads_a_stack_gets_one_and_the_setting_comes_back(monkeypatch):
    rng = np.random.default_rng(1)
    seen: list[tuple[str, int]] = []

    def spy(a, b, out=None):
        seen.append(("weight" if b.ndim == 2 else "stack", BLAS.info()[0]["num_threads"]))
        return np.matmul(a, b, out=out)

    monkeypatch.setattr(threads, "THREADS", 2)
    monkeypatch.setattr(threads, "SPREAD_MIN_MACS", 0)
    with threadpool_limits(limits=2, user_api="blas"):
        x, weight = rng.standard_normal((50, 40)).astype(np.float32), rng.standard_normal((40, 60)).astype(np.float32)
        assert np.array_equal(threads.sized_for_threads(spy, x, weight), np.matmul(x, weight))
        threads.sized_for_threads(spy, *gpt2_chunk(rng))  # 12 heads: one run of 6 on each of two workers
        assert BLAS.info()[0]["num_threads"] == 2  # the user's setting, back after the product
    assert seen == [("weight", 2), ("stack", 1), ("stack", 1)]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_pass_gives_the_same_logits_and_ledger_on_one_worker_or_several(family, tmp_path, monkeypatch):
    """A prompt of 300 positions in chunks of 128 query rows, a batch of two, and a decode step: the heads of every
    stack shared among three workers, or all on the calling thread."""
    if family == "gpt2":
        model = load_model(write_gpt2(tmp_path / "m", n_layer=2, n_head=4, n_embd=64, n_positions=320, vocab_size=300))
    else:  # grouped-query: 4 query heads over 2 key/value heads
        model = load_model(write_llama(tmp_path / "m", n_layer=2, n_head=4, n_kv_head=2, n_embd=64, n_inner=96,
                                       n_positions=320, vocab_size=300))  # fmt: skip
    assert row_chunks.ROW_CHUNK < 300
    ids = np.arange(300) % 300
    batch = np.stack([ids[:200], ids[100:]])

    def run():
        phase = Phase("prefill", 0, 300, 300)
        logits = model.run(ids, all_positions=True, phase=phase)
        cache = model.new_cache(batch=(2,), capacity=201)
        batched = model.run(batch, cache=cache)
        step = model.run(np.array([[5], [7]]), cache=cache)
        return [logits, batched, step], phase.records

    monkeypatch.setattr(threads, "SPREAD_MIN_MACS", 0)
    monkeypatch.setattr(threads, "THREADS", 3)
    shared, shared_ledger = run()
    monkeypatch.setattr(threads, "THREADS", 1)
    alone, alone_ledger = run()
    assert all(np.array_equal(s, a) for s, a in zip(shared, alone))
    assert shared_ledger == alone_ledger and len(alone_ledger) > 0


def imports_of(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_thread_choice_lives_in_one_place():
    """threads.py alone sets the BLAS's threads (threadpoolctl) and keeps a pool of workers (concurrent.futures;
    no other module of the engine or the families starts a thread); Tape.matmul alone asks it how to run a product,
    ops.rowwise alone shares rows out; nothing sets a thread count through the environment. (The hub's download
    check waits for an answer on a thread of its own, which computes nothing; the bandwidth probe of count --hardware
    this-cpu reads its slices on the engine's workers, through spread.)"""
    home = PACKAGE / "engine" / "threads.py"
    callers: dict[str, set[str]] = {"sized_for_threads": set(), "spread": set()}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        if path != home:
            computes = where.startswith(("engine/", "families/"))
            threading = {"threading"} if computes else set()
            assert not imports_of(tree) & {"threadpoolctl", "concurrent", "multiprocessing", *threading}, where
            assert "NUM_THREADS" not in path.read_text(), where
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in callers:
                        callers[call.func.id].add(f"{where}:{node.name}")
    assert callers == {"sized_for_threads": {"engine/tape.py:matmul"},
                       "spread": {"engine/ops.py:rowwise", "engine/threads.py:sized_for_threads",
                                  "verbs/hardware.py:streaming_bandwidth"}}  # fmt: skip
