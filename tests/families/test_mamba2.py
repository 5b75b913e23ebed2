"""Mamba-2's quirks against transformers (what every family owes runs in test_conformance.py, on the same models):
prompts within one chunk, pads that never enter the state, the states the cache keeps against transformers' cache
after a prompt at and past chunk boundaries and after each decode step,
captures and hooks, each product of the chunked and the recurrent form against the closed forms, a decode step's
MACs the same at any context, Mamba-Codestral-7B's preset as its config.json says, and the options refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    logits_at_every_position,
    transformers_parameters,
)
from published_configs import CODESTRAL  # noqa: E402 - mistralai/Mamba-Codestral-7B-v0.1's config.json

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.mamba2.config import PRESETS, Mamba2Config  # noqa: E402
from minitransformer.families.mamba2.family import ARCHITECTURE  # noqa: E402
from minitransformer.verbs import formulas as shared_formulas  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402

FORMULAS = ARCHITECTURE.formulas
FAMILY = "mamba2"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("n", [5, 16])  # within one chunk, and one chunk (the suite: past several)
def test_logits_of_prompts_within_one_chunk_equal_transformers(made, name, n):
    _, ours, hf = made(name)
    assert ours.config.family == "mamba2" and ours.config.chunk_size == CONFIGS[name]["chunk_size"]
    assert logits_at_every_position(ours, hf, prompt(name, n)) <= 1


def test_the_group_norm_in_blocks_of_rows_is_transformers(made, monkeypatch):
    """Past 2^18 numbers (T I: 32 positions of Mamba-Codestral) a norm runs in blocks of rows shared among the cores
    (ops.rowwise); the gated norm's gains, one row per group [Ng, I / Ng], did not follow a block of rows: a
    broadcasting error, so every long prompt of a model of several groups failed. Here every norm runs in blocks."""
    from minitransformer.engine import ops

    monkeypatch.setattr(ops, "PARALLEL_MIN_SIZE", 0)
    _, ours, hf = made("groups")
    assert ours.config.n_groups > 1
    assert logits_at_every_position(ours, hf, prompt("groups", 40)) <= 1


def test_pads_never_enter_the_state_even_where_in_proj_has_a_bias(made):
    """transformers zeroes a pad slot's input, but in_proj's bias then gives it an xBC that the next real positions'
    conv reads, so its batch differs from each row alone; here the pad slots' xBC is zeroed too: each row of a batch
    is the row alone, in the prefill and in every decode step."""
    _, ours, _ = made("one_group_biases")
    rows = [prompt("one_group_biases", 4, seed=2), prompt("one_group_biases", 19, seed=3)]
    generated = ours.generate(rows, max_new_tokens=6, stop_at_eos=False, ledger=False, candidates=0)
    for row, out in zip(rows, generated):
        alone = ours.generate(row, max_new_tokens=6, stop_at_eos=False, ledger=False, candidates=0)
        assert out.new_tokens == alone.new_tokens


def chunk(name: str) -> int:
    return CONFIGS[name]["chunk_size"]


# Prompts at the scan's chunk boundaries (k C - 1, k C, k C + 1: the last chunk one short, full, one over), past two
# full chunks, and shorter than the conv's kernel; then a pass that starts from a state, in two chunks (C + 1) or in
# one; time_step_limit's clamp, which transformers applies in the chunked form and not in its recurrent step, on both
# sides of that line.
STEPPED = [("groups", 2 * chunk("groups") + d, 5) for d in (-1, 0, 1)] + [
    ("groups", 3 * chunk("groups"), chunk("groups") + 1), ("one_group_biases", 2 * chunk("one_group_biases") + 1, 5),
    ("clamped", 2 * chunk("clamped"), chunk("clamped") + 1), ("clamped", 2, 1)]  # fmt: skip


@pytest.mark.parametrize("name, n, then", STEPPED)
def test_the_state_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each layer's conv state and [Hs, P, N] scan state in our cache equal transformers' cache's, and each pass's
    logits transformers', after a prompt in chunks, after each of 3 decode steps (the recurrent form) and after a pass
    of several positions from the cache (chunks that start from the state)."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    assert len(compared) == 5 * (1 + 2 * ours.config.n_layer), compared  # 5 passes: logits, conv and ssm a layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))  # the whole table, each OK or NOT OK


def test_the_cache_keeps_a_state_of_a_fixed_size_and_nothing_else(made):
    """After a prompt, each layer's scan state [Hs, P, N] and the conv's last K - 1 inputs (their values: above)."""
    _, ours, _ = made("groups")
    cache = ours.new_cache()
    ours.run(prompt("groups", 37, seed=6), cache=cache)
    for i in range(ours.config.n_layer):
        state = cache.layer(i)
        assert state["ssm"].shape == (8, 8, 16) and state["conv"].shape == (3, ours.config.conv_dim)
        assert state["ssm"].any() and state["conv"].any()
    assert cache.nbytes == 2 * 4 * (8 * 8 * 16 + 3 * ours.config.conv_dim)  # no keys, no values: the states alone


def test_captures_equal_transformers_modules_and_a_hook_takes_effect(made):
    _, ours, hf = made("groups")
    ids = prompt("groups", 40, seed=7)
    seen: dict = {}
    handles = [layer.mixer.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out))
               for i, layer in enumerate(hf.backbone.layers)]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    logits, cache = ours.run_with_cache(ids)
    for i in range(ours.config.n_layer):
        np.testing.assert_allclose(cache[f"blocks.{i}.mixer.out"], seen[i][0].numpy(), atol=1e-4, rtol=1e-4)
    assert cache["blocks.0.mixer.ssd.scores"].shape == (2, 3, 16, 16)  # 2 groups, 40 positions in 3 chunks of 16
    handle = ours.add_hook("blocks.1.mixer.y", lambda tensor, name: tensor * 0)
    try:
        hooked = ours.logits(ids)
    finally:
        handle.remove()
    assert not np.allclose(hooked, logits, atol=1e-3)
    np.testing.assert_array_equal(ours.logits(ids), logits)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("T, past", [(PROMPT, 0), (5, 0), (1, 30), (7, 30)])
def test_each_product_of_a_pass_is_the_closed_form_s(made, name, T, past):
    """The prefill's chunked scan, a decode step's recurrent form, and a pass of several positions after cached ones
    (in chunks from the state the cache kept); each chunked product carries the recurrent form's cost beside it."""
    _, ours, _ = made(name)
    cache = ours.new_cache()
    if past:
        ours.run(prompt(name, past, seed=8), cache=cache)
    phase = Phase("decode" if past else "prefill", 1, T, past + T)
    ours.run(prompt(name, T, seed=9), cache=cache, phase=phase)
    expected = [(op, dots, dots * length) for op, (dots, length) in FORMULAS.products(ours.config, T, past + T).items()]
    scan = FORMULAS.scan(ours.config, 0, T, past + T)  # (dot products, MACs) of the scan's products, as computed
    for i in range(ours.config.n_layer):
        ran = [(r.op, r.dot_products, r.macs) for r in phase.layer_records(i) if r.kind == "matmul"]
        assert ran == expected[:-1], i
        scanned = [r for r in phase.layer_records(i) if r.stage.product == "scan"]
        assert [(r.op, r.dot_products, r.macs) for r in scanned] == [(op, *counted) for op, counted in scan.items()]
        assert sum(r.recurrent_macs for r in scanned) == FORMULAS.scan_recurrent_macs(ours.config, i, T)
    assert (phase.records[-1].op, phase.records[-1].dot_products, phase.records[-1].macs) == expected[-1]
    if not past:  # the whole pass in the recurrent form: the shared closed form of the hybrids' scans
        assert phase.recurrent_macs == shared_formulas.recurrent_pass_macs(ours.config, T, T)


def test_a_decode_step_costs_the_same_at_context_20_as_at_150_and_the_state_does_not_grow():
    config = PRESETS["mamba-codestral-7b"]
    steps = [count_generation(config, t - 1, 2).decodes[0] for t in (20, 150)]
    assert steps[0].macs == steps[1].macs == FORMULAS.pass_macs(config, 1, 150)
    assert all(r.macs == 2 * 128 * 64 * 128 // 2 for r in steps[0].block if r.op in ("ssm.input", "ssm.output"))
    from minitransformer.verbs.memory import layer_caches

    held = [layer_caches(config, t)["mamba"]["bytes"] for t in (20, 131072)]
    assert held[0] == held[1] == 64 * 4 * (3 * 10240 + 128 * 64 * 128)


def test_the_preset_is_its_config_json_and_its_total_is_transformers_count():
    preset = PRESETS["mamba-codestral-7b"]
    assert Mamba2Config.from_hf_dict(CODESTRAL, name="mamba-codestral-7b") == preset
    hf = transformers.Mamba2Config(**{k: v for k, v in CODESTRAL.items() if k not in ("model_type", "architectures")})
    assert FORMULAS.parameters(preset) == transformers_parameters(hf) == 7_285_403_648


def test_the_preset_s_config_json_reads_back_as_itself():
    import json

    preset = PRESETS["mamba-codestral-7b"]
    written = json.loads(json.dumps(preset.to_hf_dict()))  # as `config --preset` prints it
    assert Mamba2Config.from_hf_dict(written, name=preset.name) == preset


def test_count_of_the_preset_says_the_chunked_scan_beside_the_recurrent_form_and_the_state():
    result = run_cli("count", "--preset", "mamba-codestral-7b", "--tokens", "1000", "--new-tokens", "2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "128 state-space heads of 64 (state 128)" in out and "7,285,403,648 parameters" in out
    assert all(line in out for line in FORMULAS.count_notes(PRESETS["mamba-codestral-7b"], 1000, 2))
    assert "4 chunks of 256, the last padded with 24 zero positions" in out and "Attention against" not in out
    assert "state        conv [3, 10240] + ssm [128, 64, 128] numbers x 64 mamba layers: 276 MB, the same at any" in out


def test_generate_trace_and_count_with_html_run_on_a_mamba2(made, tmp_path):
    directory, _, _ = made("groups")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "4",
                        "--html", str(tmp_path / "g.html"))  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    table = generated.stdout.split("Decode steps", 1)[1].splitlines()[2:5]  # steps 1 to 3: t = 4, 5, 6
    assert [row.split()[2] for row in table] == ["4", "5", "6"] and len({row.split()[-1] for row in table}) == 1
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    for name in ("mixer.in_proj", "mixer.conv", "mixer.ssd.scores", "mixer.ssd.chunk_state", "mixer.input",
                 "mixer.output", "mixer.normed", "mixer.out"):  # fmt: skip
        assert f"blocks.1.{name}" in traced.stdout
    counted = run_cli("count", "--model", str(directory), "--tokens", "40", "--html", str(tmp_path / "c.html"))
    assert counted.returncode == 0, counted.stderr
    assert (tmp_path / "c.html").stat().st_size > 10_000 and (tmp_path / "g.html").stat().st_size > 10_000


@pytest.mark.parametrize("key, value, match", [("quantization_config", {"quant_method": "fp8"}, "quantization_config"),
                                               ("hidden_act", "xielu", "hidden_act"),
                                               ("time_step_limit", [0.5, 0.1], "time_step_limit"),
                                               ("expand", 3, "expand")])  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value, match):
    with pytest.raises(UserError, match=match):
        Mamba2Config.from_hf_dict({"model_type": "mamba2", key: value})


def test_defaults_are_transformers_defaults():
    ours, t = Mamba2Config.from_hf_dict({"model_type": "mamba2"}), transformers.Mamba2Config()
    assert (ours.n_layer, ours.n_embd, ours.vocab_size, ours.ssm_heads, ours.ssm_head_dim, ours.state_size,
            ours.n_groups, ours.conv_kernel, ours.expand, ours.chunk_size, ours.use_bias, ours.use_conv_bias,
            ours.ssm_act, ours.norm_eps, ours.time_step_limit, ours.tie_word_embeddings, ours.bos_token_id,
            ours.eos_token_id) == (
        t.num_hidden_layers, t.hidden_size, t.vocab_size, t.num_heads, t.head_dim, t.state_size, t.n_groups,
        t.conv_kernel, t.expand, t.chunk_size, t.use_bias, t.use_conv_bias, t.hidden_act, t.layer_norm_epsilon,
        tuple(t.time_step_limit), t.tie_word_embeddings, t.bos_token_id, t.eos_token_id)  # fmt: skip
