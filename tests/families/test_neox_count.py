"""The GPT-NeoX family without transformers: float32 throughout, every product counted as computed (one qkv record
a layer), partial rotary and the parallel residual as stages of no dot products, shape-only runs that count what
real runs do, and the presets' counts against closed forms written here by hand from the equations."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from shared_checks import Float64Alarm

from conftest import with_weights_viewed_as
from minitransformer.engine.ledger import Phase
from minitransformer.families.neox.config import PRESETS, NeoXConfig
from minitransformer.families.neox.family import split_heads_by_head
from minitransformer.families.rotary import inverse_frequencies, rotate_partial
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes

SMALL = NeoXConfig(n_layer=3, n_head=4, n_embd=32, n_inner=80, vocab_size=97, n_positions=300, name="neox-small")
CONFIGS = {
    "parallel": SMALL,
    "serial-half-tied-no-bias": replace(
        SMALL, use_parallel_residual=False, rotary_pct=0.5, tie_word_embeddings=True, attention_bias=False
    ),  # fmt: skip
}


def random_model(config: NeoXConfig, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


@pytest.mark.parametrize("name", CONFIGS)
def test_no_float64_anywhere_in_a_neox_forward_pass(name):
    config = CONFIGS[name]
    model = with_weights_viewed_as(random_model(config), Float64Alarm)
    assert inverse_frequencies(config.rope(), np.float32).dtype == np.float32
    seen = []
    watch = lambda name, value, record: seen.append((name, value.dtype)) or value  # noqa: E731
    logits = model.run(np.arange(140) % config.vocab_size, all_positions=True, watcher=watch)
    assert logits.dtype == np.float32 and isinstance(logits, Float64Alarm)
    assert len(seen) == len(model.stage_table.stage_names(config.n_layer)) - 1  # all but `last`
    assert all(dtype == np.float32 for _, dtype in seen), [n for n, d in seen if d != np.float32]
    cache = model.new_cache()
    model.run(np.arange(7), cache=cache, watcher=watch)
    for token in range(5):
        assert model.run([token], cache=cache, watcher=watch).dtype == np.float32
    assert all(dtype == np.float32 for _, dtype in seen)


def closed_forms(c: NeoXConfig, T: int, t: int, R: int) -> dict[str, tuple[int, int]]:
    """(dot products, their length) of each product of one block and the unembedding, by hand: one fused qkv."""
    H, dh, D, F, V = c.n_head, c.n_embd // c.n_head, c.n_embd, c.n_inner, c.vocab_size
    return {"qkv": (T * 3 * D, D), "scores": (H * T * t, dh), "mix": (H * T * dh, t), "out": (T * D, D),
            "mlp.up": (T * F, D), "mlp.down": (T * D, F), "logits": (R * V, D)}  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_every_product_is_counted_as_computed_and_rotary_and_residuals_cost_nothing(name):
    config = CONFIGS[name]
    model = random_model(config)
    family = model.stage_table
    cache = model.new_cache()
    for T, past in [(12, 0), (1, 12), (1, 13), (3, 14)]:
        phase = Phase("decode" if past else "prefill", 0, T, past + T)
        model.run(np.arange(T) % config.vocab_size, cache=cache, phase=phase)
        ops = [r.op for r in phase.records]
        assert ops == ["embed", *family.block_ops * config.n_layer, "ln_f", "last", "logits"]
        assert ops.count("qkv") == config.n_layer  # one fused product a layer, as computed
        assert ("resid_mid" in ops) == (not config.use_parallel_residual)
        expected = closed_forms(config, T, past + T, R=1)
        for r in phase.records:
            assert (r.dot_products > 0) == (r.op in expected), r.op
            if r.op in expected:
                assert (r.dot_products, r.dot_length) == expected[r.op], (name, T, past, r.name)
            if r.op in ("rope", "split_heads", "resid_post", "resid_mid", "ln_2"):
                assert r.dot_products == r.macs == 0
    stage = family.stages["resid_post"]
    parallel = "parallel: x + attn(ln1(x)) + mlp(ln2(x))"
    assert (stage.equation == parallel) == config.use_parallel_residual
    assert family.stages["rope"].kind == "rotate"


@pytest.mark.parametrize("name", CONFIGS)
def test_a_shape_only_neox_records_what_a_real_run_records(name):
    real = random_model(CONFIGS[name])
    counted = Model.without_weights(real.config)
    for batch in ((), (2,)):
        caches = [m.new_cache(batch) for m in (real, counted)]
        for T in (9, 4, 1, 1):
            ids = np.zeros((*batch, T), dtype=np.int64)
            phases = [Phase("p", 0, T, 0), Phase("p", 0, T, 0)]
            for model, cache, phase in zip((real, counted), caches, phases):
                model.run(ids, cache=cache, phase=phase, all_positions=T > 1)
            assert phases[0].records == phases[1].records and phases[0].macs == phases[1].macs > 0
    counted_generation = count_generation(real.config, 11, 6)
    real_generation = count_passes(real, 11, 6)
    assert [p.expand().records for p in counted_generation.passes] == [p.records for p in real_generation.phases]
    assert counted_generation.totals.macs == real_generation.totals.macs == formulas.generation_macs(real.config, 11, 6)


def test_pythia_1_4b_prefill_of_100_tokens_by_hand():
    """L (T (4 D^2 + 2 D F) + 2 H T^2 dh) + V D: qkv 3 D^2, out D^2, the MLP 2 D F a position; scores and mix
    H T t dh each; the last position's logits."""
    c = PRESETS["pythia-1.4b"]
    L, D, F, H, dh, V, T = 24, 2048, 8192, 16, 128, 50304, 100
    assert (c.n_layer, c.n_embd, c.d_ff, c.n_head, c.d_head, c.vocab_size, c.rotary_dims) == (L, D, F, H, dh, V, 32)
    by_hand = L * (T * (4 * D * D + 2 * D * F) + 2 * H * T * T * dh) + V * D
    assert by_hand == 121_882_017_792
    assert count_generation(c, T, 1).totals.macs == by_hand


@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_counts_to_its_closed_form(name):
    c = PRESETS[name]
    assert count_generation(c, 100, 4).totals.macs == formulas.generation_macs(c, 100, 4)
    assert count_generation(c, 100, 4, use_cache=False).totals.macs == formulas.generation_macs(
        c, 100, 4, use_cache=False
    )


def test_the_split_reads_head_by_head_and_the_rotary_turns_only_its_share():
    T, H, dh = 5, 3, 8
    qkv = np.arange(T * 3 * H * dh, dtype=np.float32).reshape(T, 3 * H * dh)
    q, k, v = split_heads_by_head(qkv, H)
    # Head h's q, k and v are the next 3 dh outputs: columns [3 dh h, 3 dh h + dh) and so on.
    for h in range(H):
        base = 3 * dh * h
        assert np.array_equal(q[h], qkv[:, base : base + dh]) and np.array_equal(
            v[h], qkv[:, base + 2 * dh : base + 3 * dh]
        )
        assert np.array_equal(k[h], qkv[:, base + dh : base + 2 * dh])
    angles = np.arange(T, dtype=np.float32)[:, None] * np.array([1.0, 0.1], np.float32)  # two pairs: r = 4
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))
    turned = rotate_partial(q, cos, sin)
    assert np.array_equal(turned[..., 4:], q[..., 4:]) and not np.allclose(turned[..., 1:, :4], q[..., 1:, :4])
    # The pair (x0, x2) turns by position x 1.0: x0 cos - x2 sin, x2 cos + x0 sin.
    x0, x2 = q[..., 0], q[..., 2]
    assert np.allclose(turned[..., 0], x0 * cos[:, 0] - x2 * sin[:, 0])
    assert np.allclose(turned[..., 2], x2 * cos[:, 0] + x0 * sin[:, 0])
    assert np.allclose(np.linalg.norm(turned, axis=-1), np.linalg.norm(q, axis=-1))  # a rotation keeps lengths
