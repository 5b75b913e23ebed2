"""Gemma 4's own against transformers (what every family owes runs in test_conformance.py, on the same models):
key-value sharing. A shared layer attends over the keys and values the last earlier layer of its kind computed in the
same pass, as transformers' does; it has no k and v (no tensors, no products, no cache), records shared_kv instead,
and count says whose each such layer reads; the cache holds each shared pair once, in closed form."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES, GEMMA4  # noqa: E402 - after the importorskips: it imports torch
from family_checks import save_random, worst  # noqa: E402

from minitransformer import UserError, load_model  # noqa: E402
from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.families.table import PRESETS, architecture_of, read_config  # noqa: E402
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


@pytest.mark.parametrize(
    "sizes",
    [{"global_head_dim": 8}, {"global_head_dim": 8, "attention_k_eq_v": True, "num_global_key_value_heads": 1}],
    ids=["full heads as wide as the sliding ones", "and fewer of them, K = V"],
)
def test_a_file_whose_per_layer_config_leaves_out_what_equals_the_sliding_layers_reads_as_transformers(sizes, tmp_path):
    """transformers 5.24 writes the full layers' sizes in per_layer_config and leaves out an override equal to the
    layers' own (head_dim 8 here): {} or only num_key_value_heads, and no global_head_dim. Read back, those layers'
    heads are head_dim wide, not global_head_dim's default (512)."""
    config = transformers.Gemma4TextConfig(**GEMMA4, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=7,
                                           layer_types=["sliding_attention", "full_attention"],
                                           hidden_size_per_layer_input=0, **sizes)  # fmt: skip
    hf = save_random(tmp_path, config, spread=0.3)
    written = json.loads((tmp_path / "config.json").read_text())
    assert "global_head_dim" not in written
    assert written["per_layer_config"] == ({"1": {"num_key_value_heads": 1}} if "attention_k_eq_v" in sizes else {})
    ours = load_model(tmp_path)
    kv_heads = 1 if "attention_k_eq_v" in sizes else 2
    assert (ours.config.global_head_dim, ours.config.n_global_kv_head or ours.config.n_kv_head) == (8, kv_heads)
    ids = list(range(1, 41))
    assert worst(ours.logits(ids), hf(torch.tensor([ids])).logits[0]) <= 1


def test_vision_tokens_seeing_each_other_both_ways_leaves_a_text_only_run_causal(tmp_path):
    """use_bidirectional_attention "vision" (the published 26B-A4B's and 31B's) is read, not refused: transformers'
    text-only run masks causally, and so do we. "all" stays refused (conformance_configs' refusals)."""
    config = transformers.Gemma4TextConfig(**GEMMA4, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                           sliding_window=7, layer_types=["sliding_attention", "full_attention"],
                                           hidden_size_per_layer_input=0,
                                           use_bidirectional_attention="vision")  # fmt: skip
    hf = save_random(tmp_path, config, spread=0.3)
    assert json.loads((tmp_path / "config.json").read_text())["use_bidirectional_attention"] == "vision"
    ids = list(range(1, 41))
    with torch.no_grad():
        expected, first = (hf(torch.tensor([prompt])).logits[0].numpy() for prompt in (ids, ids[:20]))
    assert worst(load_model(tmp_path).logits(ids), expected) <= 1
    assert worst(first, expected[:20]) <= 1  # causal: the first 20 positions' logits without the rest
    causal = {"model_type": "gemma4_text", "num_hidden_layers": 2}
    assert read_config(causal | {"use_bidirectional_attention": False}, name="g4")[0] == read_config(causal, "g4")[0]
    with pytest.raises(UserError, match="use_bidirectional_attention"):
        read_config(causal | {"use_bidirectional_attention": "all"}, name="g4")


@pytest.mark.parametrize(
    "per_layer_config, says",
    [
        ({"0": {"head_dim": 16}, "1": {"head_dim": 16}}, "for every full_attention layer"),  # a sliding layer's
        ({"1": {"head_dim": 16}}, "for every full_attention layer"),  # one of the two full layers
        ({"1": {"head_dim": 16}, "3": {"head_dim": 32}}, "the same head_dim"),
        ({"1": {"num_key_value_heads": 1}, "3": {"num_key_value_heads": 1}}, "where attention_k_eq_v"),
        ({"1": {"sliding_window": 3}, "3": {"sliding_window": 3}}, "per_layer_config is supported only"),
        ({"01": {"head_dim": 16}, "full": {"head_dim": 16}}, "per_layer_config is supported only"),
        ([{"head_dim": 16}], "per_layer_config is supported only"),
    ],
)
def test_a_per_layer_config_transformers_would_not_write_is_refused_in_one_line(per_layer_config, says, tmp_path):
    hf = {"model_type": "gemma4_text", "num_hidden_layers": 4, "hidden_size": 32, "num_attention_heads": 4,
          "head_dim": 8, "layer_types": ["sliding_attention", "full_attention"] * 2, "vocab_size": 100,
          "per_layer_config": per_layer_config}  # fmt: skip
    with pytest.raises(UserError, match=says):
        read_config(hf, name="g4")


def test_a_per_layer_table_shorter_than_the_vocabulary_is_refused(tmp_path):
    """transformers' Gemma 4 looks every token up in the per-layer table and fails on one past it: refused at load,
    not at the first such token."""
    hf = {"model_type": "gemma4_text", "num_hidden_layers": 2, "vocab_size": 150, "vocab_size_per_layer_input": 60,
          "hidden_size_per_layer_input": 6}  # fmt: skip
    with pytest.raises(UserError, match="vocab_size_per_layer_input=60 is below vocab_size=150"):
        read_config(hf, name="g4")
    assert read_config(hf | {"hidden_size_per_layer_input": 0}, name="g4")[0].per_layer_vocab == 60  # no table: read


def test_a_hook_on_block_0_s_input_changes_what_block_0_reads_and_not_the_per_layer_inputs(made):
    """blocks.0.hook_resid_pre is the embedding as block 0 reads it (embed.stream), after the per-layer inputs are
    made from it, as transformers makes them from inputs_embeds before the first layer: the hook was on embed_scale,
    which the per-layer projection also reads, so that a patch of it there moved them too (0.13 of a patch's share
    apart from patch's own and from TransformerLens's). The same change made by a pre-hook on transformers' first
    decoder layer gives the same logits."""
    _, ours, hf = made(NAME)
    ids = SPEC.prompt_ids(NAME, 12, seed=4)
    delta = np.random.default_rng(5).standard_normal(ours.config.n_embd).astype(np.float32)
    _, clean = ours.run_with_cache(ids, ["ple.inputs"])
    with ours.add_hook("blocks.0.hook_resid_pre", lambda x, name: x + delta):
        logits, hooked = ours.run_with_cache(ids, ["ple.inputs"], all_positions=True)
    assert np.array_equal(hooked["ple.inputs"], clean["ple.inputs"])  # made before the hook, from the embedding

    def added(module, args, kwargs):
        return (args[0] + torch.from_numpy(delta), *args[1:]), kwargs

    handle = hf.model.layers[0].register_forward_pre_hook(added, with_kwargs=True)
    try:
        with torch.no_grad():
            theirs = hf(torch.tensor([ids])).logits[0]
    finally:
        handle.remove()
    assert worst(logits, theirs) <= 1 and worst(ours.logits(ids), theirs) > 1, worst(logits, theirs)
