"""Phi-3's quirks against transformers' Phi3ForCausalLM (what every family owes runs in test_conformance.py, on the
same models): LongRoPE switching its factors at the trained length, the cache crossing it, a window as far as
transformers' mask, and the fused products with their parts.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402
from family_checks import (  # noqa: E402 - after the skips above
    RELATIVE_FLOAT64,
    float64_against_truth,
    worst,
)

SHORT = [1.0, 1.1, 1.3, 1.5, 2.0, 2.5, 3.0, 4.0]
LONG = [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0]

FAMILY = "phi3"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs


def prompt(name: str, n: int, seed: int = 0) -> list[int]:
    """Random ids without 0, the pad id: transformers' generate would take a 0 in the prompt for padding."""
    return np.random.default_rng(seed).integers(1, CONFIGS[name]["vocab_size"], n).tolist()


def test_longrope_switches_factors_at_the_trained_length_and_scales_by_the_attention_factor(made):
    directory, ours, hf = made("longrope-mqa")
    config = ours.config
    assert config.original_max_position_embeddings == 100
    # float64 against the truth with the short factors too (the 150 tokens above took the long ones)
    assert float64_against_truth(directory, prompt("longrope-mqa", 60)) <= RELATIVE_FLOAT64
    assert config.attention_factor == pytest.approx(np.sqrt(1 + np.log(4) / np.log(100)))  # 400 / 100, as the paper
    # transformers' own tables: short up to 100 positions, long past them
    for T, kind in ((100, "short_factor"), (101, "long_factor")):
        positions = torch.arange(T)[None]
        cos, _ = hf.model.rotary_emb(torch.zeros(1, T, config.d_head), positions)
        factors = np.array(dict(config.rope_scaling)[kind])
        inv_freq = 1 / (factors * config.rope_theta ** (np.arange(0, config.d_head, 2) / config.d_head))
        angles = np.arange(T)[:, None] * inv_freq
        expected = np.cos(np.concatenate([angles, angles], -1)) * config.attention_factor
        assert np.abs(cos[0].numpy() - expected).max() < 1e-4, kind
    # a 100-token prompt and the same prompt plus one token differ at earlier positions only because the factors did
    ids = prompt("longrope-mqa", 101)
    assert np.abs(ours.logits(ids[:100])[1:] - ours.logits(ids)[1:100]).max() > 1e-3


def test_crossing_the_trained_length_with_the_cache_equals_transformers_forward_with_its_cache(made):
    """A pass takes the factors of its own largest position, as transformers' forward does: cached keys keep the
    short factors they were turned with. (transformers' generate instead recomputes the whole sequence without its
    cache at the step that first crosses original_max_position_embeddings, Phi3ForCausalLM's
    prepare_inputs_for_generation; our generate keeps its cache, so its tokens past that step may differ.)"""
    _, ours, hf = made("longrope-mqa")
    ids = prompt("longrope-mqa", 110, seed=2)
    kv = ours.new_cache()
    mine = [ours.run(ids[:95], cache=kv, all_positions=True)]
    mine += [ours.run(ids[i : i + 1], cache=kv, all_positions=True) for i in range(95, 110)]
    cache = transformers.DynamicCache(config=hf.config)
    with torch.no_grad():
        theirs = [hf(torch.tensor([ids[:95]]), cache=cache, use_cache=True).logits[0]]
        theirs += [hf(torch.tensor([ids[i : i + 1]]), cache=cache, use_cache=True).logits[0] for i in range(95, 110)]
    assert worst(np.concatenate(mine), torch.cat(theirs)) <= 1
    recomputed = ours.logits(ids)  # every position with the long factors
    assert np.abs(recomputed[100:] - np.concatenate(mine)[100:]).max() > 1e-3


@pytest.mark.parametrize("name", ["longrope-mqa", "longrope-partial-window"])
def test_a_left_padded_row_takes_the_factors_of_its_own_length_as_its_prompt_alone(made, name):
    """A batch's rows each take LongRoPE's factors by their own largest position: a short row beside one past
    original_max_position_embeddings keeps the short ones, so its greedy answer is its prompt's alone (transformers'
    batch turns every row by the batch's largest position: its short rows' answers there are not their own)."""
    _, ours, _ = made(name)
    original = ours.config.original_max_position_embeddings
    rows = [prompt(name, n, seed=10 + n) for n in (original + 50, 5, original - 30)]  # past it, short, near it
    batch = ours.generate(rows, max_new_tokens=6, temperature=0.0, stop_at_eos=False)
    for row, got in zip(rows, batch):
        alone = ours.generate(row, max_new_tokens=6, temperature=0.0, stop_at_eos=False)
        assert got.new_tokens == alone.new_tokens, (len(row), got.new_tokens, alone.new_tokens)


def test_a_window_reaches_as_far_as_transformers_mask(made):
    _, ours, hf = made("partial-window-tied")
    W = ours.config.sliding_window
    ids = prompt("partial-window-tied", 20)
    _, cache = ours.run_with_cache(ids, names="blocks.0.attn.weights")
    weights = cache["blocks.0.attn.weights"]
    with torch.no_grad():
        theirs = hf(torch.tensor([ids]), output_attentions=True).attentions[0][0].numpy()
    assert (weights[:, -1, -W:] > 0).all() and not weights[:, -1, :-W].any()  # W keys, itself included
    assert np.abs(weights - theirs).max() < 1e-5


SUBMODULES = {"self_attn.qkv_proj": "attn.qkv", "self_attn.o_proj": "attn.out", "mlp.gate_up_proj": "mlp.gate_up",
              "mlp.down_proj": "mlp.down", "input_layernorm": "ln_1", "": "resid_post"}  # fmt: skip


@pytest.mark.parametrize("name", ["gqa", "longrope-partial-window"])
def test_the_fused_products_and_their_parts_equal_transformers_modules(name, made):
    _, ours, hf = made(name)
    config = ours.config
    ids = prompt(name, 24, seed=5)
    seen: dict[str, np.ndarray] = {}
    handles = []
    for i, layer in enumerate(hf.model.layers):
        for theirs, mine in SUBMODULES.items():
            module = layer.get_submodule(theirs) if theirs else layer

            def hook(module, args, out, key=f"blocks.{i}.{mine}"):
                seen[key] = (out[0] if isinstance(out, tuple) else out)[0].numpy()

            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = ours.run_with_cache(ids)
    assert len(seen) == len(SUBMODULES) * config.n_layer
    scale = max(1.0, max(float(np.abs(v).max()) for v in seen.values()))
    for key, theirs in seen.items():
        assert np.abs(cache[key] - theirs).max() <= 1e-5 * scale, key
    H, Hkv, dh, F, rd = config.n_head, config.n_kv_head, config.d_head, config.d_ff, config.rotary_dim
    for i in range(config.n_layer):
        qkv, gu = cache[f"blocks.{i}.attn.qkv"], cache[f"blocks.{i}.mlp.gate_up"]  # ours, cut apart exactly
        T = len(ids)
        # q, k, v: the first H dh columns, the next Hkv dh, the last Hkv dh, in heads
        for part, (start, heads) in {"q": (0, H), "k": (H * dh, Hkv), "v": ((H + Hkv) * dh, Hkv)}.items():
            expected = qkv[:, start : start + heads * dh].reshape(T, heads, dh).transpose(1, 0, 2)
            assert np.array_equal(cache[f"blocks.{i}.attn.{part}"], expected), part
        # gate first, as transformers' chunk(2): the gate, through the activation, is what mlp.act holds
        assert np.array_equal(cache[f"blocks.{i}.mlp.gate"], gu[:, :F])
        assert np.array_equal(cache[f"blocks.{i}.mlp.up"], gu[:, F:])
        # RoPE turns the first rd numbers of each head and leaves the rest
        for part in "qk":
            before, after = cache[f"blocks.{i}.attn.{part}"], cache[f"blocks.{i}.attn.{part}_rot"]
            assert np.array_equal(before[..., rd:], after[..., rd:])
            assert np.abs(before[..., 1:, :rd] - after[..., 1:, :rd]).max() > 1e-2


def test_one_record_for_each_fused_product(made):
    _, ours, _ = made("gqa")
    generation = ours.generate(prompt("gqa", 12), max_new_tokens=2, stop_at_eos=False)
    prefill = generation.ledger.phases[0]
    ops = [r.op for r in prefill.records if r.layer == 0 and r.kind == "matmul"]
    assert ops == ["qkv", "scores", "mix", "out", "mlp.gate_up", "mlp.down"]
    qkv = next(r for r in prefill.records if r.op == "qkv")
    config = ours.config
    assert qkv.out_shape == (12, (config.n_head + 2 * config.n_kv_head) * config.d_head)
