"""The engine's promises, for the Llama family: float32 throughout, every product counted as computed, the KV
cache preallocated, shape-only runs that count what real runs do, and named stages that hold what their
equations say and can be replaced by hooks."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from shared_checks import Float64Alarm

import minitransformer.engine.hooks
from conftest import hf_llama_fixture_dirs, with_weights_viewed_as
from minitransformer import load_model
from minitransformer.engine.ledger import Phase
from minitransformer.engine.ops import attention_bias, rotary_tables
from minitransformer.families.rotary import inverse_frequencies
from minitransformer.models.model import Model
from minitransformer.verbs.count import count_passes

FIXTURES = {d.name: d for d in hf_llama_fixture_dirs()}


@pytest.fixture(scope="module")
def models():
    return {name: load_model(directory) for name, directory in FIXTURES.items()}


@pytest.mark.parametrize("name", ["llama_gqa_bias", "llama3_mqa_tied", "llama_linear_fp16", "mistral_window",
                                  "qwen2_bias_bf16"])  # fmt: skip
def test_no_float64_anywhere_in_a_llama_forward_pass(name, models):
    model = with_weights_viewed_as(models[name], Float64Alarm)
    c = model.config
    assert inverse_frequencies(c.rope(), np.float32).dtype == np.float32
    cos, sin = rotary_tables(np.arange(5, 9), inverse_frequencies(c.rope(), np.float32))
    assert cos.dtype == sin.dtype == attention_bias(5, 0, 4, 9, c.sliding_window, np.float32).dtype == np.float32
    seen = []
    watch = lambda name, value, record: seen.append((name, value.dtype)) or value  # noqa: E731
    logits = model.run(np.arange(20) % c.vocab_size, all_positions=True, watcher=watch)
    assert logits.dtype == np.float32 and isinstance(logits, Float64Alarm)
    assert len(seen) == len(model.stage_table.stage_names(c.n_layer)) - 1  # all but `last`
    assert all(dtype == np.float32 for _, dtype in seen), [n for n, d in seen if d != np.float32]
    cache = model.new_cache()
    model.run(np.arange(7), cache=cache, watcher=watch)
    for token in range(12):  # decode steps, past a sliding window where there is one
        assert model.run([token], cache=cache, watcher=watch).dtype == np.float32
    assert all(dtype == np.float32 for _, dtype in seen)
    assert len(model.generate([1, 2, 3], max_new_tokens=3, stop_at_eos=False).new_tokens) == 3


def closed_forms(c, T: int, past: int, R: int) -> dict[str, tuple[int, int]]:
    """(dot products, their length) of each matrix product of one block and the unembedding, by hand."""
    W = c.sliding_window
    t = past + T - (0 if W is None else max(0, past - W + 1))  # the rows the cache hands back
    H, Hkv, dh, D, F, V = c.n_head, c.n_kv_head, c.d_head, c.n_embd, c.d_ff, c.vocab_size
    return {"q": (T * H * dh, D), "k": (T * Hkv * dh, D), "v": (T * Hkv * dh, D), "scores": (H * T * t, dh),
            "mix": (H * T * dh, t), "out": (T * D, H * dh), "mlp.gate": (T * F, D), "mlp.up": (T * F, D),
            "mlp.down": (T * D, F), "logits": (R * V, D)}  # fmt: skip


@pytest.mark.parametrize("name", FIXTURES)
def test_every_product_is_counted_as_computed_and_a_block_is_mapped_in_order(name, models):
    model = models[name]
    c, family = model.config, model.stage_table
    cache = model.new_cache()
    passes = [(12, 0), (1, 12), (1, 13)] + [(1, 14 + k) for k in range(10)]  # prefill, then decode steps
    for T, past in passes:
        phase = Phase("decode" if past else "prefill", 0, T, past + T)
        model.run(np.arange(T) % c.vocab_size, cache=cache, phase=phase)
        assert [r.op for r in phase.records] == ["embed", *family.block_ops * c.n_layer, "ln_f", "last", "logits"]
        expected = closed_forms(c, T, past, R=1)
        for r in phase.records:
            assert (r.dot_products > 0) == (r.op in family.matmul_ops), r.op
            if r.op in expected:
                assert (r.dot_products, r.dot_length) == expected[r.op], (name, T, past, r.name)
        scores = phase.find("scores", 0)
        start = past + T - scores.out_shape[-1]  # the first key position the queries attend to
        visible = attention_bias(past, start, T, scores.out_shape[-1], c.sliding_window, np.float32) == 0
        assert scores.causal_dot_products == c.n_head * int(visible.sum())  # the mask's count, not a formula's
        per_block = sum(n * length for n, length in expected.values()) - expected["logits"][0] * c.n_embd
        assert phase.macs == c.n_layer * per_block + c.vocab_size * c.n_embd
    if c.sliding_window:  # decode steps past the window attend to the window only
        assert phase.find("scores", 0).out_shape[-1] == c.sliding_window


@pytest.mark.parametrize("name", FIXTURES)
def test_a_shape_only_llama_records_what_a_real_run_records(name, models):
    real = models[name]
    counted = Model.without_weights(real.config)
    assert counted.shape_only and counted.stage_table == real.stage_table
    for batch in ((), (3,)):
        caches = [m.new_cache(batch) for m in (real, counted)]
        for T in (9, 4, 1, 1, 1, 1, 1, 1, 1, 1):  # a prefill, a chunk, then decode steps (past any window)
            ids = np.zeros((*batch, T), dtype=np.int64)
            phases = [Phase("p", 0, T, 0), Phase("p", 0, T, 0)]
            for model, cache, phase in zip((real, counted), caches, phases):
                model.run(ids, cache=cache, phase=phase, all_positions=T > 1)
            assert phases[0].records == phases[1].records and phases[0].macs == phases[1].macs > 0
    ledgers = [count_passes(m, 11, 20, use_cache=cached) for m in (real, counted) for cached in (True, False)]
    assert ledgers[0].to_dict() == ledgers[2].to_dict() and ledgers[1].to_dict() == ledgers[3].to_dict()
    assert ledgers[0].totals.macs < ledgers[1].totals.macs  # the cache saves work


def test_the_kv_cache_is_preallocated_with_key_value_heads_only_and_written_in_place(models):
    model = models["llama_gqa_bias"]
    c = model.config
    cache = model.new_cache(capacity=20)
    keys = [id(k) for k in cache.keys]
    assert cache.keys[0].shape == (c.n_kv_head, 20, c.d_head) == (2, 20, 12)  # 2 KV heads, not 8 query heads
    assert cache.nbytes == 2 * c.n_layer * c.n_kv_head * 20 * c.d_head * 4
    _, prefill = model.run_with_cache(np.arange(6), names="blocks.1.attn.k_rot", kv_cache=cache)
    model.run([7], cache=cache)
    assert [id(k) for k in cache.keys] == keys and cache.length == 7
    assert np.array_equal(cache.keys[1][:, :6], prefill["blocks.1.attn.k_rot"])

    mistral = models["mistral_window"]
    W = mistral.config.sliding_window
    cache = mistral.new_cache(capacity=30)
    mistral.run(np.arange(20), cache=cache)
    shapes = []
    with mistral.add_hook("blocks.*.attn.keys", lambda t, n: shapes.append(t.shape)):
        mistral.run([3], cache=cache)
    assert cache.length == 21 and shapes == [(mistral.config.n_kv_head, W, mistral.config.d_head)] * 2


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1 + np.exp(-x))


@pytest.mark.parametrize("name", ["llama_gqa_bias", "mistral_window", "qwen2_bias_bf16"])
def test_captures_have_the_documented_names_and_hold_what_the_equations_say(name, models):
    model = models[name]
    c, p = model.config, model.params
    T, H, Hkv, dh, D, F = 10, c.n_head, c.n_kv_head, c.d_head, c.n_embd, c.d_ff
    G = H // Hkv
    ids = np.arange(T) * 7 % c.vocab_size
    logits, cache = model.run_with_cache(ids)
    assert list(cache) == [n for n in model.stage_table.stage_names(c.n_layer) if n != "last"]
    # Every Llama name the hooks module documents exists, in every block.
    documented = re.findall(r"`((?:attn|mlp)\.\w+)`", minitransformer.engine.hooks.__doc__)
    assert {"attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.q_rot", "attn.k_rot", "mlp.gate", "mlp.mul"} <= set(
        documented)  # fmt: skip
    for i in range(c.n_layer):
        assert {f"blocks.{i}.{n}" for n in documented} <= set(cache), set(documented) - set(cache)
    shapes = {
        "attn.q_proj": (T, H * dh),
        "attn.k_proj": (T, Hkv * dh),
        "attn.q": (H, T, dh),
        "attn.k": (Hkv, T, dh),
        "attn.q_rot": (H, T, dh),
        "attn.keys": (Hkv, T, dh),
        "attn.qk": (Hkv, G, T, T),
        "attn.scaled": (H, T, T),
        "attn.weights": (H, T, T),
        "attn.mix": (Hkv, G, T, dh),
        "attn.z": (T, H * dh),
        "attn.out": (T, D),
        "mlp.gate": (T, F),
        "mlp.mul": (T, F),
        "resid_post": (T, D),
    }
    assert {k: cache[f"blocks.1.{k}"].shape for k in shapes} == shapes  # fmt: skip

    b, a = p.layers[0], p.layers[0].self_attn
    close = lambda x, y: np.allclose(x, y, rtol=1e-5, atol=1e-5)  # noqa: E731
    x = cache["embed"]
    assert np.array_equal(x, p.embed_tokens.weight[ids])
    assert close(cache["blocks.0.ln_1"], rms(x, b.input_layernorm.weight, c.norm_eps))
    q = cache["blocks.0.ln_1"] @ a.q_proj.weight.T + (a.q_proj.bias if c.qkv_bias else 0)
    assert close(cache["blocks.0.attn.q_proj"], q)
    assert close(cache["blocks.0.attn.q"], q.reshape(T, H, dh).transpose(1, 0, 2))
    # RoPE turns each pair (i, i + dh/2): lengths kept, position 0 not turned at all.
    pair_norm = lambda v: np.hypot(v[..., : dh // 2], v[..., dh // 2 :])  # noqa: E731
    assert close(pair_norm(cache["blocks.0.attn.q_rot"]), pair_norm(cache["blocks.0.attn.q"]))
    assert np.array_equal(cache["blocks.0.attn.k_rot"][:, 0], cache["blocks.0.attn.k"][:, 0])
    assert np.array_equal(cache["blocks.0.attn.keys"], cache["blocks.0.attn.k_rot"])
    assert close(cache["blocks.0.attn.scaled"], cache["blocks.0.attn.qk"].reshape(H, T, T) / np.sqrt(dh))
    weights = cache["blocks.0.attn.weights"]
    visible = attention_bias(0, 0, T, T, c.sliding_window, np.float32) == 0
    assert close(weights.sum(-1), 1) and not weights[:, ~visible].any() and (weights[:, visible] > 0).all()
    assert close(cache["blocks.0.mlp.act"], silu(cache["blocks.0.mlp.gate"]))
    assert close(cache["blocks.0.mlp.mul"], cache["blocks.0.mlp.act"] * cache["blocks.0.mlp.up"])
    assert np.array_equal(cache["blocks.0.resid_mid"], x + cache["blocks.0.attn.out"])
    assert np.array_equal(cache["blocks.0.resid_post"], cache["blocks.0.resid_mid"] + cache["blocks.0.mlp.down"])
    unembedding = p.embed_tokens.weight if c.tie_word_embeddings else p.lm_head.weight
    assert close(logits, cache["ln_f"] @ unembedding.T)


def zeroed(tmp_path, name: str, tensor: str):
    """A copy of a fixture with one tensor set to zero in its checkpoint."""
    directory = tmp_path / name
    shutil.copytree(FIXTURES[name], directory)
    for file in directory.glob("*.safetensors"):
        tensors = load_file(str(file))
        if tensor in tensors:
            tensors[tensor] = np.zeros_like(tensors[tensor])
            save_file(tensors, str(file), metadata={"format": "pt"})
            return load_model(directory)
    raise AssertionError(f"{tensor} is in no shard of {name}")


def test_hooks_that_replace_a_stage_act_as_the_weights_that_would_make_it(models, tmp_path):
    model = models["llama_gqa_bias"]  # biases everywhere: zeroing a weight leaves its bias
    ids = np.arange(12) * 5 % model.config.vocab_size
    original = model.logits(ids)
    # Zeroing what enters W_down leaves its bias: as if W_down were zero.
    without_mlp_0 = zeroed(tmp_path / "a", "llama_gqa_bias", "model.layers.0.mlp.down_proj.weight")
    with model.add_hook("blocks.0.mlp.mul", lambda t, n: np.zeros_like(t)):
        hooked = model.logits(ids)
        generated = model.generate(ids.tolist(), max_new_tokens=5, stop_at_eos=False).new_tokens
    assert np.array_equal(hooked, without_mlp_0.logits(ids)) and np.abs(hooked - original).max() > 0.1
    assert generated == without_mlp_0.generate(ids.tolist(), max_new_tokens=5, stop_at_eos=False).new_tokens

    # Zero keys of the group read by query heads 4-7 (KV head 1): their scores are 0, their weights uniform.
    def zero_kv_head_1(k, name):
        k = k.copy()
        k[1] = 0
        return k

    with model.add_hook("blocks.1.attn.k_rot", zero_kv_head_1):
        _, cache = model.run_with_cache(ids, names=["blocks.1.attn.weights", "blocks.1.attn.qk"])
    weights = cache["blocks.1.attn.weights"]
    assert not cache["blocks.1.attn.qk"][1].any() and cache["blocks.1.attn.qk"][0].any()
    uniform = np.tril(np.ones((12, 12))) / np.arange(1, 13)[:, None]
    assert np.allclose(weights[4:], uniform, atol=1e-7) and not np.allclose(weights[0], uniform, atol=1e-3)
    # The unembedding has no bias: doubling the final norm doubles the logits.
    with model.add_hook("ln_f", lambda t, n: t * np.float32(2)):
        assert np.allclose(model.logits(ids), 2 * original, rtol=1e-5, atol=1e-6)
    assert np.array_equal(model.logits(ids), original) and len(model.hooks) == 0


def test_a_llama3_rope_without_a_band_between_computes_without_a_word():
    """high_freq_factor = low_freq_factor (Llama 4 Scout's): every wavelength is long or short, the blend of the band
    between is never chosen; its inf - inf was computed outside the errstate and warned of an invalid value (the CLI
    said "a NaN or infinite weight")."""
    import warnings

    from minitransformer.families.rotary import Rope

    scaling = dict(rope_type="llama3", factor=16.0, low_freq_factor=1.0, high_freq_factor=1.0,
                   original_max_position_embeddings=64)  # fmt: skip
    rope = Rope(64, 500000.0, tuple(sorted(scaling.items())), 256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = inverse_frequencies(rope, np.float32)
    plain = inverse_frequencies(Rope(64, 500000.0), np.float32)
    long = 2 * np.pi / plain > 64  # wavelengths past the original context: slowed by the factor, the others kept
    assert long.any() and not long.all(), long
    np.testing.assert_allclose(scaled, np.where(long, plain / 16, plain), rtol=1e-6)
