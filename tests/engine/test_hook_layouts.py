"""A hook may hand back its tensor in any memory layout: the forward pass must compute the same logits.

The stages that run on several threads (softmax, the MLP activation: ops.rowwise) split their rows
into views of a C-ordered output; a replacement that is Fortran-ordered, strided, reversed or
read-only must neither be written over nor make them write into a copy that is then dropped.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_gpt2
from minitransformer import load_model
from minitransformer.engine import ops, row_chunks
from minitransformer.engine import threads as engine_threads


def fortran(t):
    return np.asfortranarray(t)


def strided(t):  # every other entry of a buffer twice as wide
    wide = np.zeros((*t.shape[:-1], 2 * t.shape[-1]), t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


def reversed_strides(t):  # negative strides on every axis
    return np.flip(np.flip(t).copy())


def transposed(t):  # the last two axes swapped in memory
    return np.ascontiguousarray(t.swapaxes(-1, -2)).swapaxes(-1, -2)


def read_only(t):
    held = t.copy()
    held.flags.writeable = False
    return held


LAYOUTS = [fortran, strided, reversed_strides, transposed, read_only]
STAGES = ["blocks.0.attn.qkv", "blocks.0.attn.q", "blocks.0.attn.qk", "blocks.0.attn.scaled",
          "blocks.0.attn.scores", "blocks.0.attn.weights", "blocks.0.mlp.up", "blocks.0.mlp.act"]  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    # 1 layer, 4 heads, d_model 64: at T = 1100 the scores [4, T, T] and, with a batch of 2, u [2, T/2, 256]
    # are both past ops.PARALLEL_MIN_SIZE, so softmax and the activation split their rows among threads.
    directory = tmp_path_factory.mktemp("layouts") / "wide"
    return load_model(write_gpt2(directory, n_layer=1, n_head=4, n_embd=64, n_positions=1100, vocab_size=512))


@pytest.fixture
def threaded(monkeypatch):
    """Two threads whatever the machine, and a record of the row blocks each row-wise stage was given."""
    monkeypatch.setattr(engine_threads, "THREADS", 2)
    calls: list[tuple[str, tuple[int, ...]]] = []
    for name in ("_softmax_rows", "_gelu_tanh_rows"):
        plain = getattr(ops, name)

        def spy(x, out=None, plain=plain, name=name):
            calls.append((name, x.shape))
            return plain(x, out)

        monkeypatch.setattr(ops, name, spy)
    return calls


@pytest.mark.parametrize("ids_shape", [(1100,), (2, 550)], ids=["T=1100", "B=2,T=550"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_replacement_in_any_layout_gives_the_same_logits(model, threaded, layout, ids_shape, monkeypatch):
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", ids_shape[-1])  # the unhooked pass dense too, as a hooked one is
    ids = np.random.default_rng(0).integers(0, 512, ids_shape)
    expected = model.logits(ids)
    for name, rows in (("_softmax_rows", ids.size * 4), ("_gelu_tanh_rows", ids.size)):  # B H T and B T rows
        blocks = [shape[0] for called, shape in threaded if called == name]
        assert len(blocks) > 1 and sum(blocks) == rows, f"{name} did not split its {rows} rows: {blocks}"
    for stage in STAGES:
        given = {}

        def replace(tensor, name):
            given["array"] = layout(tensor)
            given["values"] = tensor.copy()
            return given["array"]

        with model.add_hook(stage, replace):
            got = model.logits(ids)
        assert np.isfinite(got).all(), f"{layout.__name__} at {stage}: non-finite logits"
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5, err_msg=f"{layout.__name__} at {stage}")
        assert np.array_equal(given["array"], given["values"]), (
            f"the pass wrote into the array the hook returned at {stage}"
        )


def test_rowwise_writes_into_an_out_in_any_layout(threaded):
    """An `out` that is not C-contiguous is written itself (in one call), never a copy of it."""
    x = np.random.default_rng(1).standard_normal((4, 300, 300)).astype(np.float32)
    assert x.size >= ops.PARALLEL_MIN_SIZE
    plain = np.exp(x - x.max(-1, keepdims=True))
    plain /= plain.sum(-1, keepdims=True)
    for out in (np.empty_like(x, order="F"), np.empty((4, 300, 600), np.float32)[..., ::2], np.empty_like(x)):
        result = ops.softmax(fortran(x), out=out)
        assert result is out
        np.testing.assert_allclose(out, plain, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("stage", ["softmax", "gelu_tanh", "silu", "rms_norm", "layer_norm"])
def test_rowwise_blocks_give_the_numbers_of_one_call_bit_for_bit(stage, threads, monkeypatch):
    """Row blocks (odd sizes, a short last one) on one or two threads: each row is computed as in one whole call."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 301, 997)).astype(np.float32) * 4
    weight, bias = rng.standard_normal(997).astype(np.float32), rng.standard_normal(997).astype(np.float32)
    row_functions = {
        "softmax": (ops.softmax, ops._softmax_rows),
        "gelu_tanh": (ops.gelu_tanh, ops._gelu_tanh_rows),
        "silu": (ops.silu, ops._silu_rows),
        "rms_norm": (lambda x: ops.rms_norm(x, weight, 1e-5), lambda x: ops._rms_norm_rows(x, weight, 1e-5)),
        "layer_norm": (lambda x: ops.layer_norm(x, weight, bias, 1e-5),
                       lambda x: ops._layer_norm_rows(x, weight, bias, 1e-5)),
    }  # fmt: skip
    blocked, whole = row_functions[stage]
    monkeypatch.setattr(engine_threads, "THREADS", threads)
    monkeypatch.setattr(ops, "BLOCK_SIZE", 7 * 997)  # 7 rows a block: 129 blocks, the last of 3 rows
    assert x.size >= ops.PARALLEL_MIN_SIZE
    assert np.array_equal(blocked(x), whole(x))
