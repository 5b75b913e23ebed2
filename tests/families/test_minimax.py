"""MiniMax-01's quirks (what every family owes runs in test_conformance.py, on the same models): lightning attention's
counting rule in closed form (README's "Reading the ledger"): a prompt's scan in blocks (the intra-block products and
the inter-block state, the last block short) with the recurrent form beside each record, a decode step flat in
context; the slopes as transformers makes them; the published spellings MiniMaxConfig would ignore, refused."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.minimax.config import LINEAR, OWN_SPELLINGS, PRESETS, MiniMaxConfig  # noqa: E402
from minitransformer.families.parts.lightning import slope_rates  # noqa: E402
from minitransformer.families.table import architecture_of  # noqa: E402
from minitransformer.verbs.count import count_passes  # noqa: E402

FAMILY = "minimax"  # the family whose models the `made` fixture (tests/conftest.py) gives
SCAN = ("lightning.qk", "lightning.mix", "lightning.query", "lightning.write")
TEXT_01 = PRESETS["minimax-text-01"]


def test_a_prompt_s_scan_is_its_blocks_closed_form_with_the_recurrent_form_beside(made):
    """A prompt of T = 150 in blocks of C = 16 (nine, and a last of 6), per lightning layer and head: Q K^T within each
    block (b^2 dot products of length dh) and A V (b dh of length b): 2 dh (9 x 16^2 + 6^2) MACs; the state read by
    the decayed queries and written by the decayed keys, the recurrent form's two products a block at once: 2 T dh^2,
    each record with its recurrent form beside it (T dh^2 each; none for qk and mix)."""
    _, ours, _ = made("three-to-one-deepnorm")
    c = ours.config
    H, dh, T = c.n_head, c.d_head, 150
    prefill = count_passes(ours, T, 1).phases[0]
    records = {r.op: r for r in prefill.records if r.layer == 0 and r.op in SCAN}
    squares = 9 * 16**2 + 6**2
    expected = {
        "lightning.qk": (H * squares, H * squares * dh, (0, 0)),
        "lightning.mix": (H * T * dh, H * squares * dh, (0, 0)),
        "lightning.query": (H * T * dh, H * T * dh * dh, (H * T * dh, H * T * dh * dh)),
        "lightning.write": (H * 10 * dh * dh, H * T * dh * dh, (H * T * dh * dh, H * T * dh * dh)),
    }
    got = {op: (r.dot_products, r.macs, r.recurrent) for op, r in records.items()}
    assert got == expected, got
    blocks = sum(macs for _, macs, _ in got.values())
    assert blocks == 2 * H * T * dh * dh + 2 * H * dh * squares == 76_800 + 149_760, blocks
    assert sum(r[1] for r in expected.values() if r[2] != (0, 0)) == 2 * T * H * dh * dh  # the recurrent form's


# (MiniMaxCache's length is its first layer's: a softmax one, for transformers' positions and masks past a prompt)
@pytest.mark.parametrize("name, n, then", [("alternate-top1", 40, 20), ("one-block", 1, 3)])
def test_the_states_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each lightning layer's state [H, dh, dh] against transformers' (MiniMaxCache's linear_cache), and each pass's
    logits, after a prompt (of 40 in blocks of 24, the last short; of one position), each of 3 decode steps (the
    recurrent form) and a pass of several positions from the state (ours in blocks from it, transformers' position by
    position: the two forms agree)."""
    _, ours, hf = made(name)
    ids = FAMILIES[FAMILY].prompt_ids(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    assert len(compared) == 5 * (1 + ours.config.layer_types.count(LINEAR)), compared
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


@pytest.mark.parametrize("t", [2, 4096, 1_000_000])
def test_a_lightning_decode_step_is_flat_in_context(t):
    """A decode step's scan in the recurrent form: k^T v written into each head's state and q S read from it, 2 H dh^2
    MACs (2,097,152 in MiniMax-Text-01), whatever the context; the state [H, dh, dh] at every t. Its softmax layers'
    scores and mix grow with t."""
    H, dh = TEXT_01.n_head, TEXT_01.d_head
    formulas = architecture_of(TEXT_01).formulas
    scan = formulas.scan(TEXT_01, 0, 1, t)
    assert scan == {"lightning.write": (H * dh * dh, H * dh * dh), "lightning.query": (H * dh, H * dh * dh)}, scan
    assert sum(macs for _, macs in scan.values()) == 2 * H * dh * dh == 2_097_152
    assert dict(TEXT_01.layer_cache(0).arrays) == {"recurrent": (H, dh, dh)}
    full = TEXT_01.layer_types.index("full_attention")
    step = formulas.decoder.block.products(TEXT_01, 1, t, 1, full)
    assert step["scores"] == (H * t, dh), step["scores"]


def test_a_prompt_s_scan_costs_2_dh_c_a_position_more_than_the_recurrent_form():
    """MiniMax-Text-01 over a prompt of 1,024 positions (four blocks of 256): 2 H dh^2 + 2 H dh C MACs a position and
    lightning layer (C = 256), against 2 H dh^2 in the recurrent form."""
    H, dh, C, T = TEXT_01.n_head, TEXT_01.d_head, TEXT_01.block_size, 1024
    formulas = architecture_of(TEXT_01).formulas
    assert formulas.scan_macs(TEXT_01, 0, T) == T * (2 * H * dh * dh + 2 * H * dh * C) == 6_442_450_944
    assert formulas.scan_recurrent_macs(TEXT_01, 0, T) == T * 2 * H * dh * dh


@pytest.mark.parametrize("layer", [0, 3, 79])
def test_the_slopes_are_transformers(layer):
    """Each head's decay rate, r^(h+1) (1 - l / (L - 1 + 1e-5) + 1e-5) with r = 2^(-8 / H): transformers' get_slope_rate
    (in float32) within float32's rounding, the first layer's fading fastest and the last's hardly at all."""
    from transformers.models.minimax.modeling_minimax import MiniMaxLightningAttention

    hf = transformers.MiniMaxConfig(num_hidden_layers=80, num_attention_heads=64, hidden_size=64, head_dim=1,
                                    block_size=4, layer_types=[LINEAR] * 80)  # fmt: skip
    theirs = MiniMaxLightningAttention(hf, layer).get_slope_rate()[:, 0, 0].numpy()
    ours = slope_rates(SimpleNamespace(n_layer=80, n_head=64), layer)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert ours[0] == pytest.approx(2 ** (-8 / 64) * (1 - layer / (79 + 1e-5) + 1e-5))


@pytest.mark.parametrize("spelling", ["layernorm_mlp_alpha", "layernorm_full_attention_beta", "attn_type_list"])
def test_minimax_s_own_spellings_are_refused_where_transformers_would_ignore_them(spelling):
    """A file of MiniMax's own code's keys (layernorm_*_alpha and _beta, attn_type_list) under model_type minimax:
    MiniMaxConfig reads none of them and would take its defaults (scales of 1, alternate layers), so one without
    transformers' key is refused, saying which to give; beside that key it is a leftover, read as transformers reads the
    file (ignored)."""
    written = json.loads(json.dumps(TEXT_01.to_hf_dict()))
    value = [0] * 80 if spelling == "attn_type_list" else 2.0
    assert MiniMaxConfig.from_hf_dict({**written, spelling: value}, name="beside") == TEXT_01
    alone = {key: v for key, v in written.items() if key != OWN_SPELLINGS[spelling]} | {spelling: value}
    with pytest.raises(UserError, match=f"config {spelling}.* give {OWN_SPELLINGS[spelling]}"):
        MiniMaxConfig.from_hf_dict(alone, name="alone")
