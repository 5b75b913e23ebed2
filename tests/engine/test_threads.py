"""engine/threads.py: each product on the threads it is sized for, chosen in one place, changing no bits.

A stack of products (attention's per-head scores and mix) runs each of its BLAS calls on one thread,
shared among the engine's workers when it is big; a prompt's product with a weight runs in column blocks,
each on one BLAS thread, shared the same way; a decode step's row keeps the BLAS's threads unless the
cores are busy elsewhere and one thread gives the same bits. No wall clock here: the benchmark
(scripts/bench.py, its busy column) measures the speed. These tests hold the numbers (a stack's bits
are those of one call on one BLAS thread, a prompt's product those of its blocks' one-thread calls,
however they are shared out and whatever the BLAS's own thread count; a whole pass gives the same
logits and the same ledger on one worker or several), and the sharing itself: nobody waits for a run
that no one has begun, and an error in a run reaches the caller.
"""

from __future__ import annotations

import ast
import weakref
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
    monkeypatch.setattr(threads, "_same_bits", {})
    with threadpool_limits(limits=2, user_api="blas"):
        x, weight = rng.standard_normal((20, 40)).astype(np.float32), rng.standard_normal((40, 60)).astype(np.float32)
        assert np.array_equal(threads.sized_for_threads(spy, x, weight), np.matmul(x, weight))
        threads.sized_for_threads(spy, *gpt2_chunk(rng))  # 12 heads in 8 runs, taken by two threads
        assert BLAS.info()[0]["num_threads"] == 2  # the user's setting, back after the product
    # the weight's product on the BLAS's threads, the first of its layout made on one thread too (`_unless_busy`)
    assert seen == [("weight", 2), ("weight", 1)] + [("stack", 1)] * 8, seen


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
        short = model.run(ids[:5], all_positions=True)  # a few rows: the small kernel's blocks, of depth for GPT-2's
        return [logits, batched, step, short], phase.records

    monkeypatch.setattr(threads, "SPREAD_MIN_MACS", 0)
    monkeypatch.setattr(threads, "DEPTH_MIN_WEIGHT", 0)
    monkeypatch.setattr(threads, "_small_kernel", True)
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
    """threads.py alone sets the BLAS's threads (threadpoolctl) and keeps the engine's workers (threading; no other
    module of the engine or the families starts a thread); Tape.matmul alone asks it how to run a product,
    ops.rowwise alone shares rows out; nothing sets a thread count through the environment. (The hub's download
    check waits for an answer on a thread of its own, which computes nothing; the bandwidth probe of count --hardware
    this-cpu reads its slices on the engine's workers, through spread. The table of families takes a lock, which starts
    no thread, while it loads a family.)"""
    home = PACKAGE / "engine" / "threads.py"
    callers: dict[str, set[str]] = {"sized_for_threads": set(), "spread": set()}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        if path != home:
            computes = where.startswith(("engine/", "families/"))
            locks_only = where == "families/table.py" and "Thread(" not in path.read_text()
            threading = {"threading"} if computes and not locks_only else set()
            assert not imports_of(tree) & {"threadpoolctl", "concurrent", "multiprocessing", *threading}, where
            assert "NUM_THREADS" not in path.read_text(), where
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in callers:
                        callers[call.func.id].add(f"{where}:{node.name}")
    assert callers == {"sized_for_threads": {"engine/tape.py:_product"},
                       "spread": {"engine/ops.py:rowwise", "engine/threads.py:sized_for_threads",
                                  "engine/threads.py:_with_weight", "engine/threads.py:_narrow_row",
                                  "engine/threads.py:_in_depth_blocks", "verbs/hardware.py:streaming_bandwidth"}}  # fmt: skip


def one_thread_blocks(x, weight, blocks, from_weights_side: bool):
    """x @ weight block by block, each block's call on one BLAS thread, one after the other here: x @ W_block, or
    W_block @ x^T transposed back (from the weight's side, x^T a view)."""
    with threadpool_limits(limits=1, user_api="blas"):
        if from_weights_side:
            return np.concatenate([(weight[:, start:stop].T @ x.T).T for start, stop in blocks], axis=-1)
        return np.concatenate([x @ weight[:, start:stop] for start, stop in blocks], axis=-1)


@needs_blas
@pytest.mark.parametrize("rows, width, out_in", [(300, 1200, True), (129, 1200, True), (128, 1200, True),
                                                 (32, 50, True), (64, 4096 + 7, True),
                                                 (64, 1200, False), (300, 1200, False)])  # fmt: skip
def test_a_prompts_product_with_a_weight_has_the_bits_of_its_blocks_one_thread_calls(rows, width, out_in, monkeypatch):
    """Column blocks fixed by the weight's width alone: the same bits on one worker or three, on one BLAS thread or
    two, and equal to the blocks' one-thread calls made one after the other here. Up to SWAP_MAX_ROWS rows times a
    weight stored [out, in] (a Linear's, used as W^T), each block is W_block @ x^T transposed back; more rows, or a
    weight stored [in, out], x @ W_block; either within a rounding of x @ W."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    stored = rng.standard_normal((width, 64) if out_in else (64, width)).astype(np.float32)
    weight = stored.T if out_in else stored  # [out, in] used as its view W^T, or [in, out] as it is
    monkeypatch.setattr(threads, "BLOCKS_MIN_MACS", 0)
    from_weights_side = out_in and rows <= threads.SWAP_MAX_ROWS
    expected = one_thread_blocks(x, weight, threads.column_blocks(width), from_weights_side)
    assert np.allclose(expected, x @ weight, rtol=1e-5, atol=1e-4), np.abs(expected - x @ weight).max()
    for workers in (1, 2, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        for blas_threads in (1, 2):
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                out = threads.sized_for_threads(np.matmul, x, weight)
            assert out.flags.c_contiguous and np.array_equal(out, expected), (workers, blas_threads)
    calls = []  # the calls' left operands: the weight's blocks [block, in] from its side, else x [rows, in]

    def recorded(a, b, **out):
        calls.append(a.shape)
        return np.matmul(a, b, **out)

    threads.sized_for_threads(recorded, x, weight)
    blocks = threads.column_blocks(width)
    taken = [(stop - start, 64) for start, stop in blocks] if from_weights_side else [(rows, 64)] * len(blocks)
    assert sorted(calls) == sorted(taken), (calls, taken)


@needs_blas
@pytest.mark.parametrize("rows", [2, 5, 16, 17, 31])
def test_a_short_prompts_product_with_an_out_in_weight_is_taken_from_the_weights_side(rows, monkeypatch):
    """Up to SWAP_ONE_CALL_MAX_ROWS rows (fewer than column blocks need) and a weight stored [out, in] (used as its
    view W^T), on a BLAS without OpenBLAS's small-product kernel: computed as W @ x^T (x^T a view) and transposed
    back, a fresh C-ordered [rows, out] (a batch's [B, T, in] keeps its leading axes), equal to x @ W^T to a rounding
    of its terms. More rows, an [in, out] weight and a single row are x @ W as given, bit for bit."""
    monkeypatch.setattr(threads, "_small_kernel", False)
    rng = np.random.default_rng(8)
    stored = rng.standard_normal((300, 96)).astype(np.float32)  # [out, in]
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    out = threads.sized_for_threads(np.matmul, x, stored.T)
    assert out.shape == (rows, 300) and out.flags.c_contiguous
    swapped = rows <= threads.SWAP_ONE_CALL_MAX_ROWS
    expected = (stored @ x.T).T if swapped else x @ stored.T
    assert np.array_equal(out, expected), (rows, np.abs(out - expected).max())
    assert np.allclose(out, x @ stored.T, rtol=1e-5, atol=1e-5), np.abs(out - x @ stored.T).max()
    batch = threads.sized_for_threads(np.matmul, x.reshape(1, rows, 96), stored.T)
    assert batch.shape == (1, rows, 300) and np.array_equal(batch[0], out)
    in_out = np.ascontiguousarray(stored.T)
    assert np.array_equal(threads.sized_for_threads(np.matmul, x, in_out), x @ in_out)
    with threadpool_limits(limits=1, user_api="blas"):  # a decode step's row: `_one_row`, x @ W^T as given
        assert np.array_equal(threads.sized_for_threads(np.matmul, x[:1], stored.T), x[:1] @ stored.T)


@needs_blas
@pytest.mark.parametrize("rows, depth, width", [(2, 96, 1000 + 7), (5, 1536, 4096), (6, 4096, 1536), (3, 40, 50)])
def test_a_few_rows_times_an_out_in_weight_are_cut_for_the_small_kernel_with_the_bits_of_its_blocks(
    rows, depth, width, monkeypatch
):
    """Up to SMALL_BLOCKS_MAX_ROWS rows times a weight stored [out, in], on a BLAS with OpenBLAS's small-product
    kernel (set here, so that the test holds on any BLAS): blocks of the weight's rows within that kernel's permit
    (rows x block at most 1,200, rows x block x depth at most 10^6, a multiple of 16 rows), each W_block @ x^T on one
    BLAS thread; the bits of those calls made one after the other here, on one worker or three, the BLAS on one
    thread or two outside, and within a rounding of x @ W^T. More rows, a weight stored [in, out], a weight too shallow
    for its widest block to hold SMALL_BLOCK_MIN_NUMBERS and a BLAS without the kernel are not cut so."""
    rng = np.random.default_rng(11)
    stored = rng.standard_normal((width, depth)).astype(np.float32)  # [out, in]
    x = rng.standard_normal((rows, depth)).astype(np.float32)
    monkeypatch.setattr(threads, "_small_kernel", True)
    floor = threads.SMALL_BLOCK_MIN_NUMBERS
    monkeypatch.setattr(threads, "SMALL_BLOCK_MIN_NUMBERS", 0)  # the shallow weights here cut as a deep one is
    step = threads._small_kernel_rows(x, stored.T)
    assert step % threads.BLOCK_ALIGN == 0 and 0 < step <= min(1200 // rows, 10**6 // (rows * depth)) < step + 16, step
    blocks = [(start, min(start + step, width)) for start in range(0, width, step)]
    expected = one_thread_blocks(x, stored.T, blocks, from_weights_side=True)
    assert np.allclose(expected, x @ stored.T, rtol=1e-5, atol=1e-4), np.abs(expected - x @ stored.T).max()
    for workers in (1, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        for blas_threads in (1, 2):
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                out = threads.sized_for_threads(np.matmul, x, stored.T, np.dot)  # as the door hands them over
            assert out.flags.c_contiguous and np.array_equal(out, expected), (workers, blas_threads)
    calls, matmuls = [], []  # each block call's left operand: a block of the weight's rows, [block, in]

    def recorded(a, b):  # np.dot, which lets go of the GIL for a block of a few hundred outputs (np.matmul does not)
        calls.append(a.shape)
        return np.dot(a, b)

    def no_matmul(a, b, **out):
        matmuls.append(a.shape)
        return np.matmul(a, b, **out)

    batch = threads.sized_for_threads(no_matmul, x.reshape(1, rows, depth), stored.T, recorded)  # a batch's step
    assert np.array_equal(batch[0], expected)
    assert sorted(calls) == sorted((stop - start, depth) for start, stop in blocks) and not matmuls, (calls, matmuls)
    more = rng.standard_normal((threads.SMALL_BLOCKS_MAX_ROWS + 1, depth)).astype(np.float32)
    not_cut = {"more rows": threads._small_kernel_rows(more, stored.T),
               "stored [in, out]": threads._small_kernel_rows(x, np.ascontiguousarray(stored.T))}  # fmt: skip
    monkeypatch.setattr(threads, "SMALL_BLOCK_MIN_NUMBERS", 1200 // rows * depth + 1)  # its widest block one short
    not_cut["too shallow"] = threads._small_kernel_rows(x, stored.T)
    monkeypatch.setattr(threads, "SMALL_BLOCK_MIN_NUMBERS", 1200 // rows * depth)  # ... and at the floor: cut
    assert threads._small_kernel_rows(x, stored.T) == step
    monkeypatch.setattr(threads, "SMALL_BLOCK_MIN_NUMBERS", floor)
    monkeypatch.setattr(threads, "_small_kernel", False)
    not_cut["a BLAS without the kernel"] = threads._small_kernel_rows(x, stored.T)
    assert not_cut == dict.fromkeys(not_cut, 0), not_cut


def one_thread_depth_blocks(x, weight, step: int, runs: int):
    """x @ weight ([in, out]) the way `_in_depth_blocks` adds it up, here on one BLAS thread one call after another:
    the blocks of `step` rows in `runs` runs of consecutive blocks, each run's terms summed in order, then the runs'."""
    starts = list(range(0, weight.shape[0], step))
    cuts = [len(starts) * i // runs for i in range(runs + 1)]
    with threadpool_limits(limits=1, user_api="blas"):
        sums = []
        for first, end in zip(cuts, cuts[1:]):
            total = x[:, starts[first] : starts[first] + step] @ weight[starts[first] : starts[first] + step]
            for start in starts[first + 1 : end]:
                total = total + x[:, start : start + step] @ weight[start : start + step]
            sums.append(total)
        out = sums[0]
        for total in sums[1:]:
            out = out + total
    return out


@needs_blas
@pytest.mark.parametrize("rows, depth, width", [(2, 768, 2304), (5, 768, 3072), (6, 3072, 768), (5, 1600, 6400),
                                                (3, 336, 1000)])  # fmt: skip
def test_a_few_rows_times_an_in_out_weight_are_cut_along_its_depth_with_the_bits_of_its_blocks(
    rows, depth, width, monkeypatch
):
    """Up to SMALL_BLOCKS_MAX_ROWS rows times a weight stored [in, out] (GPT-2's Conv1D), on a BLAS with OpenBLAS's
    small-product kernel (set here, so that the test holds on any BLAS): blocks of the weight's rows within the
    kernel's permit (rows x width x block at most 10^6, a multiple of 16 rows, at most SMALL_DEPTH_BLOCK), each
    x_block @ W_block on one BLAS thread, in DEPTH_PARTS runs each summed in order, the runs' sums added in order; the
    bits of those calls made one after the other here, on one worker or three, the BLAS on one thread or two outside,
    and within a rounding of x @ W. More rows, a weight stored [out, in], one too small or too wide, and a BLAS without
    the kernel are not cut so."""
    rng = np.random.default_rng(12)
    weight = rng.standard_normal((depth, width)).astype(np.float32)  # [in, out], as a Conv1D stores it
    x = rng.standard_normal((rows, depth)).astype(np.float32)
    monkeypatch.setattr(threads, "_small_kernel", True)
    step = threads._small_kernel_depth(x, weight)
    assert step == min(threads.SMALL_DEPTH_BLOCK, 10**6 // (rows * width)) // 16 * 16 >= 16, step
    runs = min(threads.DEPTH_PARTS, -(-depth // step))
    expected = one_thread_depth_blocks(x, weight, step, runs)
    assert np.allclose(expected, x @ weight, rtol=1e-5, atol=1e-3), np.abs(expected - x @ weight).max()
    for workers in (1, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        for blas_threads in (1, 2):
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                out = threads.sized_for_threads(np.matmul, x, weight)
            assert out.flags.c_contiguous and np.array_equal(out, expected), (workers, blas_threads)
    calls = []  # each call's operands' shapes: x's columns of a block [rows, block] and the block [block, out]

    def recorded(a, b, **out):
        calls.append((a.shape, b.shape))
        return np.matmul(a, b, **out)

    batch = threads.sized_for_threads(recorded, x.reshape(1, rows, depth), weight)  # a batch's decode step's rows
    assert batch.shape == (1, rows, width) and np.array_equal(batch[0], expected)
    blocks = [min(step, depth - start) for start in range(0, depth, step)]
    assert sorted(calls) == sorted(((rows, n), (n, width)) for n in blocks), calls
    more = rng.standard_normal((threads.SMALL_BLOCKS_MAX_ROWS + 1, depth)).astype(np.float32)
    not_cut = {"more rows": threads._small_kernel_depth(more, weight),
               "stored [out, in]": threads._small_kernel_depth(x, np.ascontiguousarray(weight.T).T),
               "too wide": threads._small_kernel_depth(x, np.zeros((depth, 10**6 // (16 * rows) + 1), np.float32)),
               "too small": threads._small_kernel_depth(x, weight[:, : threads.DEPTH_MIN_WEIGHT // depth - 1])}  # fmt: skip
    monkeypatch.setattr(threads, "_small_kernel", False)
    not_cut["a BLAS without the kernel"] = threads._small_kernel_depth(x, weight)
    assert not_cut == dict.fromkeys(not_cut, 0), not_cut


@needs_blas
def test_a_few_rows_times_a_narrow_in_out_weight_have_the_bits_of_the_float32_weights(monkeypatch):
    """A weight stored [in, out] kept in its 2 bytes, a few rows' product cut along its depth: each block widened as
    its call comes, the float32 weight's blocks bit for bit, on one worker or three."""
    rng = np.random.default_rng(13)
    b = narrow_weight(rng, 768, 384, False, "bfloat16")  # [in, out]
    x = rng.standard_normal((5, 768)).astype(np.float32)
    monkeypatch.setattr(threads, "_small_kernel", True)
    assert threads.widens_itself(x, b) and threads._small_kernel_depth(x, b) == 64
    expected = one_thread_depth_blocks(x, b.astype(np.float32), 64, threads.DEPTH_PARTS)
    for workers in (1, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        out = threads.sized_for_threads(np.matmul, x, b)
        assert out.dtype == np.float32 and np.array_equal(out, expected), (workers, np.abs(out - expected).max())


NARROW_WEIGHTS = {  # (in, out, stored [out, in] as a Linear's or [in, out] as a Conv1D's, the format)
    "Llama-like [out, in], bfloat16": (96, 200 + 7, True, "bfloat16"),
    "GPT-2-like [in, out], bfloat16": (96, 304, False, "bfloat16"),  # a width of whole blocks of 16: see _narrow_row
    "a block narrower than the alignment": (3000, 40, True, "bfloat16"),
    "float16 [out, in]": (64, 130, True, "float16"),
}


def narrow_weight(rng, depth: int, width: int, out_in: bool, fmt: str) -> np.ndarray:
    import ml_dtypes

    dtype = np.float16 if fmt == "float16" else ml_dtypes.bfloat16
    if out_in:  # [out, in] as checkpoints store it, used as W^T
        return rng.standard_normal((width, depth)).astype(np.float32).astype(dtype).T
    return rng.standard_normal((depth, width)).astype(np.float32).astype(dtype)


@needs_blas
@pytest.mark.parametrize("weight", NARROW_WEIGHTS)
def test_a_row_times_a_narrow_weight_widened_in_blocks_has_the_bits_of_the_weight_widened_whole(weight, monkeypatch):
    """A decode step's row times a weight kept in its 2 bytes: widened a block of columns at a time into a buffer that
    stays in cache, each block's call on one BLAS thread, np.dot's as the door hands it over (np.matmul keeps the GIL
    through a block's call). The bits of the float32 weight's one np.matmul on one BLAS thread (the float32 mode's,
    and what widening the weight whole gave), on one worker or three, the BLAS on one thread or two outside."""
    rng = np.random.default_rng(5)
    depth, width, out_in, fmt = NARROW_WEIGHTS[weight]
    b = narrow_weight(rng, depth, width, out_in, fmt)
    x = rng.standard_normal((1, depth)).astype(np.float32)
    monkeypatch.setattr(threads, "WIDEN_BYTES", 4 * depth * 48)  # 48 columns a block: several blocks, a short last one
    with threadpool_limits(limits=1, user_api="blas"):
        expected = x @ b.astype(np.float32)
    assert threads.widens_itself(x, b)
    for workers in (1, 2, 3):
        monkeypatch.setattr(threads, "THREADS", workers)
        for blas_threads in (1, 2):
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                out = threads.sized_for_threads(np.matmul, x, b, np.dot)  # as the door hands them over
            difference = np.abs(out - expected).max()
            assert out.dtype == np.float32 and np.array_equal(out, expected), (workers, blas_threads, difference)
    blocks, products = [], []

    def block_product(row, wide, out):
        blocks.append(wide.shape)
        return np.dot(row, wide, out=out)

    def no_matmul(a, b, **out):
        products.append(b.shape)
        return np.matmul(a, b, **out)

    out = threads.sized_for_threads(no_matmul, x.reshape(1, 1, depth), b, block_product)  # a batch of one's row
    assert out.shape == (1, 1, width) and np.array_equal(out[0], expected)
    in_order = [(depth, min(48, width - start)) for start in range(0, width, 48)]  # the workers take them in any order
    assert sorted(blocks) == sorted(in_order) and not products, (blocks, products)


@needs_blas
def test_a_prompts_product_with_a_narrow_weight_has_the_bits_of_the_float32_weights(monkeypatch):
    """A prompt's column blocks widened one at a time as their calls come: the float32 weight's blocks, bit for bit."""
    rng = np.random.default_rng(6)
    b = narrow_weight(rng, 64, 1200, True, "bfloat16")
    x = rng.standard_normal((40, 64)).astype(np.float32)
    monkeypatch.setattr(threads, "BLOCKS_MIN_MACS", 0)
    monkeypatch.setattr(threads, "SMALL_BLOCK_MIN_NUMBERS", 0)
    monkeypatch.setattr(threads, "_small_kernel", False)
    assert threads.widens_itself(x, b) and not threads.widens_itself(x[:5], b)  # a short prompt's: widened by the tape
    monkeypatch.setattr(threads, "_small_kernel", True)  # ... unless it is cut into the small kernel's blocks
    assert threads.widens_itself(x[:5], b) and not threads.widens_itself(x[:7], b)
    with threadpool_limits(limits=1, user_api="blas"):
        wide = np.ascontiguousarray(b.astype(np.float32).T)  # [out, in], as the float32 mode holds it
        expected = np.concatenate([(wide[start : start + 240] @ x[:5].T).T for start in range(0, 1200, 240)], axis=1)
    assert threads._small_kernel_rows(x[:5], b) == 240  # 1200 // 5 rows (10^6 // (5 * 64) is more), a multiple of 16
    assert np.array_equal(threads.sized_for_threads(np.matmul, x[:5], b), expected)
    monkeypatch.setattr(threads, "_small_kernel", False)
    for workers in (1, 3):  # 40 rows: blocks from the weight's side
        monkeypatch.setattr(threads, "THREADS", workers)
        wide = threads.sized_for_threads(np.matmul, x, np.ascontiguousarray(b.astype(np.float32).T).T)
        assert np.array_equal(threads.sized_for_threads(np.matmul, x, b), wide), workers


# width -> blocks: an even count (two workers finish together: 3 blocks kept one of them busy twice as long), of 512
# columns or more, at least 2, at most 16, none narrower than 16
BLOCK_COUNTS = {16: 1, 17: 1, 100: 2, 512: 2, 768: 2, 1536: 2, 2304: 4, 2560: 4, 3072: 6, 5632: 10, 50257: 16}


@pytest.mark.parametrize("width", BLOCK_COUNTS)
def test_column_blocks_cover_the_columns_once_in_aligned_blocks(width):
    blocks = threads.column_blocks(width)
    assert len(blocks) == BLOCK_COUNTS[width]
    assert blocks[0][0] == 0 and blocks[-1][1] == width
    assert all(stop == start for (_, stop), (start, _) in zip(blocks, blocks[1:]))  # contiguous, no overlap
    assert all(start % threads.BLOCK_ALIGN == 0 and stop > start for start, stop in blocks)


def test_spread_never_waits_for_a_run_nobody_has_begun(monkeypatch):
    """Workers that never get a core (here: none serve the queue at all) leave every run to the calling thread, which
    returns once they are done rather than waiting for the workers."""

    class Unserved:
        """A queue whose shares no worker takes: a worker an earlier test started asks it for work when it next
        looks (the module's queue is read afresh each time) and waits on the real queue instead. (A plain new queue
        in its place let such a worker take shares now and then: this test failed in one of CI's runs.)"""

        def __init__(self, real) -> None:
            self.shares: list = []
            self.get = real.get

        def put(self, share) -> None:
            self.shares.append(share)

        def qsize(self) -> int:
            return len(self.shares)

    monkeypatch.setattr(threads, "THREADS", 3)
    monkeypatch.setattr(threads, "_tasks", Unserved(threads._tasks))
    monkeypatch.setattr(threads, "_start_workers", lambda: None)
    done: list[int] = []
    threads.spread(lambda first, end: done.extend(range(first, end)), 50)
    assert sorted(done) == list(range(50))
    # the shares left in the queue for the late workers no longer hold the work, nor the arrays it uses
    activation = np.ones(1000, np.float32)
    alive = weakref.ref(activation)
    threads.spread(lambda first, end, activation=activation: None, 10)
    del activation
    assert alive() is None and threads._tasks.qsize() == 4


def test_spread_raises_a_runs_error_once_the_runs_begun_have_ended(monkeypatch):
    monkeypatch.setattr(threads, "THREADS", 2)
    done: list[int] = []

    def work(first: int, end: int) -> None:
        if first == 0:
            raise ValueError("run 0")
        done.extend(range(first, end))

    with pytest.raises(ValueError, match="run 0"):
        threads.spread(work, 40)
    assert len(set(done)) == len(done) and all(i >= 5 for i in done)  # no item twice; run 0 (items 0..4) never done


@needs_blas
@pytest.mark.parametrize("rows, out_in", [(1, False), (1, True), (5, False), (5, True), (20, True)])
def test_a_product_in_one_call_goes_to_one_blas_thread_when_busy_only_where_the_bits_agree(rows, out_in, monkeypatch):
    """A decode step's row (`_one_row`) and a short prompt's rows not cut into blocks (`_few_rows`, 5 rows times a
    weight stored [in, out] or from the weight's side, [out, in]; 20 rows, x @ W^T as given): the first product of
    a layout is made both ways; busy cores send later ones to one thread only if the bits agreed. A BLAS whose one
    thread differs (simulated) keeps its threads, busy or not."""
    monkeypatch.setattr(threads, "_small_kernel", False)
    rng = np.random.default_rng(5)
    row = rng.standard_normal((rows, 96)).astype(np.float32)
    weight = (
        rng.standard_normal((80, 96)).astype(np.float32).T
        if out_in
        else rng.standard_normal((96, 80)).astype(np.float32)
    )
    swapped = out_in and 1 < rows <= threads.SWAP_ONE_CALL_MAX_ROWS
    expected = np.matmul(weight.T, row.T).T if swapped else np.matmul(row, weight)
    seen: list[int] = []

    def spy(a, b, out=None):
        seen.append(BLAS.info()[0]["num_threads"])
        return np.matmul(a, b, out=out)

    def differs_on_one_thread(a, b, out=None):
        return np.matmul(a, b) + (BLAS.info()[0]["num_threads"] == 1)

    monkeypatch.setattr(threads, "_same_bits", {})
    with threadpool_limits(limits=2, user_api="blas"):
        for busy in (False, True):
            monkeypatch.setattr(threads, "cores_busy_elsewhere", lambda busy=busy: busy)
            seen.clear()
            assert np.array_equal(threads.sized_for_threads(spy, row, weight), expected)
            assert np.array_equal(threads.sized_for_threads(spy, row, weight), expected)
            # the first product of the layout made both ways (busy=False), then quiet: the BLAS's two; busy: one
            assert seen == ([2, 1, 2] if not busy else [1, 1])
            narrow = weight[:, :40]
            made = threads.sized_for_threads(differs_on_one_thread, row, narrow)
            assert np.array_equal(made, np.matmul(narrow.T, row.T).T if swapped else row @ narrow)
        assert BLAS.info()[0]["num_threads"] == 2
    learned = {layout[3]: same for layout, same in threads._same_bits.items()}
    assert learned == {(96, 80): True, (96, 40): False}, learned


def test_the_cores_count_as_busy_from_half_a_core_of_other_work(monkeypatch):
    """Other processes' seconds = every core's worked seconds less this process's, over the time between two looks."""
    clock = iter([10.0, 10.05, 10.2, 10.4, 10.6])
    worked = iter([(100.0, 5.0), (100.4, 5.2), (100.5, 5.3), (100.9, 5.65)])
    monkeypatch.setattr(threads, "time", type("Clock", (), {"monotonic": staticmethod(lambda: next(clock))}))
    monkeypatch.setattr(threads, "_worked_seconds", lambda: next(worked))
    monkeypatch.setattr(threads, "_Load", type("Load", (), {"when": -1.0, "seconds": None, "busy": False}))
    assert threads.cores_busy_elsewhere() is False  # the first look: nothing to compare with
    assert threads.cores_busy_elsewhere() is False  # 0.05 s later: within LOAD_WINDOW, the last verdict
    assert threads.cores_busy_elsewhere() is True  # 0.2 s: 0.4 - 0.2 of this process = 0.2 s elsewhere, 1 core
    assert threads.cores_busy_elsewhere() is False  # 0.2 s: 0.1 - 0.1 = nothing elsewhere
    assert threads.cores_busy_elsewhere() is False  # 0.2 s: 0.4 - 0.35 = 0.05 s elsewhere, a quarter of a core


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat here: the cores count as free")
def test_the_cores_worked_at_least_as_long_as_this_process():
    """Read from /proc/stat over the cores this process may run on: since boot they worked at least as long as this
    process did on them (its threads ran nowhere else)."""
    cores, own = threads._worked_seconds()
    assert 0 < own <= cores + 0.1  # a tick of rounding on each side
