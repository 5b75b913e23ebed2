"""Nemotron-H's quirks against transformers (what every family owes runs in test_conformance.py, on the same models,
every kind of layer: Mamba-2, attention without positions, squared-ReLU MLP, squared-ReLU experts with a shared
one): each kind's captures, the per-layer cache, the Mamba layers' states against transformers' cache at and past
chunk boundaries and after each decode step, every kind's products against the closed forms, a Mamba layer's
decode step the same at any context, the parameters and the presets as their config.json say, and the options
refused.
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
    transformers_parameters,
)
from published_configs import NEMOTRON_3_NANO, NEMOTRON_H_8B  # noqa: E402 - as published

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.nemotron_h.config import PRESETS, NemotronHConfig  # noqa: E402
from minitransformer.families.nemotron_h.family import ARCHITECTURE  # noqa: E402
from minitransformer.families.parts.hybrid import computed_pairs  # noqa: E402
from minitransformer.verbs import formulas as shared_formulas  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402

FORMULAS = ARCHITECTURE.formulas
FAMILY = "nemotron_h"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


def test_each_kind_s_output_and_the_router_s_choice_are_captured_as_transformers_computes_them(made):
    _, ours, hf = made("every_kind")
    ids = prompt("every_kind", 40, seed=6)
    seen: dict = {}
    handles = [layer.mixer.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out))
               for i, layer in enumerate(hf.model.layers)]  # fmt: skip
    handles.append(hf.model.layers[1].mixer.gate.register_forward_hook(lambda m, a, out: seen.__setitem__("gate", out)))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = ours.run_with_cache(ids)
    outputs = {"mamba": "mixer.out", "moe": "moe.out", "full_attention": "attn.out", "mlp": "mlp.down"}
    for i, kind in enumerate(ours.config.layer_types):
        theirs = seen[i][0] if isinstance(seen[i], tuple) else seen[i]
        np.testing.assert_allclose(cache[f"blocks.{i}.{outputs[kind]}"], theirs[0].numpy(), atol=2e-4, rtol=1e-4)
    _, weights, indices = (x.numpy() for x in seen["gate"])
    chosen, gates = cache["blocks.1.moe.chosen"], cache["blocks.1.moe.gates"]
    for token in range(len(ids)):
        theirs = dict(zip(indices[token].tolist(), weights[token].tolist()))
        mine = dict(zip(chosen[token].tolist(), gates[token].tolist()))
        assert theirs.keys() == mine.keys()
        np.testing.assert_allclose([mine[e] for e in theirs], list(theirs.values()), atol=1e-6)


def test_the_cache_holds_a_state_for_mamba_layers_keys_and_values_for_attention_and_nothing_else(made):
    _, ours, _ = made("every_kind")
    c = ours.config
    cache = ours.new_cache(capacity=64)
    ours.run(prompt("every_kind", 20, seed=7), cache=cache)
    for i, kind in enumerate(c.layer_types):
        held = cache.layer(i)
        if kind == "mamba":
            assert held["ssm"].shape == (8, 8, 16) and held["conv"].shape == (3, c.conv_dim) and held["ssm"].any()
        elif kind == "full_attention":
            assert held.keys.shape == (2, 64, 8) and held.keys[:, :20].any()
        else:
            assert held.nbytes == 0
    assert cache.nbytes == 4 * (2 * (8 * 8 * 16 + 3 * c.conv_dim) + 2 * 2 * 2 * 64 * 8)


def chunk(name: str) -> int:
    return CONFIGS[name]["chunk_size"]


# Prompts at the Mamba layers' chunk boundaries (k C - 1, k C, k C + 1), past two full chunks and shorter than the
# conv's kernel, then a pass from the state in two chunks (C + 1) or in one; time_step_min's clamp (biases_clamped),
# on both sides of the recurrent form.
STEPPED = [("every_kind", 2 * chunk("every_kind") + d, 5) for d in (-1, 0, 1)] + [
    ("latent_groups", 2 * chunk("latent_groups") + 1, 5),
    ("biases_clamped", 2 * chunk("biases_clamped"), chunk("biases_clamped") + 1), ("every_kind", 2, 1)]  # fmt: skip


@pytest.mark.parametrize("name, n, then", STEPPED)
def test_the_mamba_layers_state_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n,
                                                                                                    then):  # fmt: skip
    """Each Mamba layer's conv state and [Hs, P, N] scan state in our cache equal transformers' cache's, and each
    pass's logits transformers', after a prompt in chunks, after each of 3 decode steps (the recurrent form) and after
    a pass of several positions from the cache; the other kinds of layer between them as they are."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    mamba = ours.config.layer_types.count("mamba")
    assert len(compared) == 5 * (1 + 2 * mamba), compared  # 5 passes: logits, conv and ssm a Mamba layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))  # the whole table, each OK or NOT OK


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("T, past", [(PROMPT, 0), (1, 30)])
def test_every_kind_of_layer_s_products_are_the_closed_form_s(made, name, T, past):
    """Each layer's products, kind by kind, in a prefill (the Mamba layers in chunks, attention in row chunks) and
    in a decode step (the Mamba layers' recurrent form, attention over the cached keys)."""
    _, ours, _ = made(name)
    c = ours.config
    cache = ours.new_cache()
    if past:
        ours.run(prompt(name, past, seed=8), cache=cache)
    phase = Phase("decode" if past else "prefill", 1, T, past + T)
    ours.run(prompt(name, T, seed=9), cache=cache, phase=phase)
    t, H, dh = past + T, c.n_head, c.d_head
    for i, kind in enumerate(c.layer_types):
        ran = [(r.op, r.dot_products, r.macs) for r in phase.layer_records(i) if r.kind == "matmul"]
        closed = {op: (dots, dots * n) for op, (dots, n) in FORMULAS.decoder.block.products(c, T, t, 1, i).items()}
        closed |= FORMULAS.scan(c, i, T, t)  # the scan as computed: in chunks, or the recurrent form
        if kind == "full_attention":  # over more than 128 positions, in chunks of query rows: the pairs they see
            pairs = computed_pairs(T, t)
            closed |= {"scores": (H * pairs, H * pairs * dh), "mix": (H * T * dh, H * dh * pairs)}
        assert ran == [(op, *counted) for op, counted in closed.items()], (i, kind)
    assert phase.macs == FORMULAS.pass_macs(c, T, t) == shared_formulas.pass_macs(c, T, t)
    if not past:  # the Mamba layers' scans in the recurrent form, the rest as computed
        assert phase.recurrent_macs == shared_formulas.recurrent_pass_macs(c, T, T)


def test_a_mamba_layer_s_decode_step_costs_the_same_at_context_20_as_at_150_and_its_state_does_not_grow():
    config = PRESETS["nemotron-h-8b"]
    steps = [count_generation(config, t - 1, 2).decodes[0] for t in (20, 150)]
    mamba, attention = config.layer_types.index("mamba"), config.layer_types.index("full_attention")
    per_layer = [{i: sum(r.macs for r in records) for records, _ in step.groups for i in {records[0].layer}}
                 for step in steps]  # fmt: skip
    one_step = FORMULAS.weight_macs_per_position(config, mamba) + FORMULAS.scan_macs(config, mamba, 1)
    assert per_layer[0][mamba] == per_layer[1][mamba] == one_step
    assert per_layer[0][attention] < per_layer[1][attention]  # attention grows with the context
    from minitransformer.verbs.memory import layer_caches

    small, long = (layer_caches(config, t) for t in (20, 131072))
    assert small["mamba"]["bytes"] == long["mamba"]["bytes"] == 24 * 4 * (3 * 10240 + 128 * 64 * 128)
    assert long["full_attention"]["bytes"] == 4 * 4 * 131072 * 2 * 8 * 128  # keys and values grow
    assert small["mlp"]["bytes"] == 0


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    _, ours, hf = made(name)
    from minitransformer.verbs.params import parameters

    total = transformers_parameters(hf_config(name))
    assert parameters(ours.config).total == FORMULAS.parameters(ours.config) == total
    c = ours.config
    experts = sum(p.numel() for layer in hf.model.layers if hasattr(layer.mixer, "experts")
                  for p in layer.mixer.experts.parameters())  # fmt: skip
    assert FORMULAS.active_parameters(c) == total - experts * (c.n_experts - c.top_k) // c.n_experts
    assert parameters(c).active == FORMULAS.active_parameters(c)


PUBLISHED = {"nemotron-h-8b": NEMOTRON_H_8B, "nemotron-3-nano-30b-a3b": NEMOTRON_3_NANO}


@pytest.mark.parametrize("preset", PUBLISHED)
def test_the_presets_are_their_config_json_and_their_totals_are_transformers_count(preset):
    published = PUBLISHED[preset]
    assert NemotronHConfig.from_hf_dict(published, name=preset) == PRESETS[preset]
    hf = transformers.NemotronHConfig(
        **{k: v for k, v in published.items() if k not in ("model_type", "architectures")}
    )
    assert FORMULAS.parameters(PRESETS[preset]) == transformers_parameters(hf)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_preset_s_config_json_reads_back_as_itself(preset):
    import json

    written = json.loads(json.dumps(PRESETS[preset].to_hf_dict()))  # as `config --preset` prints it
    assert NemotronHConfig.from_hf_dict(written, name=preset) == PRESETS[preset]


def test_the_presets_totals_and_nano_s_active_parameters():
    assert FORMULAS.parameters(PRESETS["nemotron-h-8b"]) == 8_100_852_736
    nano = PRESETS["nemotron-3-nano-30b-a3b"]
    assert (FORMULAS.parameters(nano), FORMULAS.active_parameters(nano)) == (31_577_937_344, 3_580_073_408)


def test_count_of_a_preset_sets_the_scan_beside_the_recurrent_form_and_each_layer_type_s_cache():
    result = run_cli("count", "--preset", "nemotron-h-8b", "--tokens", "1000", "--new-tokens", "2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert all(line in out for line in FORMULAS.count_notes(PRESETS["nemotron-h-8b"], 1000, 2))
    assert "x 24 mamba layers: 104 MB, the same at any context" in out and "K and V x 4 full_attention layers" in out
    assert "8,100,852,736 parameters" in out


def test_generate_trace_and_count_with_html_run_on_a_nemotron_h(made, tmp_path):
    directory, _, _ = made("every_kind")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "4",
                        "--html", str(tmp_path / "g.html"))  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3", "--layers", "all")
    assert traced.returncode == 0, traced.stderr
    for name in ("blocks.0.mixer.ssd.scores", "blocks.1.moe.chosen", "blocks.1.moe.shared_down", "blocks.2.attn.qk",
                 "blocks.3.mlp.act", "blocks.4.mixer.input", "blocks.5.attn.weights"):  # fmt: skip
        assert name in traced.stdout, name
    counted = run_cli("count", "--model", str(directory), "--tokens", "40", "--html", str(tmp_path / "c.html"))
    assert counted.returncode == 0, counted.stderr
    assert (tmp_path / "c.html").stat().st_size > 10_000 and (tmp_path / "g.html").stat().st_size > 10_000


@pytest.mark.parametrize("hf, match", [({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                                       ({"hybrid_override_pattern": "M*X"}, "hybrid_override_pattern"),
                                       ({"layers_block_type": ["mamba", "conv"]}, "layers_block_type"),
                                       ({"mlp_hidden_act": "xielu"}, "mlp_hidden_act"),
                                       ({"n_routed_experts": 6, "n_group": 4}, "n_group")])  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(hf, match):
    with pytest.raises(UserError, match=match):
        NemotronHConfig.from_hf_dict({"model_type": "nemotron_h", **hf})


def test_defaults_are_transformers_defaults():
    ours, t = NemotronHConfig.from_hf_dict({"model_type": "nemotron_h"}), transformers.NemotronHConfig()
    assert (list(ours.layer_types), ours.n_embd, ours.vocab_size, ours.n_head, ours.n_kv_head, ours.head_dim, ours.n_inner,
            ours.mlp_act, ours.ssm_heads, ours.ssm_head_dim, ours.state_size, ours.n_groups, ours.conv_kernel,
            ours.chunk_size, ours.time_step_min, ours.n_experts, ours.top_k, ours.moe_inner, ours.shared_inner,
            ours.n_group, ours.topk_group, ours.norm_topk_prob, ours.routed_scaling_factor, ours.norm_eps,
            ours.n_positions, ours.bos_token_id, ours.eos_token_id) == (
        ["mamba" if k == "linear_attention" else k for k in t.layers_block_type], t.hidden_size, t.vocab_size,
        t.num_attention_heads, t.num_key_value_heads, t.head_dim, t.intermediate_size, t.mlp_hidden_act,
        t.mamba_num_heads, t.mamba_head_dim, t.ssm_state_size, t.n_groups, t.conv_kernel, t.chunk_size,
        t.time_step_min, t.n_routed_experts, t.num_experts_per_tok, t.moe_intermediate_size,
        t.moe_shared_expert_intermediate_size, t.n_group, t.topk_group, t.norm_topk_prob, t.routed_scaling_factor,
        t.layer_norm_epsilon, t.max_position_embeddings, t.bos_token_id, t.eos_token_id)  # fmt: skip
