"""Gemma 4's own against transformers (what every family owes runs in test_conformance.py, on the same models):
key-value sharing. A shared layer attends over the keys and values the last earlier layer of its kind computed in the
same pass, as transformers' does; it has no k and v (no tensors, no products, no cache), records shared_kv instead,
and count says whose each such layer reads; the cache holds each shared pair once, in closed form."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.families.table import PRESETS, architecture_of  # noqa: E402
from minitransformer.verbs.memory import kv_cache_bytes, kv_cache_bytes_after  # noqa: E402

FAMILY = "gemma4"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
NAME = "shared-kv-per-layer-k-eq-v"  # sliding, full, sliding, full, then a shared sliding and a shared full


def cache_numbers(c, positions: int, windows: bool = True) -> int:
    """The closed form: over the layers with their own keys and values (the first L - num_kv_shared_layers), K and V
    of Hkv heads of dh (a full layer's: global_head_dim wide, num_global_key_value_heads where K = V), each at most its
    window's positions (`windows`; else every position, as a cache allocated for them holds); nothing for a shared
    layer."""
    total = 0
    for kind in c.layer_types[: c.n_layer - c.n_shared]:
        full = kind == "full_attention"
        dh = c.global_head_dim if full else c.head_dim
        heads = c.n_global_kv_head if full and c.k_eq_v and c.n_global_kv_head else c.n_kv_head
        total += 2 * heads * dh * (positions if full or not windows else min(positions, c.sliding_window))
    return total


def test_a_shared_layer_reads_the_keys_and_values_of_the_last_earlier_layer_of_its_kind(made):
    _, ours, hf = made(NAME)
    c = ours.config
    assert c.kv_sources == [None, None, None, None, 2, 3]
    assert [hf.config.kv_sharing_modes[i] for i in range(6)] == [None, None, "store", "store", "reuse", "reuse"]
    ids = SPEC.prompt_ids(NAME, 30, seed=5)
    _, cache = ours.run_with_cache(ids)
    for i, source in enumerate(c.kv_sources):
        if source is not None:  # the very arrays the earlier layer cached, handed on
            np.testing.assert_array_equal(cache[f"blocks.{i}.attn.keys"], cache[f"blocks.{source}.attn.keys"])
            np.testing.assert_array_equal(cache[f"blocks.{i}.attn.values"], cache[f"blocks.{source}.attn.values"])


def test_a_shared_layer_has_no_keys_and_values_of_its_own_and_its_products_are_the_closed_form(made):
    _, ours, _ = made(NAME)
    c = ours.config
    T = 30
    phase = Phase("prefill", 0, T, T)
    ours.run(SPEC.prompt_ids(NAME, T, seed=7), phase=phase)
    names = ours.architecture.layout.tensors(c)
    for i, source in enumerate(c.kv_sources):
        ops = {r.op: (r.dot_products, r.dot_length) for r in phase.layer_records(i) if r.kind == "matmul"}
        full = c.layer_types[i].startswith("full")
        H, dh = c.n_head, (c.global_head_dim if full else c.head_dim)
        Hkv = c.n_global_kv_head if full else c.n_kv_head
        keys = T if full else min(T, c.sliding_window + T - 1)
        F = c.n_inner * (2 if source is not None else 1)  # use_double_wide_mlp: the shared layers' MLP twice as wide
        P, D = c.per_layer_width, c.n_embd
        expected = {"q": (T * H * dh, D), "scores": (H * T * keys, dh), "mix": (H * T * dh, keys), "out": (T * D, H * dh),
                    "mlp.gate": (T * F, D), "mlp.up": (T * F, D), "mlp.down": (T * D, F), "ple.gate": (T * P, D),
                    "ple.out": (T * D, P)}  # fmt: skip
        if source is None:  # its own k; v the keys' projection on a full layer (K = V), its own on a sliding one
            expected |= {"k": (T * Hkv * dh, D), **({} if full else {"v": (T * Hkv * dh, D)})}
        assert ops == expected, (i, ops, expected)
        stages = [r.op for r in phase.layer_records(i)]
        assert ("shared_kv" in stages, "cache" in stages, "v_is_k" in stages) == (
            source is not None, source is None, source is None and full), (i, stages)  # fmt: skip
        own = {f"layers.{i}.self_attn.{name}.weight" for name in ("k_proj", "v_proj", "k_norm")} & set(names)
        assert own == (set() if source is not None else {f"layers.{i}.self_attn.{n}.weight" for n in
                       (("k_proj", "k_norm") if full else ("k_proj", "v_proj", "k_norm"))}), (i, own)  # fmt: skip
    cache = ours.new_cache(capacity=40)
    assert cache.nbytes == kv_cache_bytes(c, 40) == 4 * cache_numbers(c, 40, windows=False) > 0


@pytest.mark.parametrize("preset", ["gemma-4-e2b", "gemma-4-e4b", "gemma-4-31b"])
def test_the_cache_holds_each_shared_pair_once(preset):
    c = PRESETS[preset]
    for positions in (1, 100, c.sliding_window, 100_000):
        assert kv_cache_bytes_after(c, positions) == 4 * cache_numbers(c, positions), (preset, positions)
    if preset == "gemma-4-e2b":  # 12 sliding and 3 full layers of 35 keep theirs: 12 x 2 x 256 + 3 x 2 x 512
        assert cache_numbers(c, 1) == 9_216 and c.n_shared == 20


def test_count_says_whose_keys_and_values_each_shared_layer_reads():
    c = PRESETS["gemma-4-e2b"]
    notes = architecture_of(c).formulas.count_notes(c, 100, 2)
    said = (
        "Key-value sharing: 15 of 35 layers compute their keys and values (k, v) and cache them; the other 20 compute"
    )
    assert said + " none" in notes, notes
    read = "    (num_kv_shared_layers): layers 15-18, 20-23, 25-28, 30-33 read layer 13's, layers 19, 24, 29, 34 read layer"
    assert read in notes and "    14's" in notes, notes
    assert any("9,216 numbers a token" in line and "not the 21,504" in line for line in notes), notes
