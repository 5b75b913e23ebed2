"""Counting without weights: a shape-only run records exactly what a real run records, equal to the closed forms.

Three independent sources are held to each other: real runs of small random models, shape-only runs
of the same forward code (whole, and folded to one block as `count` does), and the textbook closed
forms of formulas.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_checks import assert_same_phases, random_model

from conftest import run_cli
from minitransformer import GPT2Config
from minitransformer.engine.ledger import Phase
from minitransformer.engine.shapes import ShapeOnly
from minitransformer.errors import UserError
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY
from minitransformer.families.table import ARCHITECTURES, PRESETS
from minitransformer.models.model import Model
from minitransformer.models.options import RunOptions
from minitransformer.verbs import formulas
from minitransformer.verbs.count import check_run, count_folded, count_generation, count_passes, sweep_per_token
from minitransformer.verbs.options import GenerationOptions
from minitransformer.verbs.select import select_config

GPT2 = GPT2_FAMILY.stage_table(GPT2Config())  # GPT-2's stages: every GPT-2 has the same
BLOCK_OPS, MATMUL_OPS = GPT2.block_ops, GPT2.matmul_ops


# --- 1. one code path: a shape-only twin records what the real model records -------------------------------
@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("batch", [1, 3])
def test_shape_only_twin_records_exactly_what_the_real_model_records(use_cache, batch):
    real = random_model(n_layer=2, n_head=3, d_head=4, n_inner=20, vocab=40, n_positions=12, seed=1)
    twin = Model.without_weights(real.config)
    assert twin.shape_only
    assert isinstance(twin.params.wte.weight, ShapeOnly) and isinstance(twin.params.h[1].mlp.c_fc.weight, ShapeOnly)
    real_ledger = count_passes(real, n_prompt=5, n_new=4, use_cache=use_cache, batch=batch)
    twin_ledger = count_passes(twin, n_prompt=5, n_new=4, use_cache=use_cache, batch=batch)
    assert [p.phase for p in real_ledger.phases] == ["prefill", "decode", "decode", "decode"]
    assert_same_phases(real_ledger.phases, twin_ledger.phases)


def test_a_real_generation_with_real_tokens_is_counted_exactly_by_shapes():
    real = random_model(n_layer=3, n_head=2, d_head=5, n_inner=None, vocab=70, n_positions=16, seed=2)
    for use_cache in (True, False):
        result = real.generate([5, 17, 3, 60], max_new_tokens=5, use_cache=use_cache, stop_at_eos=False, candidates=0)
        counted = count_generation(real.config, 4, 5, use_cache=use_cache)
        assert_same_phases(result.ledger.phases, counted.ledger().phases)
        assert result.ledger.cache_comparison() == counted.cache_comparison()


def test_a_real_batch_of_different_prompts_counts_like_the_shape_only_batch():
    """Model.run with ids [B, T] and a batched cache: prefill then decode steps, each row its own tokens."""
    real = random_model(n_layer=2, n_head=2, d_head=4, n_inner=12, vocab=50, n_positions=10, seed=3)
    B, T, steps = 3, 4, 3
    rng = np.random.default_rng(0)
    cache = real.new_cache((B,), capacity=T + steps)
    phases, ids = [], rng.integers(0, 50, size=(B, T))
    for step in range(steps):
        phase = Phase("prefill" if step == 0 else "decode", step, ids.shape[-1], T + step, batch=B)
        logits = real.run(ids, cache=cache, phase=phase)
        assert logits.shape == (B, 1, 50)
        phases.append(phase)
        ids = logits[:, -1, :].argmax(axis=-1)[:, None]  # each row continues with its own token
    assert_same_phases(phases, count_passes(Model.without_weights(real.config), T, steps, batch=B).phases)
    assert_same_phases(phases, count_generation(real.config, T, steps, batch=B).ledger().phases)
    # and a batch is B times one sequence, every product
    single = count_generation(real.config, T, steps).ledger()
    for pb, ps in zip(phases, single.phases):
        assert [r.dot_products for r in pb.records] == [B * r.dot_products for r in ps.records]


# --- 2. the one-block fold that count uses is exactly the whole model's ledger ------------------------------
configs = st.builds(
    lambda L, H, dh, F, V, extra, scale_inv, ctx: GPT2Config(
        n_layer=L, n_head=H, n_embd=H * dh, n_inner=F, vocab_size=V, n_positions=ctx + extra,
        scale_attn_by_inverse_layer_idx=scale_inv, name="random"),
    st.integers(1, 5), st.integers(1, 6), st.integers(1, 16), st.one_of(st.none(), st.integers(1, 100)),
    st.integers(2, 60_000), st.integers(0, 5), st.booleans(), st.integers(12, 40),
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(configs, st.integers(1, 8), st.integers(1, 4), st.booleans(), st.integers(1, 3))
def test_the_one_block_count_is_the_whole_models_ledger(config, n_prompt, n_new, use_cache, batch):
    whole = count_passes(Model.without_weights(config), n_prompt, n_new, use_cache, batch)
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    assert_same_phases(whole.phases, counted.ledger().phases)
    assert counted.totals == whole.totals
    assert [p.macs for p in counted.passes] == [p.macs for p in whole.phases]
    assert [p.dot_products for p in counted.passes] == [p.dot_products for p in whole.phases]


# --- 3. shape-only count == closed form == real run ---------------------------------------------------------
shapes = st.fixed_dictionaries({
    "n_layer": st.integers(1, 3), "n_head": st.integers(1, 4), "d_head": st.integers(1, 6),
    "n_inner": st.one_of(st.none(), st.integers(1, 30)), "vocab": st.integers(2, 50),
})  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(1, 7), st.integers(1, 5), st.booleans(), st.integers(1, 2))
def test_shape_only_count_equals_closed_form_equals_real_run(shape, n_prompt, n_new, use_cache, batch):
    real = random_model(**shape, n_positions=n_prompt + n_new)
    config = real.config
    real_ledger = count_passes(real, n_prompt, n_new, use_cache, batch)
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    for step, (phase, folded) in enumerate(zip(real_ledger.phases, counted.passes)):
        t = n_prompt + step
        T = 1 if use_cache and step > 0 else t
        closed = formulas.products(config, T, t, R=1, B=batch)
        for op, (dots, length) in closed.items():
            layers = 1 if op == "logits" else config.n_layer
            real_records = [r for r in phase.records if r.op == op]
            assert len(real_records) == layers
            assert all((r.dot_products, r.dot_length) == (dots, length) for r in real_records), (step, op)
            assert folded.ops()[op] == (layers * dots, layers * dots * length)
        assert phase.macs == folded.macs == formulas.pass_macs(config, T, t, 1, batch)
        assert phase.dot_products == folded.dot_products == formulas.pass_dot_products(config, T, t, 1, batch)
        block = [r for r in phase.records if r.layer == 0]
        assert sum(r.macs for r in block) == formulas.layer_macs(config, T, t, batch)
        causal = sum(r.causal_macs if r.causal_macs is not None else r.macs for r in block)
        assert causal == formulas.causal_layer_macs(config, T, t, batch)
        scores = next(r for r in block if r.op == "scores")
        assert scores.causal_dot_products == batch * config.n_head * formulas.causal_pairs(T, t)
    closed = formulas.generation_macs(config, n_prompt, n_new, use_cache, batch)
    assert real_ledger.totals.macs == counted.totals.macs == closed
    assert counted.other_totals.macs == formulas.generation_macs(config, n_prompt, n_new, not use_cache, batch)


def test_textbook_numbers_gpt2_and_gpt3():
    """GPT-2 small: 12 T D^2 + 2 T^2 D per layer in the prefill. GPT-3 175B: a decode step is ~one MAC a parameter."""
    gpt2 = count_generation(PRESETS["gpt2"], 5, 3)
    assert gpt2.prefill.block_macs == 12 * 5 * 768**2 + 2 * 5 * 5 * 768 == 35_427_840
    assert gpt2.prefill.macs == 12 * 35_427_840 + 768 * 50257 == 463_731_456
    assert [p.macs for p in gpt2.decodes] == [12 * (12 * 768**2 + 2 * t * 768) + 768 * 50257 for t in (6, 7)]
    gpt3 = count_generation(PRESETS["gpt3-175b"], 1000, 2)
    D, L = 12288, 96
    # The textbook's dense prefill; the pass computes less of its attention (tests/engine/test_row_chunks.py).
    assert L * sum(r.dense_macs for r in gpt3.prefill.block) + D * 50257 == 176_306_089_046_016
    assert L * (1000 * 12 * D * D + 2 * 1000 * 1000 * D) + D * 50257 == 176_306_089_046_016
    # A decode step is about one MAC per weight (the 2N FLOPs per token rule): weights less wpe, plus attention.
    step = gpt3.decodes[0]
    assert step.macs == L * (12 * D * D + 2 * 1001 * D) + D * 50257
    n_params = formulas.parameters(PRESETS["gpt3-175b"])
    assert abs(step.macs - n_params) / n_params < 0.02


@pytest.mark.parametrize("n_new", [1, 2, 3], ids=["prefill", "shared-with-the-check", "own-check"])
def test_folding_is_checked_against_the_whole_model(monkeypatch, n_new):
    """count_generation compares its fold with a whole-model run; a fold that drops a layer's stage is caught, whether
    the check folds passes of its own (more than 2 new tokens) or reads the count's (up to 2: the same twin)."""
    import minitransformer.verbs.count as count_module

    def broken(*args, **options):
        passes = count_folded(*args, **options)
        for p in passes:
            last_in_a_layer = max(i for i, r in enumerate(p.twin.records) if r.layer is not None)
            del p.twin.records[last_in_a_layer]
        return [count_module.Pass(p.twin, p.layer_types) for p in passes]

    monkeypatch.setattr(count_module, "count_folded", broken)
    with pytest.raises(AssertionError, match="differs from the whole model"):
        count_module.count_generation(PRESETS["distilgpt2"], 3, n_new)


def test_a_prefill_counts_the_same_products_with_and_without_the_cache():
    """What lets count take a lone prefill's pass for the other way's too (a count of one new token): the two ways'
    prefills are the same pass but for the flag, for every preset, past the row chunk of attention."""
    differ = []
    for name, config in PRESETS.items():
        T = min(200, config.n_positions)
        kept, recomputed = (
            count_folded(config, T, GenerationOptions(max_new_tokens=1, use_cache=cache))[0].twin
            for cache in (True, False)
        )
        if replace(kept, cached=False) != recomputed:
            differ.append(name)
    assert differ == [], f"a prefill with the cache differs from one without: {differ}"


@pytest.mark.parametrize("cached", [True, False], ids=["cache", "no-cache"])
def test_a_count_of_one_new_token_runs_its_prefill_once(cached, monkeypatch):
    from minitransformer.verbs import count as count_module

    real, asked = count_module.count_folded, []

    def recorded(config, n_prompt, options, batch=1):
        asked.append(options.use_cache)
        return real(config, n_prompt, options, batch)

    monkeypatch.setattr(count_module, "count_folded", recorded)
    config = PRESETS["llama3.2-1b"]
    counted = count_module.count_generation(config, 300, 1, use_cache=cached)
    assert asked == [cached], asked  # this way's passes, not the other way's too
    other = real(config, 300, GenerationOptions(max_new_tokens=1, use_cache=not cached))
    assert [p.twin for p in counted.other_way] == [p.twin for p in other]
    assert counted.other_totals.macs == counted.totals.macs == formulas.pass_macs(config, 300, 300)


def test_a_long_generation_on_a_big_model_keeps_few_records():
    counted = count_generation(PRESETS["gpt3-175b"], 10, 200)
    assert len(counted.passes) == 200
    held = sum(len(p.twin.records) for p in counted.passes + counted.other_way)
    assert held == 2 * 200 * (1 + len(BLOCK_OPS) + 3)  # one block per pass, not 96
    assert counted.totals.macs == formulas.generation_macs(PRESETS["gpt3-175b"], 10, 200)


def test_the_per_token_sweep_is_counted_passes():
    config = PRESETS["gpt2"]
    sweep = sweep_per_token(config, points=5)
    assert sweep["context"][0] == 2 and sweep["context"][-1] == 1024
    for t, with_cache, without in zip(sweep["context"], sweep["with_cache"], sweep["without_cache"]):
        assert with_cache == formulas.decode_macs(config, t)
        assert without == formulas.pass_macs(config, t, t)


# --- choosing the model -----------------------------------------------------------------------------------
def test_select_config_by_each_way(tmp_path):
    from conftest import write_gpt2

    assert select_config() == PRESETS["gpt2"]
    assert select_config(preset="gpt3-175b") == GPT2Config(n_layer=96, n_head=96, n_embd=12288, n_positions=2048)
    assert select_config(model="gpt2-medium") == PRESETS["gpt2-medium"]  # by name: the preset, no download
    sized = select_config(layers=48, d_model=4096, heads=32)
    assert (sized.n_layer, sized.n_embd, sized.n_head, sized.d_ff, sized.vocab_size, sized.n_positions) == (
        48, 4096, 32, 16384, 50257, 1024)  # fmt: skip
    directory = tmp_path / "only-config"
    write_gpt2(directory, n_layer=3, n_head=2, n_embd=8, vocab_size=30)
    (directory / "model.safetensors").unlink()  # the count needs the shapes only
    from_dir = select_config(model=str(directory))
    assert (from_dir.n_layer, from_dir.n_embd, from_dir.vocab_size, from_dir.name) == (3, 8, 30, "only-config")
    assert select_config(config=str(directory / "config.json")) == from_dir


@pytest.mark.parametrize("kwargs, message", [
    ({"preset": "gpt4"}, "unknown preset"),
    ({"preset": "gpt2", "model": "gpt2"}, "choose one way"),
    ({"config": "x.json", "layers": 2}, "choose one way"),
    ({"layers": 2, "d_model": 10}, "missing --heads"),
    ({"layers": 2, "d_model": 10, "heads": 3}, "not divisible"),
    ({"layers": 0, "d_model": 10, "heads": 2}, "--layers must be at least 1"),
    ({"layers": 2, "d_model": 10, "heads": 2, "vocab": -1}, "--vocab must be at least 1"),
    ({"model": "no-such-model"}, "unknown model"),
    ({"config": "/no/such/config.json"}, "does not exist"),
])  # fmt: skip
def test_select_config_refuses_bad_input(kwargs, message):
    with pytest.raises(UserError, match=message):
        select_config(**kwargs)


@pytest.mark.parametrize("config, message", [
    ({}, "config.json is empty ({}): no shapes to build a model from"),
    ({"model_type": "gpt2", "vocab_size": 30}, "config.json lacks n_layer, n_head, n_embd: a gpt2 model needs its shapes"),
    ({"n_layer": 2, "num_attention_heads": 2}, "config.json lacks n_embd: a gpt2 model"),
])  # fmt: skip
def test_a_config_without_shapes_is_refused_not_taken_for_gpt2_small(config, message, tmp_path):
    from conftest import write_gpt2
    from minitransformer import load_model

    directory = write_gpt2(tmp_path / "model", n_layer=2, n_head=2, n_embd=8, vocab_size=30)
    (directory / "config.json").write_text(json.dumps(config))
    for way in (lambda: select_config(config=str(directory / "config.json")), lambda: load_model(directory)):
        with pytest.raises(UserError) as refused:
            way()
        assert message in str(refused.value)
    aliased = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "max_position_embeddings": 64,
               "vocab_size": 30}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(aliased))  # the old spellings give the shapes too
    assert load_model(directory).config.n_embd == 8


@pytest.mark.parametrize("n_prompt, n_new, batch, message", [
    (1000, 26, 1, "at most 25 new tokens fit"),  # 1,000 + 25 - 1 positions: the last new token is never fed back
    (1024, 2, 1, "they take 1,025: every token but the last new one is fed to the model\\); at most 1 new token fits"),
    (1025, 1, 1, "the prompt alone is too long"),
    (0, 1, 1, "tokens must be"),
    (5, 0, 1, "new tokens must be"),
    (5, 1, 0, "batch must be"),
])  # fmt: skip
def test_count_refuses_runs_that_do_not_fit(n_prompt, n_new, batch, message):
    with pytest.raises(UserError, match=message):
        count_generation(PRESETS["gpt2"], n_prompt, n_new, batch=batch)


def test_every_matmul_op_appears_in_each_pass():
    counted = count_generation(PRESETS["distilgpt2"], 4, 3)
    for p in counted.passes:
        assert set(p.ops()) == set(MATMUL_OPS) and all(macs > 0 for _, macs in p.ops().values())


def test_shape_only_counts_allocate_nothing_model_sized():
    """No weights, no KV cache, no activations, no [context]^2 mask: what NumPy allocates stays tiny."""
    import tracemalloc

    config = GPT2Config(n_layer=4, n_head=8, n_embd=4096, n_positions=32768, name="long")  # 3.6 GB of weights
    tracemalloc.start()
    try:
        counted = count_generation(config, 30000, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counted.totals.macs == formulas.generation_macs(config, 30000, 3)
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MB traced"  # a [32768]^2 float32 mask alone is 4 GB


@pytest.mark.parametrize("preset", ["deepseek-v3.2-exp", "qwen3.5-9b", "llama3.2-1b"])
def test_a_preset_counted_past_its_context_has_the_same_counts_where_both_reach(preset):
    """--ctx with a preset counts the same shapes at a longer context: at a length both reach, every product of
    every phase is the same as the trained model's; a prompt past the trained context is counted, not refused."""
    trained = PRESETS[preset]
    longer = select_config(preset=preset, ctx=4 * trained.n_positions)
    assert longer.n_positions == 4 * trained.n_positions and longer.n_layer == trained.n_layer
    assert_same_phases(count_generation(longer, 300, 3).ledger().phases,
                       count_generation(trained, 300, 3).ledger().phases)  # fmt: skip
    past = trained.n_positions + 10  # refused at the trained context, counted at the longer one
    with pytest.raises(UserError, match="context"):
        check_run(trained, past, 1, 1)
    check_run(longer, past, 1, 1)


def test_count_past_the_trained_context_says_so_and_a_learned_position_table_refuses_it():
    done = run_cli("count", "--preset", "qwen3-0.6b", "--ctx", "100000", "--tokens", "90000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("qwen3-0.6b was trained to a context of 40,960 positions and is counted at --ctx "
                                  "100,000"), done.stdout[:300]  # fmt: skip
    refused = run_cli("count", "--preset", "gpt2", "--ctx", "2048", "--tokens", "2000")
    assert refused.returncode == 2 and refused.stdout == "", (refused.returncode, refused.stdout)
    assert refused.stderr.count("\n") == 1 and "learns a table of 1,024 positions" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    "sizes, needle",
    [(dict(batch=0), "batch must be a whole number of at least 1, not 0"), (dict(batch=True), "not True"),
     (dict(n_prompt=-1), "tokens must be a whole number of at least 1, not -1"), (dict(n_new=2.0), "not 2.0")],
)  # fmt: skip
def test_count_passes_checks_its_sizes_as_count_generation_does(sizes, needle):
    """count_passes counted batch 0, -2 or True as one row, and handed -1 tokens to NumPy."""
    twin = Model.without_weights(PRESETS["gpt2"])
    with pytest.raises(UserError, match=re.escape(needle)):
        count_passes(twin, **{"n_prompt": 5, "n_new": 2, **sizes})


def test_counting_refuses_the_wrong_object_and_a_sweep_of_one_point_in_words():
    with pytest.raises(UserError, match=r"count_passes counts a Model \(Model.without_weights\(config\)"):
        count_passes(PRESETS["gpt2"], 5, 2)
    with pytest.raises(UserError, match="count_generation counts a model's config"):
        count_generation(Model.without_weights(PRESETS["gpt2"]), 5, 2)
    with pytest.raises(UserError, match="points must be a whole number of at least 2"):
        sweep_per_token(PRESETS["gpt2"], points=1)  # a ZeroDivisionError
    assert sweep_per_token(PRESETS["gpt2"], points=2)["context"] == [2, 1024]


def test_a_record_not_in_the_pass_is_refused_naming_the_ones_there():
    phase = count_passes(Model.without_weights(PRESETS["gpt2"]), 5, 1).phases[0]
    assert phase.find("scores", 3).dot_products == 12 * 5 * 5
    for op, layer, needle in (("nope", 0, "no 'nope' in block 0 (its ops there: ln_1, qkv,"),
                              ("scores", None, "no 'scores' outside the blocks (its ops there: embed,"),
                              ("scores", 99, "no 'scores' in block 99 (it has no records there")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(needle)):
            phase.find(op, layer)  # a bare StopIteration


def test_a_count_s_pass_refuses_an_op_it_has_not_and_a_sweep_refuses_what_is_no_config():
    """Count.prefill.find("nope") ended in a bare StopIteration, as Phase.find once did; sweep_per_token(None), ("gpt2")
    or (a Model) in an AttributeError on n_positions."""
    count = count_generation(PRESETS["gpt2"], 5, 2)
    assert count.prefill.find("scores").dot_products == 12 * 5 * 5
    for op in ("nope", None):
        with pytest.raises(UserError) as refused:
            count.decodes[0].find(op)
        print(refused.value)
        assert f"this decode pass has no {op!r} (its ops: embed, ln_1, qkv," in str(refused.value)
    for wrong in (None, "gpt2", Model.without_weights(PRESETS["gpt2"])):
        with pytest.raises(UserError) as refused:
            sweep_per_token(wrong)
        print(refused.value)
        assert "sweep_per_token counts a model's config (model.config, PRESETS[name]), not" in str(refused.value)


# Each family's first preset with experts
MIXTURES = sorted({next(p for p in a.presets if PRESETS[p].n_experts) for a in ARCHITECTURES.values()
                   if any(PRESETS[p].n_experts for p in a.presets)})  # fmt: skip


@pytest.mark.parametrize("preset", MIXTURES)
@pytest.mark.parametrize("routing", ["balanced", "worst"])
def test_a_shape_only_mixture_counts_each_number_of_tokens_once_and_every_expert_alike(monkeypatch, preset, routing):
    """Shape-only, the experts that get as many tokens are counted once and repeated (Tape.repeats): each record, and
    each expert's tokens, dot products and MACs in its breakdown, are what running every expert's lines records."""
    from minitransformer.engine.tape import Tape

    config, options = PRESETS[preset], GenerationOptions(max_new_tokens=2, running=RunOptions(routing))
    repeated = count_folded(config, 37, options, 3)
    monkeypatch.setattr(Tape, "repeats", lambda self, first, routed: False)
    every = count_folded(config, 37, options, 3)
    assert any(r.breakdown for p in every for r in p.twin.records), f"{preset}: no expert's breakdown"
    for a, b in zip(repeated, every):
        assert a.twin.records == b.twin.records
        for ra, rb in zip(a.twin.records, b.twin.records):
            assert ra.breakdown == rb.breakdown, f"{ra.name}: repeated {ra.breakdown}, every expert {rb.breakdown}"
            assert (ra.dot_products, ra.macs) == (rb.dot_products, rb.macs), (ra.name, ra.macs, rb.macs)
