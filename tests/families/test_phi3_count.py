"""The Phi-3 family counted without torch: count from shapes = a real run = the closed form on random configs, the
fused products as one record each, the activation estimate against tracemalloc's peak, and the commands on a
Phi-3 directory (generate, count, trace; bad input refused in one line)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_checks import estimated_and_measured_peak

from conftest import run_cli
from minitransformer.families.phi3.config import PRESETS, Phi3Config
from minitransformer.families.phi3.family import ARCHITECTURE
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes


def random_phi3(config: Phi3Config, seed: int = 0) -> Model:
    """A Phi-3 model with random float32 weights of the shapes its checkpoint would have."""
    rng = np.random.default_rng(seed)
    tensors = {
        name: (rng.standard_normal(shape) * 0.2).astype(np.float32)
        for name, shape in ARCHITECTURE.layout.shapes(config).items()
    }
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


phi3_configs = st.builds(
    lambda L, Hkv, G, dh, F, V, tied, window, quarters: Phi3Config(
        n_layer=L, n_head=Hkv * G, n_kv_head=Hkv, n_embd=Hkv * G * dh, n_inner=F, vocab_size=V,
        tie_word_embeddings=tied, sliding_window=window, partial_rotary_factor=quarters / 4, n_positions=64,
        name="random"),
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from([8, 16]), st.integers(1, 30),
    st.integers(2, 50), st.booleans(), st.one_of(st.none(), st.integers(1, 6)), st.sampled_from([1, 2, 4]),
)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(phi3_configs, st.integers(1, 20), st.integers(1, 5))
def test_count_equals_a_real_run_and_the_closed_form(config, n_prompt, n_new):
    model = random_phi3(config)
    counted = count_generation(config, n_prompt, n_new)
    real = count_passes(model, n_prompt, n_new)
    assert [p.expand().records for p in counted.passes] == [p.records for p in real.phases]
    assert counted.totals.macs == real.totals.macs == formulas.generation_macs(config, n_prompt, n_new)


def test_phi_3_mini_prefill_of_100_tokens_in_closed_form():
    config = PRESETS["phi-3-mini"]
    counted = count_generation(config, 100, 1)
    D, F, V, L, T = 3072, 8192, 32064, 32, 100
    weights = T * (3 * D * D + D * D + 2 * D * F + F * D)  # qkv, out, gate_up, down
    attention = 2 * T * T * D  # scores and mix, dense over the 100 x 100 (inside the window of 2,047)
    assert counted.totals.macs == L * (weights + attention) + D * V
    block = [r for r in counted.prefill.block if r.kind == "matmul"]
    assert [r.op for r in block] == ["qkv", "scores", "mix", "out", "mlp.gate_up", "mlp.down"]
    assert next(r for r in block if r.op == "qkv").b_shape == (D, 3 * D)
    assert next(r for r in block if r.op == "mlp.gate_up").b_shape == (D, 2 * F)


@pytest.mark.parametrize("shape", [
    dict(n_head=2, n_embd=32, n_inner=128, T=512),  # the scores dominate
    dict(n_head=4, n_kv_head=2, n_embd=32, n_inner=2048, T=64),  # the gated MLP dominates
    dict(n_head=8, n_kv_head=2, n_embd=64, n_inner=128, sliding_window=50, partial_rotary_factor=0.5, T=300),
])  # fmt: skip
def test_phi3_activation_estimate_is_close_to_the_measured_peak(shape):
    T = shape.pop("T")
    model = random_phi3(Phi3Config(n_layer=2, vocab_size=100, n_positions=T, **shape))
    estimate, peak = estimated_and_measured_peak(model, T)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate)


@pytest.fixture(scope="module")
def phi3_dir(tmp_path_factory):
    """A Phi-3 directory as transformers saves one (config.json + model.safetensors), written without torch."""
    from safetensors.numpy import save_file

    directory = tmp_path_factory.mktemp("phi3")
    config = Phi3Config(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=40, vocab_size=60, n_positions=64,
                        sliding_window=5, partial_rotary_factor=0.5)  # fmt: skip
    rng = np.random.default_rng(0)
    tensors = {("" if n == "lm_head.weight" else "model.") + n: (rng.standard_normal(s) * 0.2).astype(np.float32)
               for n, s in ARCHITECTURE.layout.shapes(config).items()}  # fmt: skip
    save_file(tensors, str(directory / "model.safetensors"))
    hf = {"model_type": "phi3", "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 60, "max_position_embeddings": 64,
          "sliding_window": 5, "partial_rotary_factor": 0.5, "eos_token_id": 2}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(hf))
    return directory


def test_the_commands_run_on_a_phi3_directory(phi3_dir):
    generated = run_cli("generate", "--model", str(phi3_dir), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    assert "phi3 (Phi-3 family)" in generated.stdout and "sliding window 5" in generated.stdout
    counted = run_cli("count", "--model", str(phi3_dir), "--tokens", "20")
    assert counted.returncode == 0, counted.stderr
    for stage in ("qkv", "split_heads", "mlp.gate_up", "mlp.split"):
        assert f"\n  {stage} " in counted.stdout, stage
    traced = run_cli("trace", "--model", str(phi3_dir), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    for name in ("blocks.0.attn.qkv", "blocks.0.attn.q ", "blocks.1.mlp.gate_up", "blocks.1.mlp.gate ", "mlp.up "):
        assert name in traced.stdout, name


def test_the_plot_and_the_html_report_draw_the_fused_products(phi3_dir, tmp_path):
    pytest.importorskip("matplotlib")
    plot, html = tmp_path / "count.png", tmp_path / "count.html"
    result = run_cli("count", "--model", str(phi3_dir), "--tokens", "20", "--new-tokens", "3", "--plot", str(plot),
                     "--html", str(html))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert plot.stat().st_size > 10_000 and "mlp.gate_up" in html.read_text()
    assert "MLP: g, u and act(g)" in result.stdout  # the estimate of a gated MLP, as memory.py makes it


def test_a_refused_option_is_one_line_and_exit_2(phi3_dir, tmp_path):
    hf = json.loads((phi3_dir / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, "rope_scaling": {"type": "dynamic", "factor": 2.0}}))
    (tmp_path / "model.safetensors").symlink_to(phi3_dir / "model.safetensors")
    result = run_cli("generate", "--model", str(tmp_path), "--ids", "1,2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "rope type 'dynamic' is not supported for phi3" in result.stderr
