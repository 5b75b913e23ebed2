"""Jamba's quirks against transformers (what every family owes runs in test_conformance.py, on the same models): the
states its Mamba layers keep against transformers' cache after a prompt and each decode step (attention layers
between them), its kinds of layer as JambaConfig's periods and offsets make them, the preset's totals as
transformers counts them and as the card says, and count's notes on the selective scan of its Mamba layers.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import transformers_parameters  # noqa: E402
from published_configs import JAMBA_1_5_MINI  # noqa: E402

from conftest import run_cli  # noqa: E402
from minitransformer import load_model  # noqa: E402
from minitransformer.families.jamba.family import ARCHITECTURE, PRESETS, JambaConfig  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402

FAMILY = "jamba"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
MINI = PRESETS["jamba-1.5-mini"]


@pytest.mark.parametrize("name, n", [("every-kind-auto-rank", 37), ("biases-kernel3-tied", 2)])
def test_the_states_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n):
    """Each Mamba layer's conv state [K - 1, I] and scan state [I, N] in our cache equal transformers' cache's, and
    each pass's logits transformers', after a prompt (one shorter than the conv's kernel too) and 3 decode steps; the
    attention layers between them keep keys and values (no state to compare)."""
    _, ours, hf = made(name)
    compared = checks.states_and_logits_step_by_step(ours, hf, SPEC.prompt_ids(name, n, seed=6), steps=3)
    mamba = sum(kind.startswith("mamba") for kind in ours.config.layer_types)
    assert len(compared) == 4 * (1 + 2 * mamba), compared  # 4 passes: logits, and conv and ssm a Mamba layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


@pytest.mark.parametrize("n, attn_period, attn_offset, expert_period, expert_offset, experts", [
    (32, 8, 4, 2, 1, 16), (7, 3, 0, 2, 0, 16), (6, 1, 0, 3, 2, 2), (5, 5, 4, 1, 0, 16), (4, 2, 1, 1, 0, 1),
])  # fmt: skip
def test_the_kinds_of_layer_are_transformers_layers_block_type_and_layers_num_experts(
    n, attn_period, attn_offset, expert_period, expert_offset, experts
):
    keys = dict(num_hidden_layers=n, attn_layer_period=attn_period, attn_layer_offset=attn_offset,
                expert_layer_period=expert_period, expert_layer_offset=expert_offset,
                num_experts=experts)  # fmt: skip
    theirs = transformers.JambaConfig(**keys)
    ours = JambaConfig.from_hf_dict({"model_type": "jamba", **keys})
    assert [k.removesuffix("_moe") for k in ours.layer_types] == [
        "full_attention" if kind == "attention" else kind for kind in theirs.layers_block_type
    ]
    assert [k.endswith("_moe") for k in ours.layer_types] == [e > 1 for e in theirs.layers_num_experts]


def test_one_expert_is_the_swiglu_mlp_as_transformers_makes_it(tmp_path):
    """num_experts 1: transformers' expert layers are its plain MLP, with no router; so are ours, to its logits."""
    config = transformers.JambaConfig(**(FAMILIES[FAMILY].configs["every-kind-auto-rank"] | {"num_experts": 1}))
    hf = checks.save_random(tmp_path, config, spread=0.3)
    assert {type(layer.feed_forward).__name__ for layer in hf.model.layers} == {"JambaMLP"}
    ours = load_model(tmp_path)
    assert ours.config.mlp_types == ("dense",) * 4
    ids = SPEC.prompt_ids("every-kind-auto-rank", 40, seed=2)
    assert checks.worst(ours.logits(ids), hf(torch.tensor([ids])).logits[0]) <= 1


def test_one_expert_routes_nothing_so_count_refuses_routing_and_its_json_names_none(tmp_path):
    """num_experts 1 leaves no layer a router: --routing is refused as for a dense model, the JSON says no routing."""
    path = tmp_path / "config.json"
    transformers.JambaConfig(**(FAMILIES[FAMILY].configs["every-kind-auto-rank"] | {"num_experts": 1})).to_json_file(
        path
    )
    refused = run_cli("count", "--config", str(path), "--tokens", "5", "--routing", "worst")
    assert refused.returncode == 2 and refused.stdout == "", (refused.returncode, refused.stdout)
    assert refused.stderr.count("\n") == 1 and "--routing is for a mixture of experts" in refused.stderr, refused.stderr
    counted = run_cli("count", "--config", str(path), "--tokens", "5", "--json", "-")
    assert counted.returncode == 0, counted.stderr
    assert "routing" not in json.loads(counted.stdout), sorted(json.loads(counted.stdout))


def test_jamba_1_5_mini_is_its_config_json_and_the_card_s_52b_with_12b_active():
    """52 B parameters, 12 B active (the card): 51,570,323,328, transformers' count of the same config.json on the
    meta device, of which 2 of 16 experts in each expert layer and everything else whole, 12,110,311,296."""
    assert JambaConfig.from_hf_dict(JAMBA_1_5_MINI, name="jamba-1.5-mini") == MINI
    keys = {k: v for k, v in JAMBA_1_5_MINI.items() if k not in ("model_type", "architectures")}
    total = transformers_parameters(transformers.JambaConfig(**keys))
    assert ARCHITECTURE.formulas.parameters(MINI) == total == 51_570_323_328
    assert ARCHITECTURE.formulas.active_parameters(MINI) == 12_110_311_296
    assert MINI.layer_types.count("full_attention") == 4 and MINI.mlp_types.count("moe") == 16


def test_jamba_1_5_large_is_the_card_s_398b_with_94b_active():
    """398 B parameters, 94 B active (the card), from the shapes its config.json is quoted with: transformers' count on
    the meta device, and 2 of 16 experts in each of its 36 expert layers."""
    large = PRESETS["jamba-1.5-large"]
    keys = dict(num_hidden_layers=72, hidden_size=8192, num_attention_heads=64, num_key_value_heads=8,
                intermediate_size=24576, mamba_dt_rank=512)  # fmt: skip
    total = transformers_parameters(transformers.JambaConfig(**keys))
    assert ARCHITECTURE.formulas.parameters(large) == total == 398_555_145_696
    assert ARCHITECTURE.formulas.active_parameters(large) == 94_149_338_592


def test_count_says_the_scan_of_the_28_mamba_layers_beside_the_published_count():
    """count's notes are the selective scan's, over the Mamba layers alone (28 of 32): 2 I N T MACs a layer against
    the published 9 B L D N FLOPs; a decode step's scan is the same at any context, the attention layers' grow."""
    T, I, N = 1000, MINI.d_inner, MINI.state_size  # noqa: E741 - the symbol
    notes = "\n".join(ARCHITECTURE.formulas.count_notes(MINI, T, 1))
    assert "The selective scan (28 Mamba-1 layers)" in notes
    assert f"2 I N T = {2 * I * N * T:,} MACs a layer" in notes and f"9 B L D N = {9 * T * I * N:,} FLOPs" in notes
    steps = [count_generation(MINI, t - 1, 2).decodes[0] for t in (20, 100_000)]
    scans = [sum(r.macs for r in step.block if r.stage.product == "scan") for step in steps]
    assert scans[0] == scans[1] == 2 * I * N  # layer 0's block, a Mamba layer's: the same at any t
    assert steps[1].macs - steps[0].macs == 4 * 2 * MINI.n_head * MINI.d_head * (100_000 - 20)  # 4 attention layers
