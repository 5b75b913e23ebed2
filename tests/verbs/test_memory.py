"""Memory beside the counts: KV-cache and weight bytes, the activation estimate against a measured peak, intensity."""

from __future__ import annotations

import dataclasses

import pytest
from shared_checks import estimated_and_measured_decode_peak, estimated_and_measured_peak, random_model

from minitransformer.engine.ops import ACTIVATIONS
from minitransformer.families.table import PRESETS
from minitransformer.models.model import Model
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation
from minitransformer.verbs.memory import bytes_moved, intensity, kv_cache_bytes, memory_dict


def test_kv_cache_bytes_are_the_engines_cache():
    gpt2 = PRESETS["gpt2"]
    assert kv_cache_bytes(gpt2, 1) == 2 * 12 * 768 * 4 == formulas.kv_cache_bytes_per_token(gpt2) == 73_728
    assert kv_cache_bytes(PRESETS["gpt3-175b"], 2048) == 2 * 96 * 12288 * 4 * 2048  # 9.4 MB a token, 19 GB full
    real = random_model(n_layer=2, n_head=2, d_head=4, n_inner=None, vocab=20, n_positions=16)
    assert real.new_cache((3,), capacity=10).nbytes == kv_cache_bytes(real.config, 10, batch=3)


def test_memory_section_of_a_count():
    count = count_generation(PRESETS["gpt2"], 100, 20, batch=2)
    m = memory_dict(count, balance=10)
    assert m["weights"] == {"parameters": 124_439_808, "bytes": 4 * 124_439_808}
    kv = m["kv_cache"]
    assert kv["positions"] == 119 and kv["bytes"] == 119 * 2 * 73_728 and kv["bytes_at_context"] == 1024 * 2 * 73_728
    assert m["activations"]["prefill"]["stage"] == "mlp.act"  # 2 T F > T D + H T t (Q and the scores) at T = t = 100
    assert m["activations"]["decode"]["context"] == 119


def test_decode_products_are_memory_bound_and_big_prefills_are_not():
    """Intensity = MACs / 4 (|A| + |B| + |out|): a weight read for one row is ~1/4 MAC a byte; T rows make it ~T/4."""
    count = count_generation(PRESETS["gpt2-xl"], 1000, 2)
    rows = {r["op"]: r for r in memory_dict(count, balance=10)["intensity"]["ops"]}
    D, T = 1600, 1000
    qkv = count.prefill.find("qkv")
    assert bytes_moved(qkv) == 4 * (T * D + D * 3 * D + T * 3 * D)
    assert intensity(qkv) == pytest.approx(T * D * 3 * D / (4 * (T * D + 3 * D * D + 3 * T * D)))
    for op in ("qkv", "out", "mlp.up", "mlp.down"):
        decode = rows[op]["decode"]
        assert decode["macs_per_byte"] == pytest.approx(0.25, rel=0.01) and decode["memory_bound"]
        assert rows[op]["prefill"]["macs_per_byte"] > 100 and not rows[op]["prefill"]["memory_bound"]
    assert rows["logits"]["prefill"]["memory_bound"]  # one row of logits even in the prefill
    assert rows["scores"]["decode"]["memory_bound"]


@pytest.mark.parametrize("shape", [
    dict(n_head=2, d_head=16, n_inner=128, T=512),  # attention scores dominate
    dict(n_head=4, d_head=8, n_inner=2048, T=64),  # the MLP dominates
    dict(n_head=8, d_head=4, n_inner=None, T=300),
])  # fmt: skip
def test_activation_estimate_is_close_to_the_measured_peak(shape):
    T = shape.pop("T")
    model = random_model(n_layer=2, **shape, vocab=100, n_positions=T)
    estimate, peak = estimated_and_measured_peak(model, T)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_every_activation_holds_its_input_and_output_and_no_more(activation):
    """The estimate holds an activation stage to its input and output (working_set): exact GELU's erf fit kept six
    [T, F] temporaries alive (4.5x the estimate), FastGELU's and QuickGELU's two or three; each now runs in place in
    blocks of rows."""
    model = random_model(n_layer=2, n_head=4, d_head=8, n_inner=4096, vocab=100, n_positions=512)
    model = Model(dataclasses.replace(model.config, activation_function=activation), model.params, source="memory")
    estimate, peak = estimated_and_measured_peak(model, 512)  # [T, F] 8 MB, beside each core's blocks (~0.8 MB)
    assert 0.9 * estimate <= peak <= 1.25 * estimate, (peak, estimate, round(peak / estimate, 2))


def test_the_count_report_describes_the_activation_estimate_it_prints():
    """Attention-heavy prefill: the peak is Q K^T, and the text says what the number counts (softmax works in place)."""
    from minitransformer.families.gpt2.config import GPT2Config
    from minitransformer.views.count_report import count_report

    B, T, D, H = 2, 1000, 64, 16
    count = count_generation(GPT2Config(n_layer=1, n_head=H, n_embd=D, vocab_size=1000), T, 1, batch=B)
    peak = memory_dict(count, balance=10)["activations"]["prefill"]
    # In row chunks of 128 (row_chunks.ROW_CHUNK): the largest chunk is rows 768..895, which see 896 keys; alive
    # beside it the normed input, qkv and the output [B, H, T, dh], and all along the pass's mask [T, t].
    residual, mask, h, qkv, chunk, z = B * T * D, T * T, B * T * D, B * T * 3 * D, B * H * 128 * 896, B * T * D
    alive = residual + mask + h + qkv + chunk + z
    assert peak == {"bytes": 4 * alive, "stage": "scores"}
    text = " ".join(count_report(count, 10).split())
    assert f"peak ~{4 * alive / 1e6:.1f} MB in the prefill (at scores)" in text
    assert "a prefill past 128 positions computes attention in row chunks" in text
    assert ("the residual stream [B, T, D] and the mask [T, t] + the largest stage's working set (Q K^T: Q and the "
            "scores [B, H, T, t], "
            "which scale, mask and softmax overwrite in place;") in text  # fmt: skip


@pytest.mark.parametrize("family, name", [
    ("gpt_oss", "e6_k3_full_yarn_truncated"),  # sinks: the scores with a sink column, a chunk at a time
    ("llama4_text", "chunks-nope-temperature-alternating"),  # a chunked layer first, a full NoPE layer after it
    ("qwen3", "layer-types"),  # a sliding layer first, full ones after it
])  # fmt: skip
def test_the_estimate_of_a_prefill_in_row_chunks_reads_every_layer(tmp_path_factory, family, name):
    """Past 128 positions attention runs in row chunks; the estimate read the first attending layer's chunk alone
    (Llama 4's full layer after a chunked one: 1.4x the estimate), and took gpt-oss's sinks, a chunk's stage, for a
    whole [H, T, t + 1] (gpt-oss-20b at 2,000 tokens: 2.10 GB where 424 MB): each layer's chunk now, sinks beside."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    from conformance_configs import made

    _, model, _ = made(tmp_path_factory, family, name)
    estimate, peak = estimated_and_measured_peak(model, 250)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate, round(peak / estimate, 2))


def test_a_view_of_the_cache_holds_no_copy_of_it():
    """A stage of kind "cache" is a view of the cache's rows whatever its name: Gemma 4's shared keys, an indexer's
    keys, a compressor's entries were counted twice, so that a decode step of gemma-4-e2b at 8,000 positions peaked
    "at shared_kv" (32.8 MB, where its largest tensor is 256 KB)."""

    count = count_generation(PRESETS["gemma-4-e2b"], 8000, 2)
    decode = memory_dict(count, 10.0)["activations"]["decode"]
    assert decode["stage"] != "shared_kv" and decode["bytes"] < 4_000_000, decode
    from math import prod

    from minitransformer.verbs.memory import working_set

    # the same kind of stage that copies (DeepSeek-V4's gathered entries, its compressors' windows) holds its copy
    v4 = count_generation(PRESETS["deepseek-v4-flash"], 1000, 2).prefill.block_records
    copies = [r for r in v4 if r.op == "gather" or r.op.endswith(".windows")]
    assert copies and all(working_set(r) == 2 * prod(r.out_shape) > 0 for r in copies), [r.op for r in copies]
    views = [r for r in v4 if r.kind == "cache" and r not in copies]
    assert views and all(working_set(r) == 0 for r in views), [r.op for r in views]


def test_deepseek_v4_gathers_its_chosen_entries_a_chunk_of_rows_at_a_time(tmp_path):
    """A 4:1 layer's chosen entries [T, kc, dh] were gathered for the whole pass before the row chunks, which the
    estimate (a gather: a chunk's stage) did not hold: 1.6x the estimate here, 4.19 GB beside it for deepseek-v4-flash
    at 4,000 tokens. Each chunk gathers its own rows now."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    from conformance_configs import FAMILIES
    from family_checks import save_random

    from minitransformer import load_model

    spec = FAMILIES["deepseek_v4"]
    config = spec.hf_config("every-kind")  # a 4:1 layer: 225 entries at 900 positions, 192 of them chosen
    config.index_topk, config.head_dim, config.max_position_embeddings = 192, 64, 1024
    save_random(tmp_path, config, seed=3, spread=spec.spread)
    estimate, peak = estimated_and_measured_peak(load_model(tmp_path), 900)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate, round(peak / estimate, 2))


@pytest.mark.parametrize("family, name", [
    ("mamba2", "groups"),  # Mamba-2's scan in chunks (SSD) alone: 2.26x the estimate
    ("nemotron_h", "latent_groups"),  # SSD layers beside attention and experts: 2.17x
    ("bamba", "attention-between"),  # SSD, then an attention layer: 1.76x
    ("granitemoehybrid", "moe-rope-multipliers"),  # 1.77x
    ("kimi_linear", "types-lora-head"),  # KDA's delta rule, a decay a key channel: 1.58x
    ("qwen3_next", "step2-interval2-bias-tied"),  # Gated DeltaNet's delta rule: 1.61x
    ("mamba", "intermediate-given"),  # Mamba-1's scan position after position: 2.75x
    ("falcon_mamba", "biases-eps-untied"),  # the same with dt, B and C normed: 1.84x
    ("jamba", "every-kind-auto-rank"),  # Mamba-1 layers beside attention and experts: 1.92x
    ("minimax", "one-block"),  # lightning attention's 250 positions in one block: 2.30x, now 1.00x
    ("falcon_h1", "multipliers-gated-norm"),  # SSD beside attention in each layer: 1.18x
    ("lfm2", "layer-types-kernel4-untied"),  # short convs beside attention: 1.21x
])  # fmt: skip
def test_a_scan_holds_the_arrays_its_layer_made_before_its_first_product(tmp_path, family, name):
    """A scan in chunks reads the chunked copies of its inputs and their decays to its last chunk, and the mixer
    keeps its projections for the gate and the skip after it: the estimate held one stage's working set (250
    positions: 1.6x to 2.3x the estimate), now the layer's arrays made before the scan's first product beside the
    scan's largest stage. SSD kept every chunk's [L, L] decays, scores and weights to its end, and the delta rule's
    pairwise decays (KDA's [C, C, dk], its largest array) were made three times over: both now once, bit for bit.
    Mamba-1's scan runs position after position over the prompt, and holds as much: its decays exp(Δ A) [T, I, N],
    made before its first product, beside its x_dt ⊗ B and its states, three of that size (1.8x to 2.8x). Lightning
    attention made each block's [H, b, b] decays from [H, b, b] float64 exponents, twice its scores (MiniMax's one
    block of 250 positions: 2.3x): they are a view of each head's 2 b - 1 decays now, bit for bit."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    from conformance_configs import FAMILIES
    from family_checks import save_random

    from minitransformer import load_model

    spec = FAMILIES[family]
    save_random(tmp_path, spec.hf_config(name), seed=spec.configs[name]["seed"], spread=spec.spread)
    estimate, peak = estimated_and_measured_peak(load_model(tmp_path), 250)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (
        f"{family} {name}: measured peak {peak:,} bytes, estimate {estimate:,}: {peak / estimate:.2f}x"
    )


@pytest.mark.parametrize("family, name, wider", [
    # the delta rule's state [Hv, dk, dv] decayed, its write and its update: 1.54x the estimate, now 1.01x
    ("qwen3_next", "grouped-dense-layer-yarn", dict(linear_num_key_heads=4, linear_num_value_heads=8,
                                               linear_key_head_dim=128, linear_value_head_dim=128)),
    # Mamba-1's exp(Δ A), x_dt ⊗ B and the state [I, N]: 1.60x, now 1.04x
    ("mamba", "tied-auto-rank", dict(intermediate_size=512, state_size=64)),
])  # fmt: skip
def test_a_decode_step_holds_the_arrays_its_scan_made_before_its_first_product(tmp_path, family, name, wider):
    """A decode step is a scan of one position, and its layer holds what it made before the scan's first product as
    a prompt's does: the estimate held the largest stage alone, one state-sized array short (the states made wide
    enough, 512 KB and 128 KB, to stand out from the step's other arrays)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    from conformance_configs import FAMILIES
    from family_checks import save_random

    from minitransformer import load_model

    spec = FAMILIES[family]
    config = spec.hf_config(name)
    for key, value in wider.items():
        setattr(config, key, value)
    save_random(tmp_path, config, seed=spec.configs[name]["seed"], spread=spec.spread)
    estimate, peak = estimated_and_measured_decode_peak(load_model(tmp_path), 20)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (
        f"{family} {name}: a decode step's measured peak {peak:,} bytes, estimate {estimate:,}: {peak / estimate:.2f}x"
    )
