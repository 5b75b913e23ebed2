"""Mamba-1's and Falcon-Mamba's quirks against transformers (what every family owes runs in test_conformance.py, on
the same models): the states the cache keeps against transformers' cache after a prompt and each decode step, pads
that never enter the state, each product of a pass against the closed forms, a decode step's MACs the same at any
context, the published 9 B L D N FLOPs of the scan beside ours, the presets as their config.json say and their totals
as transformers counts them, and the options refused.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import transformers_parameters  # noqa: E402
from published_configs import FALCON_MAMBA_7B, MAMBA_130M  # noqa: E402

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.falcon_mamba.family import ARCHITECTURE as FALCON_MAMBA  # noqa: E402
from minitransformer.families.falcon_mamba.family import FalconMambaConfig  # noqa: E402
from minitransformer.families.mamba.config import PRESETS, MambaConfig  # noqa: E402
from minitransformer.families.mamba.family import ARCHITECTURE  # noqa: E402
from minitransformer.families.table import PRESETS as EVERY_PRESET  # noqa: E402
from minitransformer.families.table import architecture_of  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402
from minitransformer.verbs.memory import layer_caches  # noqa: E402

FORMULAS = ARCHITECTURE.formulas
FAMILY = "mamba"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
prompt = SPEC.prompt_ids


def count_notes(config, n_prompt: int) -> list[str]:
    return architecture_of(config).formulas.count_notes(config, n_prompt, 1)


@pytest.mark.parametrize("name, n", [("tied-auto-rank", 37), ("biases-kernel3-untied", 2)])
def test_the_state_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n):
    """Each layer's conv state [K - 1, I] and scan state [I, N] in our cache equal transformers' cache's, and each
    pass's logits transformers', after a prompt (one shorter than the conv's kernel too) and after each of 3 decode
    steps."""
    _, ours, hf = made(name)
    compared = checks.states_and_logits_step_by_step(ours, hf, prompt(name, n, seed=6), steps=3)
    assert len(compared) == 4 * (1 + 2 * ours.config.n_layer), compared  # 4 passes: logits, conv and ssm a layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


def test_a_generation_s_decode_table_has_no_scores_column(made):
    """generate's report of a model of states alone: its decode steps read no keys (the table said "t attended" and
    headed a column of dashes "scores")."""
    from minitransformer.views.report import ledger_report

    _, ours, _ = made("tied-auto-rank")
    out = ours.generate([3, 1, 4, 1, 5], max_new_tokens=3).ledger
    lines = ledger_report(out).splitlines()
    at = lines.index("Decode steps with the state cache: T new positions, t the positions so far")
    assert lines[at + 1].split() == ["step", "T", "t", "dot", "products", "MACs"], lines[at : at + 4]
    assert lines[at + 2].split()[:3] == ["1", "1", "6"], lines[at : at + 4]


def test_a_pass_of_several_positions_from_the_cache_continues_the_state(made):
    """Several positions after cached ones continue from the state the cache kept: their logits are those of the whole
    sequence at once, ours and transformers'. (transformers' own such pass starts its scan from zeros:
    mamba_selective_scan's loop takes no initial state, as its kernel takes none; generate never makes one.)"""
    _, ours, hf = made("tied-auto-rank")
    ids = prompt("tied-auto-rank", 42, seed=6)
    cache = ours.new_cache()
    ours.run(ids[:37], cache=cache)
    continued = ours.run(ids[37:], cache=cache, all_positions=True)
    with torch.no_grad():
        whole = hf(torch.tensor([ids])).logits[0, 37:]
    assert checks.worst(continued, whole) <= 1, checks.differ(continued, whole)


def test_the_scanned_state_is_read_by_hooks_and_a_replacement_refused(made):
    """A replaced state [T, I, N] reached the readout of its own pass but not the recurrence, and reached the next pass
    through the cache: a prompt in two passes gave other logits than in one. The scan is computed position by position
    and shown after the last: a hook reads it (the states the positions read), a replacement is refused."""
    _, ours, _ = made("tied-auto-rank")
    ids = prompt("tied-auto-rank", 12, seed=6)
    _, cache = ours.run_with_cache(ids, names="blocks.0.mixer.*")
    states, c = cache["blocks.0.mixer.state"], ours.config
    assert states.shape == (12, c.d_inner, c.state_size)
    kept = ours.new_cache()
    ours.run(ids, cache=kept)
    assert np.array_equal(kept.layers[0]["ssm"], states[-1]), "the cache keeps the last position's state"
    with ours.add_hook("blocks.0.mixer.state", lambda t, name: t * 1.1):  # removed at the end of the block
        with pytest.raises(UserError, match="blocks.0.mixer.state, a stage computed piece by piece"):
            ours.run(ids)
    assert np.array_equal(ours.run_with_cache(ids, names="blocks.0.mixer.state")[1]["blocks.0.mixer.state"], states)


def test_pads_never_enter_the_state_even_where_in_proj_has_a_bias(made):
    """A left-padded row of a batch is the row alone, in the prefill and in every decode step: x is zeroed at the pad
    slots before the conv and after it (in_proj's bias would otherwise reach the first real positions' conv)."""
    _, ours, _ = made("biases-kernel3-untied")
    rows = [prompt("biases-kernel3-untied", 4, seed=2), prompt("biases-kernel3-untied", 19, seed=3)]
    generated = ours.generate(rows, max_new_tokens=6, stop_at_eos=False, ledger=False, candidates=0)
    for row, out in zip(rows, generated):
        alone = ours.generate(row, max_new_tokens=6, stop_at_eos=False, ledger=False, candidates=0)
        assert out.new_tokens == alone.new_tokens


@pytest.mark.parametrize("T, past", [(150, 0), (1, 30), (7, 30)])
def test_each_product_of_a_pass_is_the_closed_form_s_and_the_scan_is_2_I_N_a_position(made, T, past):
    _, ours, _ = made("biases-kernel3-untied")
    c = ours.config
    cache = ours.new_cache()
    if past:
        ours.run(prompt("biases-kernel3-untied", past, seed=8), cache=cache)
    phase = Phase("decode" if past else "prefill", 1, T, past + T)
    ours.run(prompt("biases-kernel3-untied", T, seed=9), cache=cache, phase=phase)
    expected = [(op, dots, dots * length) for op, (dots, length) in FORMULAS.products(c, T, past + T).items()]
    I, N = c.d_inner, c.state_size  # noqa: E741 - the symbol
    for i in range(c.n_layer):
        ran = [(r.op, r.dot_products, r.macs) for r in phase.layer_records(i) if r.kind == "matmul"]
        assert ran == expected[:-1], i
        scanned = {r.op: (r.dot_products, r.macs) for r in phase.layer_records(i) if r.stage.product == "scan"}
        assert scanned == {"ssm.input": (T * I * N, T * I * N), "ssm.output": (T * I, T * I * N)}
    assert phase.recurrent_macs == phase.macs  # the recurrent form is what is computed


def test_a_decode_step_costs_the_same_at_context_20_as_at_a_million_and_the_state_does_not_grow():
    config = EVERY_PRESET["falcon-mamba-7b"]
    steps = [count_generation(config, t - 1, 2).decodes[0] for t in (20, 1_000_000)]
    assert steps[0].macs == steps[1].macs == FALCON_MAMBA.formulas.pass_macs(config, 1, 20)
    assert all(r.macs == 8192 * 16 for r in steps[0].block if r.op in ("ssm.input", "ssm.output"))
    held = [layer_caches(config, t)["mamba"]["bytes"] for t in (20, 131072)]
    assert held[0] == held[1] == 64 * 4 * (3 * 8192 + 8192 * 16)


@pytest.mark.parametrize("preset", ["mamba-130m", "falcon-mamba-7b"])
def test_the_scan_is_4_B_L_D_N_flops_beside_the_published_9(preset):
    """state-spaces/mamba#110's 9 B L D N FLOPs of the selective scan against our 2 I N MACs a position (4 B L D N
    FLOPs, D = I): the 5 B L D N between them are Δ A's multiply and the associative scan's 2 L steps of a multiply
    and an add (4), elementwise work no dot product holds; count says both."""
    config = EVERY_PRESET[preset]
    B, L, D, N = 1, 1000, config.d_inner, config.state_size
    scan = sum(r.macs for r in count_generation(config, L, 1).prefill.block if r.stage.product == "scan")
    assert 2 * scan == 4 * B * L * D * N and 9 * B * L * D * N - 2 * scan == 5 * B * L * D * N
    notes = "\n".join(count_notes(config, L))
    assert f"against the published 9 B L D N = {9 * L * D * N:,} FLOPs a layer" in notes
    assert f"2 I N T = {scan:,} MACs a layer" in notes


@pytest.mark.parametrize("published, config_class, name, total", [
    (MAMBA_130M, MambaConfig, "mamba-130m", 129_135_360),
    (FALCON_MAMBA_7B, FalconMambaConfig, "falcon-mamba-7b", 7_272_665_088),
])  # fmt: skip
def test_the_presets_are_their_config_json_and_their_totals_transformers_count(published, config_class, name, total):
    preset = EVERY_PRESET[name]
    assert config_class.from_hf_dict(published, name=name) == preset
    written = json.loads(json.dumps(preset.to_hf_dict()))  # as `config --preset` prints it
    assert config_class.from_hf_dict(written, name=name) == preset
    keys = {k: v for k, v in published.items() if k not in ("model_type", "architectures")}
    hf = getattr(transformers, config_class.__name__)(**keys)
    assert hf.intermediate_size == preset.d_inner and hf.time_step_rank == preset.dt_rank
    assert FALCON_MAMBA.formulas.parameters(preset) == transformers_parameters(hf) == total


def test_mamba_2_8b_is_transformers_count_of_its_shapes():
    preset = PRESETS["mamba-2.8b"]
    hf = transformers.MambaConfig(hidden_size=2560, num_hidden_layers=64, vocab_size=50280)
    assert (hf.intermediate_size, hf.time_step_rank) == (preset.d_inner, preset.dt_rank) == (5120, 160)
    assert FORMULAS.parameters(preset) == transformers_parameters(hf) == 2_768_345_600


def test_count_of_falcon_mamba_7b_says_the_scan_beside_the_published_count_and_the_state():
    result = run_cli("count", "--preset", "falcon-mamba-7b", "--tokens", "1000", "--new-tokens", "2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "8,192 state-space channels (state 16)" in out and "7,272,665,088 parameters" in out
    assert all(line in out for line in count_notes(EVERY_PRESET["falcon-mamba-7b"], 1000)[:3])
    assert "ssm.bcdt_norm" in out and "Attention against" not in out
    assert "state        conv [3, 8192] + ssm [8192, 16] numbers x 64 mamba layers: 39.8 MB, the same at any" in out


@pytest.mark.parametrize("config_class, key, value, match", [
    (MambaConfig, "quantization_config", {"quant_method": "fp8"}, "quantization_config"),
    (MambaConfig, "hidden_act", "xielu", "hidden_act"),
    (MambaConfig, "time_step_rank", "full", "time_step_rank"),
    (FalconMambaConfig, "mixer_rms_eps", -1, "mixer_rms_eps"),
])  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(config_class, key, value, match):
    with pytest.raises(UserError, match=match):
        config_class.from_hf_dict({"model_type": config_class.model_type, key: value})


def test_defaults_are_transformers_defaults():
    for config_class, theirs in ((MambaConfig, transformers.MambaConfig()),
                                 (FalconMambaConfig, transformers.FalconMambaConfig())):  # fmt: skip
        ours = config_class.from_hf_dict({"model_type": config_class.model_type})
        assert (ours.n_layer, ours.n_embd, ours.vocab_size, ours.state_size, ours.d_inner, ours.dt_rank,
                ours.conv_kernel, ours.use_bias, ours.use_conv_bias, ours.ssm_act, ours.norm_eps,
                ours.tie_word_embeddings, ours.bos_token_id, ours.eos_token_id, ours.pad_token_id) == (
            theirs.num_hidden_layers, theirs.hidden_size, theirs.vocab_size, theirs.state_size,
            theirs.intermediate_size, theirs.time_step_rank, theirs.conv_kernel, theirs.use_bias,
            theirs.use_conv_bias, theirs.hidden_act, theirs.layer_norm_epsilon, theirs.tie_word_embeddings,
            theirs.bos_token_id, theirs.eos_token_id, theirs.pad_token_id)  # fmt: skip
    assert FalconMambaConfig.from_hf_dict({"model_type": "falcon_mamba"}).bcdt_norm_eps == 1e-6


def test_a_model_of_states_alone_calls_its_cache_a_state_cache_and_has_no_attention_note(tmp_path):
    """Mamba's count said "with the KV cache" and explained Q K^T under a block that has none, and so did its page."""
    page = tmp_path / "count.html"
    out = run_cli("count", "--preset", "mamba-130m", "--tokens", "5", "--new-tokens", "3", "--html", str(page)).stdout
    assert "with the state cache" in out and "State cache: without it these tokens would cost" in out, out
    assert "KV cache" not in out and "Q K^T" not in out, out
    assert "  (m x n)(n x p) = m*p dot products of length n = m*p*n MACs; FLOPs = 2 x MACs.\n" in out
    html = page.read_text()
    for says in ("with the state cache. Counted", "through the state cache", "State cache: without it",
                 "state, as the earlier positions left it, from the state cache", "with the state cache (this run)",
                 '"cache_name":"state cache"'):  # fmt: skip
        assert says in html, says
    assert "through the KV cache" not in html and "KV cache:" not in html
    # its decode table: no scores' column, and t the positions so far (no keys are attended)
    table = "Decode steps with the state cache: T new positions, t the positions so far\n  step  T  t  dot products"
    assert table in out, out
    hybrid = run_cli("count", "--preset", "jamba-1.5-mini", "--tokens", "5", "--new-tokens", "2").stdout
    assert "with the KV cache" in hybrid and "Q K^T" in hybrid, hybrid  # its attention layers keep keys and values
