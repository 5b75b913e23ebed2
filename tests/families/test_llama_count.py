"""Counting the Llama family: real runs, shape-only counts and the closed forms of formulas.py held to each other.

As tests/verbs/test_records_equal_closed_forms.py and tests/verbs/test_shape_only_count.py do for GPT-2: every record of random Llama-family
generations (grouped-query attention, head sizes that are not D / H, biases, tied embeddings,
sliding windows) equals its closed form; the shape-only count, folded to one block, equals the
real run record by record; and the decode step's attention against its products with weights
equals t / X in closed form (t / 24,704 for Llama 2 7B).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_checks import assert_same_phases, random_llama

from minitransformer.engine.ledger import Phase
from minitransformer.engine.stages import ATTENTION_SCORES, STATE
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.table import ARCHITECTURES, PRESETS, architecture_of
from minitransformer.models.model import Model
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes, decode_at, with_weights
from minitransformer.verbs.select import select_config

LLAMA_PRESETS = [name for name, c in PRESETS.items() if c.family == "llama"]
# The ledger's vocabulary for a Llama block, in the order the forward pass runs it (issue 10, item 3).
LLAMA_BLOCK = ["ln_1", "q", "k", "v", "split_heads", "rope", "cache", "scores", "scale", "mask", "softmax", "mix",
               "merge_heads", "out", "resid_mid", "ln_2", "mlp.gate", "mlp.up", "mlp.act", "mlp.mul", "mlp.down",
               "resid_post"]  # fmt: skip


llama_configs = st.builds(
    lambda L, Hkv, G, dh, own_head_dim, D, F, V, biases, tied, window: LlamaConfig(
        n_layer=L, n_head=Hkv * G, n_kv_head=Hkv, n_embd=D if own_head_dim else Hkv * G * dh,
        head_dim=dh if own_head_dim else None, n_inner=F, vocab_size=V, qkv_bias=biases[0], o_bias=biases[1],
        mlp_bias=biases[2], tie_word_embeddings=tied, sliding_window=window, n_positions=64, name="random"),
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 4, 6]), st.booleans(),
    st.integers(1, 20), st.integers(1, 30), st.integers(2, 50), st.tuples(st.booleans(), st.booleans(), st.booleans()),
    st.booleans(), st.one_of(st.none(), st.integers(1, 6)),
)  # fmt: skip


def _sized(config: LlamaConfig, n_positions: int) -> LlamaConfig:
    from dataclasses import replace

    return replace(config, n_positions=n_positions)


# --- 1. every record of a real run equals its closed form ---------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(llama_configs, st.integers(1, 9), st.integers(1, 6), st.booleans(), st.integers(1, 2))
def test_every_product_of_a_llama_generation_matches_the_closed_form(config, n_prompt, n_new, use_cache, batch):
    config = _sized(config, n_prompt + n_new)
    real = random_llama(config)
    ledger = count_passes(real, n_prompt, n_new, use_cache, batch)
    assert [p.phase for p in ledger.phases] == ["prefill"] + ["decode"] * (n_new - 1)
    for step, phase in enumerate(ledger.phases):
        t = n_prompt + step
        T = 1 if use_cache and step > 0 else t
        assert (phase.tokens, phase.context) == (T, t)
        closed = formulas.products(config, T, t, R=1, B=batch)
        assert [r.op for r in phase.records if r.layer == 0] == LLAMA_BLOCK
        for record in phase.records:
            if record.kind != "matmul":
                assert record.dot_products == 0 and record.macs == 0, record.name
                continue
            assert (record.dot_products, record.dot_length) == closed[record.op], (step, record.name)
            assert record.macs == record.dot_products * record.dot_length and record.flops == 2 * record.macs
        for layer in range(config.n_layer):
            block = phase.layer_records(layer)
            assert sum(r.macs for r in block) == formulas.layer_macs(config, T, t, batch)
            assert sum(r.dot_products for r in block) == formulas.layer_dot_products(config, T, t, batch)
            causal = sum(r.causal_macs if r.causal_macs is not None else r.macs for r in block)
            assert causal == formulas.causal_layer_macs(config, T, t, batch)
            scores = next(r for r in block if r.op == "scores")
            pairs = formulas.causal_pairs(T, t, config.sliding_window)
            assert scores.causal_dot_products == batch * config.n_head * pairs
        assert phase.macs == formulas.pass_macs(config, T, t, 1, batch)
        assert phase.dot_products == formulas.pass_dot_products(config, T, t, 1, batch)
    assert ledger.totals.macs == formulas.generation_macs(config, n_prompt, n_new, use_cache, batch)
    # and counting from shapes alone, the blocks folded, gives the same ledger record by record
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    assert_same_phases(ledger.phases, counted.ledger().phases)
    assert counted.other_totals.macs == formulas.generation_macs(config, n_prompt, n_new, not use_cache, batch)


def test_a_real_llama_generation_with_real_tokens_is_counted_exactly_by_shapes():
    config = LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=24, head_dim=8, n_inner=40, vocab_size=60,
                         n_positions=16, qkv_bias=True, sliding_window=5, name="random")  # fmt: skip
    real = random_llama(config, seed=4)
    for use_cache in (True, False):
        result = real.generate([5, 17, 3, 59], max_new_tokens=7, use_cache=use_cache, stop_at_eos=False, candidates=0)
        counted = count_generation(config, 4, 7, use_cache=use_cache)
        assert_same_phases(result.ledger.phases, counted.ledger().phases)
        assert result.ledger.cache_comparison() == counted.cache_comparison()


def test_the_norms_rope_and_gate_are_stages_without_dot_products():
    counted = count_generation(PRESETS["llama3.2-1b"], 6, 2)
    block = {r.op: r for r in counted.prefill.block}
    for op in ("ln_1", "ln_2"):
        assert block[op].kind == "norm" and "RMSNorm" in block[op].equation and block[op].dot_products == 0
    assert block["rope"].kind == "rotate" and block["rope"].out_shape == (32, 6, 64)
    assert block["mlp.act"].kind == "activation" and block["mlp.mul"].kind == "multiply"
    assert counted.prefill.find("ln_f").kind == "norm" and counted.prefill.find("embed").dot_products == 0
    assert ARCHITECTURES["llama"].stage_table(PRESETS["llama3.2-1b"]).matmul_ops == ("q", "k", "v", "scores", "mix", "out", "mlp.gate",
                                                            "mlp.up", "mlp.down", "logits")  # fmt: skip
    assert list(counted.ops()) == list(ARCHITECTURES["llama"].stage_table(PRESETS["llama3.2-1b"]).matmul_ops)


# --- 2. a sliding window: decode steps past it attend to the window ----------------------------------------------
def test_decode_steps_past_a_sliding_window_attend_to_the_window_only():
    """Window 4: a decode step sees itself and the 3 before it; the prefill computes all T x T and masks the rest."""
    config = LlamaConfig(n_layer=3, n_head=4, n_kv_head=1, n_embd=16, n_inner=24, vocab_size=30, n_positions=20,
                         sliding_window=4, name="windowed")  # fmt: skip
    whole = count_passes(Model.without_weights(config), 6, 6)
    counted = count_generation(config, 6, 6)
    assert_same_phases(whole.phases, counted.ledger().phases)  # the fold holds past the window, step by step
    assert [p.attended for p in counted.passes] == [6, 4, 4, 4, 4, 4]
    assert [p.context for p in counted.passes] == [6, 7, 8, 9, 10, 11]
    scores = counted.prefill.find("scores")
    assert scores.out_shape == (1, 4, 6, 6) and scores.causal_dot_products == 4 * (1 + 2 + 3 + 4 + 4 + 4)
    assert formulas.causal_pairs(6, 6, 4) == 18 and formulas.attended(config, 1, 11) == 4
    assert counted.decodes[-1].find("scores").out_shape == (1, 4, 1, 4)
    assert counted.totals.macs == formulas.generation_macs(config, 6, 6)
    # a decode step past the window costs the same as the first one at the window
    assert counted.passes[-1].macs == counted.passes[1].macs == formulas.decode_macs(config, 4)


@settings(max_examples=30, deadline=None)
@given(llama_configs, st.integers(1, 12), st.integers(1, 8), st.booleans(), st.integers(1, 3))
def test_the_one_block_count_is_the_whole_llama_ledger(config, n_prompt, n_new, use_cache, batch):
    config = _sized(config, n_prompt + n_new)
    whole = count_passes(Model.without_weights(config), n_prompt, n_new, use_cache, batch)
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    assert_same_phases(whole.phases, counted.ledger().phases)
    assert counted.totals.macs == whole.totals.macs == formulas.generation_macs(config, n_prompt, n_new, use_cache,
                                                                                 batch)  # fmt: skip


# --- 3. the presets: the published shapes, counted ---------------------------------------------------------------
@pytest.mark.parametrize("name", LLAMA_PRESETS)
def test_each_llama_preset_counts_to_its_closed_form(name):
    config = PRESETS[name]
    counted = count_generation(config, 40, 3)
    for p in counted.passes:
        T = p.tokens
        for op, (dots, length) in formulas.products(config, T, p.context).items():
            layers = 1 if op == "logits" else config.n_layer
            assert p.ops()[op] == (layers * dots, layers * dots * length), (name, op)
    assert counted.totals.macs == formulas.generation_macs(config, 40, 3)
    assert counted.other_totals.macs == formulas.generation_macs(config, 40, 3, use_cache=False)


def test_llama2_7b_textbook_numbers():
    """Per token, the products with weights are 4 D^2 + 3 D F MACs a layer (8 D^2 + 6 D F FLOPs), attention 2 D t."""
    config = PRESETS["llama2-7b"]
    D, F, L, V = 4096, 11008, 32, 32000
    step = count_generation(config, 100, 2).decodes[0]
    assert step.block_macs == 4 * D * D + 3 * D * F + 2 * D * 101 == 203_202_560
    assert step.macs == L * step.block_macs + D * V


# --- 4. the seed comparison: attention against the products with weights in a decode step -----------------------
def test_attention_against_weights_reads_t_over_24704_for_llama2_7b():
    config = PRESETS["llama2-7b"]
    D, F = config.n_embd, config.d_ff
    assert formulas.attention_to_weights(config) == 2 * D + Fraction(3, 2) * F == 24_704
    a = decode_at(config, 1000).attention_vs_weights()
    assert a.step.attended == 1000
    assert (a.attention, a.weights) == (2 * D * 1000, 4 * D * D + 3 * D * F)
    assert a.layer_ratio == Fraction(1000, 24_704)
    assert a.ratio == Fraction(32 * 2 * D * 1000, 32 * (4 * D * D + 3 * D * F) + D * 32000)  # logits are weights too


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("context", [1, 777, 4096])
def test_the_counted_ratio_is_the_closed_form_for_every_preset(name, context):
    config = PRESETS[name]
    if context > config.n_positions:
        context = config.n_positions
    step = decode_at(config, context)
    a = step.attention_vs_weights()
    scan = sum(n * r.macs for records, n in step.groups for r in records if r.stage.group == STATE)  # neither
    assert a.all_weights + a.all_attention + scan == step.macs
    attending = [i for i in range(config.n_layer) if formulas.attends(config, i)]
    if not attending:  # no attention (Mamba-2): nothing grows with the context
        assert a.all_attention == 0 and scan > 0 and step.context == context
        return
    t = formulas.attended(config, 1, context)
    assert step.attended == t and step.context == context
    own = architecture_of(config).formulas.decode_attention(config, context)  # no t / X law: the family's closed form
    expected = Fraction(t) / formulas.attention_to_weights(config) if own is None else own[0]
    if (
        own is None and config.index_topk is not None and t > config.index_topk
    ):  # past an indexer's k, scores and mix stop growing
        expected = Fraction(formulas.attention_macs(config, 1, t), formulas.weight_macs_per_position(config, 0))
    first = step.groups[step._group_of[step.layer_types[attending[0]]]][0]  # layer 0 but in a hybrid
    attention = sum(r.macs for r in first if r.stage.group == ATTENTION_SCORES)
    assert Fraction(attention, sum(r.macs for r in first if with_weights(r))) == expected
    if attending[0] == 0:
        assert a.layer_ratio == expected
    assert a.all_scan == scan  # a hybrid's scans are neither attention nor weights
    if config.family == "gpt2":
        assert formulas.attention_to_weights(config) == 2 * config.n_embd + config.d_ff == 6 * config.n_embd


@settings(max_examples=60, deadline=None)
@given(llama_configs, st.integers(1, 40))
def test_the_general_closed_form_of_the_ratio(config, context):
    config = _sized(config, context)
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    x = formulas.attention_to_weights(config)
    assert x == Fraction(D * (q + kv) + Fraction(3, 2) * D * F) / q  # H dh t / (D (H dh + Hkv dh) + 1.5 D F)
    if config.n_kv_head == config.n_head and q == D:
        assert x == 2 * D + Fraction(3, 2) * F
    a = decode_at(config, context).attention_vs_weights()
    assert a.layer_ratio == Fraction(formulas.attended(config, 1, context)) / x


def test_the_comparison_step_is_the_last_cached_decode_step_or_the_one_after_the_prompt():
    config = PRESETS["mistral-7b"]
    cached = count_generation(config, 5000, 3)
    assert cached.comparison_step() is cached.passes[-1] and cached.comparison_step().attended == 4096
    uncached = count_generation(config, 50, 3, use_cache=False)
    step = uncached.comparison_step()
    assert step.cached and (step.tokens, step.context) == (1, 52)
    alone = count_generation(config, 50, 1)  # no decode step: the one after the prompt, as memory's and the roofline's
    step = alone.comparison_step()
    assert (step.phase, step.tokens, step.context) == ("decode", 1, 51) and step is alone.decode_example()
    assert count_generation(config, 1, 1).comparison_step().context == 2
    full = count_generation(config, config.n_positions, 1).comparison_step()  # no room after it: at its last position
    assert (full.tokens, full.context) == (1, config.n_positions)


# --- 5. a count's Phase for a batch of real prompts ------------------------------------------------------------
def test_a_batched_real_llama_run_counts_like_the_shape_only_batch():
    config = LlamaConfig(n_layer=2, n_head=6, n_kv_head=2, n_embd=12, n_inner=20, vocab_size=40, n_positions=12,
                         name="random")  # fmt: skip
    real = random_llama(config, seed=2)
    B, T, steps = 3, 4, 3
    cache = real.new_cache((B,), capacity=T + steps)
    phases, ids = [], np.random.default_rng(0).integers(0, 40, size=(B, T))
    for step in range(steps):
        phase = Phase("prefill" if step == 0 else "decode", step, ids.shape[-1], T + step, batch=B)
        logits = real.run(ids, cache=cache, phase=phase)
        phases.append(phase)
        ids = logits[:, -1, :].argmax(axis=-1)[:, None]
    assert_same_phases(phases, count_generation(config, T, steps, batch=B).ledger().phases)


# --- choosing the model -------------------------------------------------------------------------------------
def _shapes(c):
    return (c.family, c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.d_head, c.d_ff, c.vocab_size, c.n_positions)


def test_select_a_llama_by_preset_name_config_or_sizes(tmp_path):
    import json

    assert select_config(preset="mistral-7b") is PRESETS["mistral-7b"]
    assert select_config(model="llama3-8b") is PRESETS["llama3-8b"]  # a name: the preset's shapes, no download
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 100,
                                "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                                "vocab_size": 300, "sliding_window": 16}))  # fmt: skip
    from_file = select_config(config=str(path))
    assert from_file == select_config(model=str(path.parent)) and from_file.name == "tiny"
    assert _shapes(from_file) == ("llama", 2, 64, 8, 2, 8, 100, 300, 4096 * 32) and from_file.sliding_window == 16
    # sizes: a GPT-2 block, unless a Llama flag is given
    assert select_config(layers=2, d_model=10, heads=2).family == "gpt2"
    llama2 = select_config(layers=32, d_model=4096, heads=32, gated_mlp=True, vocab=32000, ctx=4096)
    assert _shapes(llama2) == _shapes(PRESETS["llama2-7b"]) and not (
        llama2.qkv_bias or llama2.o_bias or llama2.mlp_bias
    )
    assert select_config(layers=40, d_model=5120, heads=40, gated_mlp=True).d_ff == 13824 == PRESETS["llama2-13b"].d_ff
    grouped = select_config(layers=2, d_model=64, heads=8, kv_heads=2)
    assert (grouped.family, grouped.n_kv_head, grouped.d_head, grouped.d_ff) == ("llama", 2, 8, 256)
    wide = select_config(layers=1, d_model=60, heads=4, head_dim=16, d_ff=90)
    assert (wide.n_embd, wide.d_head, wide.n_kv_head, wide.d_ff) == (60, 16, 4, 90)
