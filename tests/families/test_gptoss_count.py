"""Counting gpt-oss from its config alone (no torch needed): the presets' counts equal the closed forms, the sliding
layers cost less than the full ones once a prompt passes the window, and gpt-oss-20b's prefill of 100 tokens equals
numbers worked out by hand from its config.json."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import run_cli
from minitransformer.families.gpt_oss.config import PRESETS
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation

BLOCK = ["ln_1", "q", "k", "v", "split_heads", "rope", "cache", "scores", "scale", "mask", "sinks", "softmax", "mix",
         "merge_heads", "out", "resid_mid", "ln_2", "router", "router.topk", "router.softmax", "expert.gather",
         "expert.gate_up", "expert.clamp", "expert.act", "expert.mul", "expert.down", "expert.weigh", "moe.combine",
         "resid_post"]  # fmt: skip


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_a_preset_s_count_equals_the_closed_form(preset, use_cache):
    c = PRESETS[preset]
    counted = count_generation(c, 300, 3, use_cache=use_cache)
    assert counted.totals.macs == formulas.generation_macs(c, 300, 3, use_cache=use_cache)
    assert [r.op for r in counted.prefill.block] == BLOCK


def test_the_sliding_layers_cost_less_past_the_window_and_the_full_ones_do_not():
    c = PRESETS["gpt-oss-20b"]
    weights, dots = formulas.weight_macs_per_position(c), formulas.weight_dot_products_per_position(c)
    assert formulas.layer_groups(c) == {(128, weights, dots, (0, 0)): 12, (None, weights, dots, (0, 0)): 12}
    T = 1000
    sliding = formulas.layer_macs(c, T, T)  # the window of 128
    full = formulas.layer_macs(replace(c, sliding_window=None, layer_types=("full_attention",) * 24), T, T)
    assert sliding < full and full - T * weights == 2 * 64 * 64 * formulas.computed_pairs(T, T)  # every pair
    assert formulas.pass_macs(c, T, T) == 12 * sliding + 12 * full + formulas.logits_macs(c)
    assert count_generation(c, T, 1).totals.macs == formulas.pass_macs(c, T, T)


def test_gpt_oss_20b_prefill_of_100_tokens_by_hand():
    # From openai/gpt-oss-20b's config.json: D 2,880, 64 heads of 64 (H dh 4,096), 8 key/value heads (512), E 32,
    # k 4, F 2,880, V 201,088, 24 layers. Per position and layer: q 2,880 x 4,096 + k, v 2 x 2,880 x 512 + out
    # 4,096 x 2,880 + router 2,880 x 32 + 4 experts x (2,880 x 5,760 + 2,880 x 2,880).
    per_position = 2880 * 4096 + 2 * 2880 * 512 + 4096 * 2880 + 2880 * 32 + 4 * (2880 * 5760 + 2880 * 2880)
    assert per_position == 126_167_040
    layer = 100 * per_position + 2 * 4096 * 100 * 100  # scores and mix: 100 x 100 pairs (the window, 128, cuts none)
    assert layer == 12_698_624_000
    counted = count_generation(PRESETS["gpt-oss-20b"], 100, 1)
    assert counted.totals.macs == 24 * layer + 2880 * 201_088 == 305_346_109_440  # and the last position's logits


def test_params_says_the_active_count_with_and_without_the_embedding_as_the_cards_differ():
    shown = run_cli("params", "--preset", "gpt-oss-20b")
    assert shown.returncode == 0, shown.stderr
    active, without = 4_187_440_704, 4_187_440_704 - 201_088 * 2_880  # less V D, the embedding
    assert f"{active:,} of them active" in shown.stdout and f"without it, {without:,})" in shown.stdout
    assert round(without / 1e8) == 36  # openai's card: 3.6B active
