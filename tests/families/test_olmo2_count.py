"""Counting OLMo 2: the block's stages in the order its equations run (no pre-norms; q_norm and k_norm before the
split; a norm on each branch before its add), every record of a real run equal to its closed form, the shape-only
count equal to the real run, and OLMo-2-7B's prefill of 100 tokens op by op against numbers from its config.json."""

from __future__ import annotations

import numpy as np
import pytest
from shared_checks import assert_same_phases

from minitransformer.families.olmo2.config import PRESETS, Olmo2Config
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes

OLMO2_BLOCK = ["q", "k", "v", "q_norm", "k_norm", "split_heads", "rope", "cache", "scores", "scale", "mask", "softmax",
               "mix", "merge_heads", "out", "post_attn_norm", "resid_mid", "mlp.gate", "mlp.up", "mlp.act", "mlp.mul",
               "mlp.down", "post_mlp_norm", "resid_post"]  # fmt: skip


def random_olmo2(config: Olmo2Config, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


CONFIGS = [
    Olmo2Config(n_layer=2, n_head=4, n_kv_head=2, head_dim=6, n_embd=10, n_inner=14, vocab_size=30, n_positions=64),
    Olmo2Config(n_layer=2, n_head=3, n_kv_head=3, n_embd=12, n_inner=9, vocab_size=20, n_positions=64, qkv_bias=True,
                o_bias=True, tie_word_embeddings=True),
]  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS, ids=["gqa", "bias-tied"])
@pytest.mark.parametrize("use_cache, batch", [(True, 1), (False, 1), (True, 2)])
def test_every_product_of_a_generation_matches_the_closed_form(config, use_cache, batch):
    n_prompt, n_new = 7, 4
    ledger = count_passes(random_olmo2(config), n_prompt, n_new, use_cache, batch)
    for step, phase in enumerate(ledger.phases):
        t = n_prompt + step
        T = 1 if use_cache and step > 0 else t
        closed = formulas.products(config, T, t, R=1, B=batch)
        assert [r.op for r in phase.records if r.layer == 0] == OLMO2_BLOCK
        for record in phase.records:
            if record.kind != "matmul":  # the four norms among them
                assert record.dot_products == 0 and record.macs == 0, record.name
                continue
            assert (record.dot_products, record.dot_length) == closed[record.op], (step, record.name)
        assert phase.macs == formulas.pass_macs(config, T, t, 1, batch)
    assert ledger.totals.macs == formulas.generation_macs(config, n_prompt, n_new, use_cache, batch)
    assert_same_phases(ledger.phases, count_generation(config, n_prompt, n_new, use_cache, batch).ledger().phases)


def test_olmo_2_7b_prefill_of_100_tokens_op_by_op():
    """From OLMo-2-1124-7B's config.json: D 4,096, 32 layers, 32 heads of 128 (as many key/value heads), F 11,008,
    V 100,352, untied. A prefill of T = 100 (dense scores), logits for the last position only."""
    config = PRESETS["olmo-2-7b"]
    T, D, L, H, dh, F, V = 100, 4096, 32, 32, 128, 11008, 100352
    expected = {"q": (L * T * D, D), "k": (L * T * D, D), "v": (L * T * D, D), "scores": (L * H * T * T, dh),
                "mix": (L * H * T * dh, T), "out": (L * T * D, D), "mlp.gate": (L * T * F, D),
                "mlp.up": (L * T * F, D), "mlp.down": (L * T * D, F), "logits": (V, D)}  # fmt: skip
    prefill = count_generation(config, T, 1).passes[0]
    assert prefill.ops() == {op: (dots, dots * length) for op, (dots, length) in expected.items()}
    assert prefill.macs == formulas.pass_macs(config, T, T) == sum(d * n for d, n in expected.values())
    norms = [r for r in prefill.expand().records if r.kind == "norm"]
    assert len(norms) == 4 * L + 1 and all(r.dot_products == 0 for r in norms)
