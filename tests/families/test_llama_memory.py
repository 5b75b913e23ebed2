"""Memory of the Llama family and in other dtypes: KV cache of Hkv heads, capped by a sliding window; bytes per number."""

from __future__ import annotations

import pytest
from shared_checks import estimated_and_measured_peak, random_llama

from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.table import PRESETS
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation
from minitransformer.verbs.memory import bytes_moved, kv_cache_bytes, memory_dict


def test_the_kv_cache_holds_the_key_value_heads_only():
    """Llama 3 8B: 8 key/value heads of 128 in 32 layers: 2 x 32 x 1,024 numbers a token, 128 KiB in bfloat16."""
    config = PRESETS["llama3-8b"]
    assert kv_cache_bytes(config, 1) == 2 * 32 * 8 * 128 * 4 == formulas.kv_cache_bytes_per_token(config) == 262_144
    assert kv_cache_bytes(config, 1, bytes_per_number=2) == 131_072 == formulas.kv_cache_bytes_per_token(config, 1, 2)
    assert kv_cache_bytes(PRESETS["llama2-7b"], 4096, bytes_per_number=2) == 2 * 32 * 4096 * 2 * 4096  # 2 GiB
    small = LlamaConfig(n_layer=2, n_head=6, n_kv_head=2, n_embd=24, head_dim=4, n_inner=10, vocab_size=20,
                        n_positions=16)  # fmt: skip
    assert random_llama(small).new_cache((3,), capacity=10).nbytes == kv_cache_bytes(small, 10, batch=3)
    assert kv_cache_bytes(small, 10, batch=3) == 3 * 2 * 2 * 2 * 4 * 10 * 4


def test_a_sliding_window_caps_the_kv_cache():
    config = PRESETS["mistral-7b"]  # window 4,096, context 32,768
    per_token = 2 * 32 * 8 * 128 * 2
    long = memory_dict(count_generation(config, 5000, 10), balance=10, dtype="bfloat16")["kv_cache"]
    assert long["positions"] == 4096 == formulas.kv_cache_positions(config, 5009)
    assert long["bytes"] == 4096 * per_token and long["bytes_at_context"] == 4096 * per_token
    short = memory_dict(count_generation(config, 100, 10), balance=10, dtype="bfloat16")["kv_cache"]
    assert short["positions"] == 109 and short["bytes"] == 109 * per_token
    unwindowed = memory_dict(count_generation(PRESETS["llama3-8b"], 5000, 10), balance=10)["kv_cache"]
    assert unwindowed["positions"] == 5009 and unwindowed["bytes_at_context"] == 8192 * 262_144


@pytest.mark.parametrize("dtype, size", [("float32", 4), ("bfloat16", 2), ("float16", 2)])
def test_every_byte_figure_follows_the_dtype(dtype, size):
    count = count_generation(PRESETS["qwen2.5-0.5b"], 300, 4, batch=2)
    m = memory_dict(count, balance=10, dtype=dtype)
    f32 = memory_dict(count, balance=10)
    assert (m["dtype"], m["bytes_per_number"]) == (dtype, size) and (f32["dtype"], f32["bytes_per_number"]) == (
        "float32", 4)  # fmt: skip
    assert m["weights"] == {"parameters": 494_032_768, "bytes": size * 494_032_768}
    for key in ("bytes_per_token", "bytes", "bytes_at_context"):
        assert m["kv_cache"][key] * 4 == f32["kv_cache"][key] * size
    assert m["kv_cache"]["bytes_per_token"] == formulas.kv_cache_bytes_per_token(count.config, 2, size)
    for phase in ("prefill", "decode"):
        assert m["activations"][phase]["bytes"] * 4 == f32["activations"][phase]["bytes"] * size
    for row, row32 in zip(m["intensity"]["ops"], f32["intensity"]["ops"]):
        record = count.prefill.find(row["op"])
        assert row["prefill"]["bytes"] == bytes_moved(record, size) == row32["prefill"]["bytes"] * size // 4
        assert row["prefill"]["macs_per_byte"] == pytest.approx(row32["prefill"]["macs_per_byte"] * 4 / size)
    decode_q = next(r for r in m["intensity"]["ops"] if r["op"] == "q")["decode"]
    assert decode_q["macs_per_byte"] == pytest.approx(2 / size, rel=0.01)  # a MAC per weight read for each sequence
    assert m["intensity"]["bytes_moved"].endswith(dtype)


@pytest.mark.parametrize("shape", [
    dict(n_head=2, n_kv_head=2, head_dim=16, n_embd=32, n_inner=128, T=512),  # the scores dominate
    dict(n_head=4, n_kv_head=2, n_embd=32, n_inner=2048, T=64),  # the gated MLP dominates
    dict(n_head=8, n_kv_head=1, n_embd=32, n_inner=100, T=300),
    dict(n_head=8, n_kv_head=2, n_embd=64, n_inner=128, sliding_window=50, T=300),
])  # fmt: skip
def test_llama_activation_estimate_is_close_to_the_measured_peak(shape):
    T = shape.pop("T")
    model = random_llama(LlamaConfig(n_layer=2, vocab_size=100, n_positions=T, **shape))
    estimate, peak = estimated_and_measured_peak(model, T)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate)
