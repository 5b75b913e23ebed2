"""Every matmul record of real runs equals the closed form derived from the config and sequence lengths."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_checks import random_model

from minitransformer import GPT2Config
from minitransformer.models.model import Model
from minitransformer.verbs.count import count_passes


def closed_form(config: GPT2Config, T: int, t: int, R: int, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot length) of each product in one pass, from the equations alone.

    (m x n)(n x p): m*p dot products of length n. Per head, Q K^T is (T x dh)(dh x t) and A V is
    (T x t)(t x dh).
    """
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh = D // H
    return {
        "qkv": (B * T * 3 * D, D),
        "scores": (B * H * T * t, dh),
        "mix": (B * H * T * dh, t),
        "out": (B * T * D, D),
        "mlp.up": (B * T * F, D),
        "mlp.down": (B * T * D, F),
        "logits": (B * R * V, D),
    }


def layer_macs(config: GPT2Config, T: int, t: int) -> int:
    """The textbook per-layer total: T (4 D^2 + 2 D F) + 2 T t D, i.e. 12 T D^2 + 2 T t D when F = 4 D."""
    D, F = config.n_embd, config.d_ff
    return T * (4 * D * D + 2 * D * F) + 2 * T * t * D


shapes = st.fixed_dictionaries({
    "n_layer": st.integers(1, 3),
    "n_head": st.integers(1, 4),
    "d_head": st.integers(1, 8),
    "n_inner": st.one_of(st.none(), st.integers(1, 40)),
    "vocab": st.integers(2, 60),
})  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 9), st.integers(1, 6), st.booleans())
def test_every_product_of_a_generation_matches_the_closed_form(shape, n_prompt, n_new, use_cache):
    model = random_model(**shape, n_positions=n_prompt + n_new)
    config = model.config
    prompt = [i % config.vocab_size for i in range(n_prompt)]
    result = model.generate(prompt, max_new_tokens=n_new, use_cache=use_cache, stop_at_eos=False, candidates=0)
    phases = result.ledger.phases
    assert [p.phase for p in phases] == ["prefill"] + ["decode"] * (n_new - 1)
    for step, phase in enumerate(phases):
        t = n_prompt + step
        T = 1 if use_cache and step > 0 else t  # without a cache every step recomputes all t positions
        assert (phase.tokens, phase.context) == (T, t)
        expected = closed_form(config, T, t, R=1)
        for record in phase.records:
            if record.kind != "matmul":
                assert record.dot_products == 0 and record.macs == 0
                continue
            assert (record.dot_products, record.dot_length) == expected[record.op], (step, record.name)
            assert record.macs == record.dot_products * record.dot_length and record.flops == 2 * record.macs
        for layer in range(config.n_layer):
            assert sum(r.macs for r in phase.layer_records(layer)) == layer_macs(config, T, t)
        assert phase.macs == config.n_layer * layer_macs(config, T, t) + config.n_embd * config.vocab_size


def test_gpt2_small_prefill_textbook_numbers():
    """GPT-2 small, 5-token prompt: 12 T D^2 + 2 T^2 D per layer; D V for the one row of logits."""
    model = Model.without_weights(GPT2Config())
    prefill, decode = count_passes(model, n_prompt=5, n_new=2).phases
    D, T = 768, 5
    assert sum(r.macs for r in prefill.layer_records(0)) == 12 * T * D * D + 2 * T * T * D == 35_427_840
    assert prefill.find("logits").macs == D * 50257 == 38_597_376
    assert sum(r.macs for r in decode.layer_records(11)) == 12 * D * D + 2 * 6 * D == 7_087_104
    scores = prefill.find("scores", 3)
    assert scores.out_shape == (12, 5, 5) and scores.heads == 12 and scores.dot_length == 64
    assert scores.causal_dot_products == 12 * (5 * 6 // 2)  # the lower triangle, diagonal included
    assert decode.find("scores", 0).out_shape == (12, 1, 6)
    assert decode.find("scores", 0).causal_dot_products == decode.find("scores", 0).dot_products


def test_all_position_logits_count_every_row(small_gpt2):
    from minitransformer.engine.ledger import Phase

    phase = Phase("prefill", 0, 7, 7)
    small_gpt2.run(np.arange(7), all_positions=True, phase=phase)
    assert phase.find("logits").dot_products == 7 * 50257
    assert not any(r.op == "last" for r in phase.records)


def test_batch_multiplies_every_count(small_gpt2):
    from minitransformer.engine.ledger import Phase

    single, batch = Phase("prefill", 0, 4, 4), Phase("prefill", 0, 4, 4, batch=3)
    small_gpt2.run(np.arange(4), phase=single)
    small_gpt2.run(np.tile(np.arange(4), (3, 1)), phase=batch)
    for a, b in zip(single.records, batch.records):
        assert (a.op, a.dot_length) == (b.op, b.dot_length)
        assert b.dot_products == 3 * a.dot_products
