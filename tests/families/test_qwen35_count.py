"""Counting Qwen3.5 from its config alone: every product of a pass equal to its closed form in both kinds of layer
(the delta rule's seven products over a prompt in chunks, its three a position in the recurrent form of a decode
step, the causal conv a dot product of length K with its kernel), the recurrent form beside the chunks, a DeltaNet
layer's decode step the same at any context, and the state beside the KV cache in memory and on the command line."""

from __future__ import annotations

import json
from math import prod

import numpy as np
import pytest

from conftest import run_cli
from minitransformer.engine.causal_conv import causal_conv
from minitransformer.engine.ledger import Phase, padding_of
from minitransformer.engine.tape import Dims, Tape
from minitransformer.families.parts.delta_rule import scan_products
from minitransformer.families.qwen35.config import FULL, LINEAR, PRESETS, Qwen35Config, hybrid_layers
from minitransformer.families.qwen35.family import ARCHITECTURE
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes, decode_at
from minitransformer.verbs.memory import kv_cache_bytes_after, layer_caches, state_bytes

SHAPES = dict(n_head=4, n_kv_head=2, head_dim=8, n_embd=16, vocab_size=50, linear_key_heads=2, linear_value_heads=4,
              linear_key_dim=4, linear_value_dim=6, n_positions=512)  # fmt: skip
DENSE = Qwen35Config(n_layer=4, n_inner=24, layer_types=hybrid_layers(4), **SHAPES)
MOE = Qwen35Config(n_layer=4, n_inner=None, layer_types=(LINEAR, FULL, LINEAR, LINEAR), n_experts=4, top_k=2,
                   moe_inner=10, shared_inner=12, model_type="qwen3_5_moe_text", **SHAPES)  # fmt: skip
qwen35 = ARCHITECTURE.formulas
SCAN = {"delta.kk", "delta.solve", "delta.qk", "delta.read", "delta.query", "delta.mix", "delta.write"}


def random_qwen35(config: Qwen35Config, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    return Model(config, as_tree(tensors, config), source="memory")


def passes(config: Qwen35Config, T: int, batch: int = 1):
    """The prefill of T positions and the decode step after it, counted from the config."""
    counted = count_generation(config, T, 2, batch=batch)
    return counted.prefill, counted.decodes[0]


@pytest.mark.parametrize("config", [DENSE, MOE, PRESETS["qwen3.5-27b"], PRESETS["qwen3.5-35b-a3b"]],
                         ids=lambda c: c.name if c.name != "qwen3_5_text" else c.model_type)  # fmt: skip
@pytest.mark.parametrize("T, batch", [(1, 1), (2, 1), (64, 1), (100, 2)])
def test_every_product_of_a_prefill_and_a_decode_step_is_its_closed_form(config, T, batch):
    for p in passes(config, T, batch):
        closed = formulas.products(config, p.tokens, p.context, 1, batch)
        scan = scan_products(config, p.tokens, batch)
        kinds = dict.fromkeys(config.layer_types)
        for (records, layers), kind in zip(p.groups, kinds):
            assert layers == config.layer_types.count(kind)
            products = [r for r in records if r.kind == "matmul"]
            assert {r.op for r in products if r.op in SCAN} == (set(scan) if kind == LINEAR else set())
            for r in products:
                dots = prod(r.out_shape) if r.op == "delta.solve" else r.dot_products  # its record's shape: dense
                assert (dots, r.dot_length) == closed[r.op], (p.phase, r.op)
                if r.op in scan:
                    assert (r.dot_products, r.macs) == scan[r.op], (p.phase, r.op)
                else:
                    assert r.macs == r.dot_products * r.dot_length and r.recurrent is None, r.op
        assert p.macs == formulas.pass_macs(config, p.tokens, p.context, 1, batch)
        assert p.dot_products == formulas.pass_dot_products(config, p.tokens, p.context, 1, batch)
        assert p.recurrent_macs == formulas.recurrent_pass_macs(config, p.tokens, p.context, 1, batch)


@pytest.mark.parametrize("config", [DENSE, MOE], ids=["dense", "moe"])
@pytest.mark.parametrize("use_cache, batch", [(True, 1), (False, 1), (True, 2)])
def test_a_real_run_s_ledger_is_the_count_and_the_closed_form(config, use_cache, batch):
    n_prompt, n_new = 70, 3  # two chunks of the delta rule, then decode steps in the recurrent form
    real = count_passes(random_qwen35(config), n_prompt, n_new, use_cache, batch)
    counted = count_generation(config, n_prompt, n_new, use_cache, batch)
    assert [p.expand().records for p in counted.passes] == [p.records for p in real.phases]
    assert real.totals.macs == formulas.generation_macs(config, n_prompt, n_new, use_cache, batch)


def test_the_conv_is_a_dot_product_of_length_k_with_its_kernel_for_each_channel_and_position():
    """engine/causal_conv.py: the convolution numpy computes, one record of Dc T dot products of length K, and the
    state it leaves: the pass's last K - 1 inputs, which the next pass's first windows read."""
    Dc, K, T = 5, 4, 7
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((T, Dc)), rng.standard_normal((Dc, K))
    phase = Phase("prefill", 0, T, T)
    tape = Tape(Dims(T=T, t=T, D=8, H=2, F=12, V=50, R=1, data={"Dc": Dc, "Kc": K}), phase,
                stage_table=ARCHITECTURE.stage_table(DENSE)).layer(0)  # fmt: skip
    state = np.zeros((K - 1, Dc))
    out = causal_conv(tape, "linear.conv", x, w, state, channels="Dc", kernel="Kc")
    expected = np.stack([np.convolve(x[:, c], w[c, ::-1])[:T] for c in range(Dc)])  # causal: zeros before 0
    np.testing.assert_allclose(out[..., 0], expected, rtol=1e-12)
    (record,) = phase.records
    assert (record.op, record.dot_products, record.dot_length, record.macs) == ("linear.conv", Dc * T, K, Dc * T * K)
    assert (state == x[-(K - 1) :]).all()
    again = causal_conv(tape.with_sizes(), "linear.conv", x, w, state, channels="Dc", kernel="Kc")
    seen = np.concatenate([x, x])  # the second pass continues the first: the same as one pass over both
    whole = np.stack([np.convolve(seen[:, c], w[c, ::-1])[: 2 * T] for c in range(Dc)])
    np.testing.assert_allclose(again[..., 0], whole[:, T:], rtol=1e-12)


def test_the_recurrent_form_is_three_dk_dv_products_a_position_and_value_head():
    """A decode step's delta rule: S^T k, k (x) delta (an outer product: dot products of length 1, through the door),
    S^T q; over a prompt, the chunks' products stand beside that recurrent form in each record."""
    c = PRESETS["qwen3.5-27b"]
    Hv, dk, dv, T = c.linear_value_heads, c.linear_key_dim, c.linear_value_dim, 1000
    prefill, decode = passes(c, T)
    linear = next(records for records, _ in decode.groups if any(r.op == "delta.read" for r in records))
    scan = {r.op: r for r in linear if r.op in SCAN}
    assert {op: (r.dot_length, r.macs) for op, r in scan.items()} == {
        "delta.read": (dk, Hv * dk * dv),
        "delta.write": (1, Hv * dk * dv),
        "delta.query": (dk, Hv * dk * dv),
    }
    layers = len(formulas.state_layers(c))
    assert layers == 48 and prefill.recurrent_macs - prefill.macs == layers * (
        3 * T * Hv * dk * dv - qwen35.scan_macs(c, 0, T))  # fmt: skip
    chunked = sum(r.macs for records, _ in prefill.groups for r in records if r.recurrent is not None)
    recurrent = sum(r.recurrent_macs for records, _ in prefill.groups for r in records if r.recurrent is not None)
    assert recurrent == 3 * T * Hv * dk * dv and 1.4 < chunked / recurrent < 1.5  # the chunks' extra work
    assert all(r.recurrent is None for r in decode.block_records)  # one position: the recurrent form itself


def test_a_deltanet_layer_s_decode_step_costs_the_same_at_context_20_and_150():
    c = DENSE
    early, late = decode_at(c, 20), decode_at(c, 150)
    kinds = list(dict.fromkeys(c.layer_types))
    for (a, _), (b, _), kind in zip(early.groups, late.groups, kinds):
        macs_early, macs_late = sum(r.macs for r in a), sum(r.macs for r in b)
        if kind == LINEAR:
            assert macs_early == macs_late == formulas.weight_macs_per_position(c, 0) + 3 * 4 * 4 * 6
        else:  # q K^T and A V over 130 more keys
            assert macs_late - macs_early == 2 * c.n_head * c.head_dim * 130
    assert formulas.scan_macs(c, 0, 1) == qwen35.scan_recurrent_macs(c, 0, 1) == 3 * 4 * 4 * 6


@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-397b-a17b"])
def test_the_state_stays_the_same_while_the_kv_cache_grows(name):
    c = PRESETS[name]
    linear, full = c.layer_types.count(LINEAR), c.layer_types.count(FULL)
    state = 4 * linear * ((c.linear_kernel - 1) * c.conv_channels + c.linear_value_heads * 128 * 128)
    assert state_bytes(c) == state
    for positions in (1000, 131072):
        kinds = layer_caches(c, positions)
        assert kinds[LINEAR]["holds"] == "state" and kinds[LINEAR]["bytes"] == state
        assert kinds[LINEAR]["state"] == {"conv": [3, c.conv_channels], "recurrent": [c.linear_value_heads, 128, 128]}
        kv = 4 * full * positions * 2 * c.n_kv_head * c.head_dim
        assert kinds[FULL]["holds"] == "keys and values" and kinds[FULL]["bytes"] == kv
        assert kv_cache_bytes_after(c, positions) == kv
    assert formulas.kv_cache_bytes_per_token(c) == 4 * full * 2 * c.n_kv_head * c.head_dim


def test_count_prints_each_layer_kind_s_cache_or_state_and_the_whole():
    shown = {}
    for tokens in (4096, 8192):
        result = run_cli("count", "--preset", "qwen3.5-9b", "--tokens", str(tokens), "--json", "-")
        assert result.returncode == 0, result.stderr
        shown[tokens] = (result.stderr, json.loads(result.stdout)["memory"]["cache"])
    c = PRESETS["qwen3.5-9b"]
    state = state_bytes(c)
    for tokens, (screen, cache) in shown.items():
        assert cache["layer_types"][LINEAR]["bytes"] == state  # the same at 4,096 and 8,192 positions
        kv = kv_cache_bytes_after(c, tokens)
        assert cache["layer_types"][FULL]["bytes"] == kv and cache["bytes"] == state + kv
        assert "linear_attention" in screen and "full_attention" in screen and "Recurrent form:" in screen
    assert shown[8192][1]["layer_types"][FULL]["bytes"] == 2 * shown[4096][1]["layer_types"][FULL]["bytes"]


def test_a_scan_s_pad_slots_are_padding_in_proportion():
    """A scan's products are laid out by chunks, not slots: a row's pad slots are its share of that row's work."""
    prefill, _ = passes(DENSE, 10, batch=2)
    read = next(r for r in prefill.block_records if r.op == "delta.read")
    assert padding_of(read, [3, 0], 10, 10) == (read.dot_products * 3 // 20, read.macs * 3 // 20)
    assert padding_of(read, [3, 0], 11, 1) == (0, 0)  # a decode step after the pads: none of its slots
    assert padding_of(read, [11, 0], 11, 1) == (read.dot_products // 2, read.macs // 2)  # a finished row


def test_the_csv_and_json_put_the_recurrent_form_beside_each_product_of_a_scan():
    import csv

    c = PRESETS["qwen3.5-9b"]
    rows = list(csv.DictReader(run_cli("count", "--preset", "qwen3.5-9b", "--tokens", "200", "--csv", "-").stdout
                               .splitlines()))  # fmt: skip
    Hv, dk, dv = c.linear_value_heads, c.linear_key_dim, c.linear_value_dim
    by_op = {row["op"]: row for row in rows if row["phase"] == "prefill"}
    assert by_op["delta.read"]["recurrent_macs"] == str(200 * Hv * dk * dv)
    assert by_op["delta.kk"]["recurrent_macs"] == "0" and by_op["linear.qkv"]["recurrent_macs"] == ""
    doc = json.loads(run_cli("count", "--preset", "qwen3.5-9b", "--tokens", "200", "--json", "-").stdout)
    assert doc["totals"]["recurrent_macs"] == formulas.recurrent_pass_macs(c, 200, 200)
    ops = {o["op"]: o for o in doc["phases"][0]["layers"][0]["ops"]}
    assert ops["delta.write"]["recurrent_dot_products"] == 200 * Hv * dk * dv  # k (x) delta: dot products of length 1
