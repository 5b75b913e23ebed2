"""Counting Qwen3: the block's stages in the order its equations run (q_norm and k_norm between the split and the
rotation, with no products), every record of a real run equal to its closed form, the shape-only count equal to the
real run, and Qwen3-8B's prefill of 100 tokens op by op against numbers written from its config.json."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from shared_checks import assert_same_phases

from minitransformer.families.qwen3.config import PRESETS, Qwen3Config
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes

QWEN3_BLOCK = ["ln_1", "q", "k", "v", "split_heads", "q_norm", "k_norm", "rope", "cache", "scores", "scale", "mask",
               "softmax", "mix", "merge_heads", "out", "resid_mid", "ln_2", "mlp.gate", "mlp.up", "mlp.act", "mlp.mul",
               "mlp.down", "resid_post"]  # fmt: skip


def random_qwen3(config: Qwen3Config, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


CONFIGS = [
    Qwen3Config(n_layer=2, n_head=4, n_kv_head=2, head_dim=6, n_embd=10, n_inner=14, vocab_size=30, n_positions=64),
    Qwen3Config(n_layer=2, n_head=3, n_kv_head=3, head_dim=4, n_embd=8, n_inner=9, vocab_size=20, n_positions=64,
                qkv_bias=True, o_bias=True, tie_word_embeddings=True, sliding_window=3),
]  # fmt: skip
MIXED = Qwen3Config(n_layer=3, n_head=2, n_kv_head=1, head_dim=4, n_embd=8, n_inner=12, vocab_size=25, n_positions=64,
                    sliding_window=3, layer_types=("full_attention", "sliding_attention", "full_attention"))  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS, ids=["gqa", "window-bias-tied"])
@pytest.mark.parametrize("use_cache, batch", [(True, 1), (False, 1), (True, 2)])
def test_every_product_of_a_generation_matches_the_closed_form(config, use_cache, batch):
    n_prompt, n_new = 7, 4
    ledger = count_passes(random_qwen3(config), n_prompt, n_new, use_cache, batch)
    for step, phase in enumerate(ledger.phases):
        t = n_prompt + step
        T = 1 if use_cache and step > 0 else t
        closed = formulas.products(config, T, t, R=1, B=batch)
        assert [r.op for r in phase.records if r.layer == 0] == QWEN3_BLOCK
        for record in phase.records:
            if record.kind != "matmul":  # the q and k norms among them
                assert record.dot_products == 0 and record.macs == 0, record.name
                continue
            assert (record.dot_products, record.dot_length) == closed[record.op], (step, record.name)
        assert phase.macs == formulas.pass_macs(config, T, t, 1, batch)
    assert ledger.totals.macs == formulas.generation_macs(config, n_prompt, n_new, use_cache, batch)
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    assert_same_phases(ledger.phases, counted.ledger().phases)


def test_layers_of_two_kinds_count_each_its_own_window():
    ledger = count_passes(random_qwen3(MIXED), 9, 3)
    counted = count_generation(MIXED, 9, 3)
    assert [n for _, n in counted.prefill.groups] == [2, 1]  # full_attention (layers 0, 2), sliding_attention (1)
    assert_same_phases(ledger.phases, counted.ledger().phases)
    assert ledger.totals.macs == formulas.generation_macs(MIXED, 9, 3)
    step = ledger.phases[-1]  # one position attending to 11: 3 keys in the windowed layer
    scores = {r.layer: r for r in step.records if r.op == "scores"}
    assert [scores[i].out_shape[-1] for i in range(3)] == [11, 3, 11]
    full = replace(MIXED, sliding_window=None, layer_types=None)
    assert ledger.totals.macs < formulas.generation_macs(full, 9, 3)


def test_qwen3_8b_prefill_of_100_tokens_op_by_op():
    """From Qwen3-8B's config.json: D 4,096, 36 layers, 32 query heads and 8 key/value heads of 128, F 12,288,
    V 151,936, untied. A prefill of T = 100 (under the row chunk: the scores are dense, T x T a head), logits for
    the last position only: (dot products, length) of each op over the model."""
    config = PRESETS["qwen3-8b"]
    T, D, L, H, Hkv, dh, F, V = 100, 4096, 36, 32, 8, 128, 12288, 151936
    expected = {
        "q": (L * T * H * dh, D),
        "k": (L * T * Hkv * dh, D),
        "v": (L * T * Hkv * dh, D),
        "scores": (L * H * T * T, dh),
        "mix": (L * H * T * dh, T),
        "out": (L * T * D, H * dh),
        "mlp.gate": (L * T * F, D),
        "mlp.up": (L * T * F, D),
        "mlp.down": (L * T * D, F),
        "logits": (V, D),
    }
    prefill = count_generation(config, T, 1).passes[0]
    assert prefill.ops() == {op: (dots, dots * length) for op, (dots, length) in expected.items()}
    closed = formulas.products(config, T, T)
    assert {op: (dots * (1 if op == "logits" else L), length) for op, (dots, length) in closed.items()} == expected
    assert prefill.macs == formulas.pass_macs(config, T, T) == sum(d * n for d, n in expected.values())
    records = prefill.expand().records
    assert all(r.dot_products == 0 for r in records if r.op in ("q_norm", "k_norm"))
    assert sum(r.op == "q_norm" for r in records) == L
