"""Kimi Linear's quirks (what every family owes runs in test_conformance.py, on the same models): the KDA states in
the cache after a prompt past a chunk, each decode step and a pass from the state; the count within one chunk; the
published checkpoint's name of the dense layer's MLP; and KDA's counting rules in closed form (README's "Reading the
ledger"): the decay's low-rank gate products with weights, a decode step flat in context."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from safetensors.numpy import load_file, save_file  # noqa: E402

from minitransformer import load_model  # noqa: E402
from minitransformer.families.kimi_linear.config import LINEAR, PRESETS  # noqa: E402
from minitransformer.families.parts.kda import KimiDeltaAttention  # noqa: E402
from minitransformer.families.qwen35.config import CHUNK  # noqa: E402
from minitransformer.families.table import architecture_of  # noqa: E402

FAMILY = "kimi_linear"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
prompt = SPEC.prompt_ids
A3B = PRESETS["kimi-linear-48b-a3b"]


@pytest.mark.parametrize("name, n, then", [("pattern-groups-dense", CHUNK + 1, 5), ("types-lora-head", 1, 2)])
def test_the_states_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each KDA layer's conv state and delta-rule state against transformers' cache, and each pass's logits, after a
    prompt (past a chunk; of one position), each of 3 decode steps and a pass from the state."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    linear = sum(kind.startswith(LINEAR) for kind in ours.config.layer_types)
    assert len(compared) == 5 * (1 + 2 * linear), compared
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


@pytest.mark.parametrize("name", SPEC.configs)
def test_count_equals_a_real_run_and_the_closed_form_within_one_chunk(made, name):
    _, ours, _ = made(name)
    checks.count_equals_a_real_run_and_the_closed_form(ours, 5, 3)  # a prompt shorter than a chunk


def test_the_published_checkpoint_s_dense_layer_under_mlp_reads_as_transformers_saves_it(made, tmp_path):
    """transformers' save_pretrained writes the dense first layer's MLP under block_sparse_moe (its renaming of the
    experts catches it too); the published checkpoint keeps it under mlp. Both load, to the same logits."""
    directory, ours, _ = made("pattern-groups-dense")
    tensors = load_file(directory / "model.safetensors")
    dense = [name for name in tensors if name.startswith("model.layers.0.block_sparse_moe.")]
    assert sorted(dense) == [f"model.layers.0.block_sparse_moe.{m}_proj.weight" for m in ("down", "gate", "up")]
    published = {name.replace("layers.0.block_sparse_moe.", "layers.0.mlp."): value for name, value in tensors.items()}
    save_file(published, tmp_path / "model.safetensors", metadata={"format": "pt"})
    shutil.copy(directory / "config.json", tmp_path / "config.json")
    ids = prompt("pattern-groups-dense", 30, seed=2)
    assert np.array_equal(load_model(tmp_path).logits(ids), ours.logits(ids))


def test_a_kda_layer_s_products_with_weights_count_its_low_rank_gates():
    """Per position: q, k, v and o_proj (4 D H dk), the decay's and the output gate's low-rank products (D dk, then
    dk H dk, each), beta (D H) and the conv (3 H dk K): 39,510,016 MACs in Kimi-Linear-48B-A3B's KDA layer."""
    D, H, dk, K = A3B.n_embd, A3B.linear_heads, A3B.linear_head_dim, A3B.linear_kernel
    mixer = KimiDeltaAttention()
    weights = {op: n for op, n in mixer.products(A3B, 1, 1).items() if op not in mixer.scan(A3B, 1, 1)}
    assert weights["linear.f_a"] == weights["linear.g_a"] == (dk, D)
    assert weights["linear.f_b"] == weights["linear.g_b"] == (H * dk, dk)
    macs = sum(dots * length for dots, length in weights.values())
    assert macs == 4 * D * H * dk + 2 * (D * dk + dk * H * dk) + D * H + 3 * H * dk * K == 39_510_016, macs


@pytest.mark.parametrize("t", [2, 4096, 1_000_000])
def test_a_kda_decode_step_is_flat_in_context(t):
    """A decode step's delta rule in the recurrent form: S^T k, k (x) delta and S^T q, 3 H dk^2 MACs (1,572,864 in
    Kimi-Linear-48B-A3B), whatever the context; its state [H, dk, dk] and the conv's [K - 1, 3 H dk] the same at
    every t."""
    H, dk, K = A3B.linear_heads, A3B.linear_head_dim, A3B.linear_kernel
    formulas = architecture_of(A3B).formulas
    scan = formulas.scan(A3B, 0, 1, t)
    assert scan == {"delta.read": (H * dk, H * dk * dk), "delta.write": (H * dk * dk, H * dk * dk),
                    "delta.query": (H * dk, H * dk * dk)}, scan  # fmt: skip
    assert sum(macs for _, macs in scan.values()) == 3 * H * dk * dk == 1_572_864
    state = dict(A3B.layer_cache(0).arrays)
    assert state == {"conv": (K - 1, 3 * H * dk), "recurrent": (H, dk, dk)}, state


def test_the_preset_reads_the_published_layer_lists_from_one():
    """linear_attn_config's full_attn_layers [4, 8, ..., 24, 27] count from 1: MLA in layers 3, 7, ..., 23 and 26."""
    full = [i for i, kind in enumerate(A3B.layer_types) if not kind.startswith(LINEAR)]
    assert full == [3, 7, 11, 15, 19, 23, 26], full
    assert json.loads(json.dumps(A3B.to_hf_dict()))["mlp_layer_types"] == ["dense"] + ["sparse"] * 26
