"""`count` and `params` on the Llama family as a user meets them: presets, config.json, custom sizes, --dtype, errors."""

from __future__ import annotations

import csv
import io
import json

import pytest
from published_configs import QWEN25_05B as QWEN_CONFIG  # Qwen2.5-0.5B's config.json as published

from conftest import run_cli
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.table import PRESETS
from minitransformer.verbs import formulas
from minitransformer.views.export import CSV_COLUMNS


def test_count_a_llama_preset_walks_through_its_products():
    result = run_cli("count", "--preset", "llama3-8b", "--tokens", "100", "--new-tokens", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    config = PRESETS["llama3-8b"]
    total = formulas.generation_macs(config, 100, 3)
    prefill_block = formulas.layer_macs(config, 100, 100)
    for needle in (
        "llama3-8b: llama (Llama family), 32 layers, d_model 4,096, 32 heads of 128 sharing 8 key/value heads",
        "q = h W_q",
        "[100, 4096] x [4096, 1024]",  # k: 8 key/value heads of 128
        "[8, 4, 100, 128] x [8, 1, 128, 100]",  # scores: 4 query heads against each key head's K
        "h = RMSNorm_1(x)",
        "q, k = RoPE(q, k)",
        "a = a * u",
        f"{prefill_block:,}",
        "One block in decode step 2: T = 1 new position attending to t = 102",
        f"{total:,} MACs",
        "attention projections (q, k, v, out)",
        "MLP (mlp.gate, mlp.up, mlp.down)",
        "unembedding (logits)",
        "Attention against the products with weights in decode step 2: T = 1 new position attending to t = 102",
        "attention / weights = H dh t / (D (H dh + Hkv dh) + 1.5 D F) = t / 26,624",
        "K and V x 32 layers x 1,024 numbers (8 key/value heads of 128): 262 KB per token",
        "Memory (float32, 4 bytes a number)",
    ):
        assert needle in out, needle
    order = ["The prefill, one transformer block", "Decode steps", "Where the MACs go", "Attention against", "Total:",
             "Memory", "Arithmetic intensity"]  # fmt: skip
    assert [out.index(s) for s in order] == sorted(out.index(s) for s in order)


def test_the_seed_comparison_reads_t_over_24704_for_llama2_7b():
    result = run_cli("count", "--preset", "llama2-7b", "--tokens", "1000", "--new-tokens", "2")
    assert result.returncode == 0, result.stderr
    D, F, t = 4096, 11008, 1001
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Attention against"))
    assert lines[head].endswith(f"T = 1 new position attending to t = {t:,}")
    each = lines[head + 2].split()
    assert each[:2] == ["each", "layer"] and each[2:4] == [f"{2 * D * t:,}", f"{4 * D * D + 3 * D * F:,}"]
    assert float(each[4]) == pytest.approx(t / 24_704, rel=1e-3)
    closed = lines[head + 6]
    assert "attention / weights = t / (2D + 1.5F) = t / 24,704 (D = 4,096, F = 11,008); at t = 1,001: 0.0405" in closed
    assert "8 D^2 + 6 D F" in closed and "4 D t" in closed
    assert "at t = 24,704, beyond the context of 4,096" in lines[head + 7]


def test_gpt2_gets_the_comparison_too_and_keeps_its_summary():
    result = run_cli("count", "--preset", "gpt2", "--tokens", "5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Attention against the products with weights in a decode step at context 6" in out  # the step after it
    assert "t / (2D + F) = t / 6D = t / 4,608 (D = 768, F = 3,072); at t = 6: 0.0013\n" in out
    for group in ("attention projections (qkv, out)", "attention scores and mix (scores, mix)",
                  "MLP (mlp.up, mlp.down)", "unembedding (logits)"):  # fmt: skip
        assert f"    {group}  " in out


def test_a_sliding_window_shows_in_the_comparison_and_the_cache():
    result = run_cli("count", "--preset", "mistral-7b", "--tokens", "5000", "--new-tokens", "2", "--dtype", "bfloat16")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "attending to t = 4,096 of the 5,001 in context (the sliding window)" in out
    assert "the sliding window keeps t at most 4,096, so attention always costs less" in out
    assert "4,096 positions here (of 5,001: a query reads no further back than the sliding window)" in out
    assert "the whole context (32,768, at most the sliding window of 4,096): 537 MB" in out  # 4,096 x 131,072 B
    assert "Memory (bfloat16, 2 bytes a number)" in out and "14.5 GB (see `params`)" in out


def test_count_a_llama_config_json(tmp_path):
    path = tmp_path / "qwen" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(QWEN_CONFIG))
    by_config = run_cli("count", "--config", str(path), "--tokens", "20", "--new-tokens", "2", "--json", "-")
    by_preset = run_cli("count", "--preset", "qwen2.5-0.5b", "--tokens", "20", "--new-tokens", "2", "--json", "-")
    by_dir = run_cli("count", "--model", str(path.parent), "--tokens", "20", "--new-tokens", "2", "--json", "-")
    for result in (by_config, by_preset, by_dir):
        assert result.returncode == 0, result.stderr
    doc, preset, from_dir = (json.loads(r.stdout) for r in (by_config, by_preset, by_dir))
    assert doc["model"]["model_type"] == "qwen2" and doc["model"]["name"] == "qwen"
    assert doc["totals"] == preset["totals"] == from_dir["totals"]
    assert doc["totals"]["macs"] == formulas.generation_macs(PRESETS["qwen2.5-0.5b"], 20, 2)
    assert doc["memory"]["weights"]["parameters"] == 494_032_768
    params = run_cli("params", "--config", str(path), "--json", "-")
    assert params.returncode == 0 and json.loads(params.stdout)["total"] == 494_032_768


def test_custom_sizes_make_a_llama_block():
    result = run_cli("count", "--layers", "2", "--d-model", "64", "--heads", "8", "--kv-heads", "2", "--head-dim", "16",
                     "--d-ff", "100", "--vocab", "500", "--ctx", "32", "--tokens", "5", "--new-tokens", "3",
                     "--json", "-")  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    config = LlamaConfig(n_layer=2, n_head=8, n_kv_head=2, head_dim=16, n_embd=64, n_inner=100, vocab_size=500,
                         n_positions=32)  # fmt: skip
    assert doc["model"]["family"] == "llama" and (doc["model"]["n_kv_head"], doc["model"]["d_head"]) == (2, 16)
    assert doc["totals"]["macs"] == formulas.generation_macs(config, 5, 3)
    assert doc["memory"]["weights"]["parameters"] == formulas.parameters(config)
    q = next(o for o in doc["phases"][0]["layers"][1]["ops"] if o["op"] == "q")
    assert (q["a_shape"], q["b_shape"], q["name"]) == ([5, 64], [64, 128], "blocks.1.attn.q_proj")
    # --gated-mlp alone: a Llama block of D / H heads, the MLP 8D/3 rounded up to a multiple of 256
    gated = run_cli("params", "--layers", "32", "--d-model", "4096", "--heads", "32", "--gated-mlp", "--vocab", "32000",
                    "--json", "-")  # fmt: skip
    assert gated.returncode == 0, gated.stderr
    p = json.loads(gated.stdout)
    assert p["model"]["d_ff"] == 11008 and p["total"] == 6_738_415_616  # Llama 2 7B's shapes, from its sizes


def test_params_of_a_llama_preset():
    result = run_cli("params", "--preset", "mistral-7b", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["total"] == 7_241_732_096 and doc["tied_embeddings"] is False
    assert set(doc) == {"model", "tensors", "kinds", "total", "active", "tied_embeddings"}
    assert doc["active"] == doc["total"]  # a dense model: one token's pass reads every parameter
    assert doc["tensors"][0] == {"name": "embed_tokens.weight", "shape": [32000, 4096], "count": 131_072_000,
                                 "kind": "token_embedding"}  # fmt: skip
    assert doc["tensors"][-1]["name"] == "lm_head.weight" and doc["kinds"]["unembedding"] == 131_072_000
    assert doc["kinds"]["attention_k"] == 32 * 1024 * 4096
    assert sum(doc["kinds"].values()) == doc["total"] == sum(t["count"] for t in doc["tensors"])
    assert "7,241,732,096 parameters" in result.stderr and "layers.{i}.mlp.gate_proj.weight" in result.stderr


def _keys(doc, path=""):
    """Every key path of a JSON document, lists read through their first element."""
    if isinstance(doc, dict):
        return {f"{path}.{k}" for k in doc} | {p for k, v in doc.items() for p in _keys(v, f"{path}.{k}")}
    if isinstance(doc, list) and doc:
        return _keys(doc[0], f"{path}[]")
    return set()


def test_json_and_csv_have_the_gpt2_schema(tmp_path):
    docs, headers = {}, {}
    for name, model in (("gpt2", ["--preset", "gpt2"]), ("llama", ["--preset", "llama3.2-1b"])):
        result = run_cli("count", *model, "--tokens", "6", "--new-tokens", "3", "--dtype", "float16",
                         "--json", str(tmp_path / f"{name}.json"), "--csv", str(tmp_path / f"{name}.csv"))  # fmt: skip
        assert result.returncode == 0, result.stderr
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
        rows = list(csv.reader(io.StringIO((tmp_path / f"{name}.csv").read_text())))
        headers[name] = rows[0]
        if name == "llama":
            assert len(rows) == 1 + 3 * 10  # ten products per pass
            assert {r[6] for r in rows[1:]} == {"q", "k", "v", "scores", "mix", "out", "mlp.gate", "mlp.up", "mlp.down",
                                                "logits"}  # fmt: skip
    assert headers["gpt2"] == headers["llama"] == list(CSV_COLUMNS)
    gpt2, llama = ({k for k in _keys(d) if not k.startswith(".model.")} for d in docs.values())
    assert gpt2 == llama  # the same keys everywhere but in the config itself
    assert docs["llama"]["memory"]["dtype"] == "float16" and docs["llama"]["memory"]["bytes_per_number"] == 2
    record = docs["llama"]["phases"][0]["layers"][0]["ops"]
    assert [o["op"] for o in record][:4] == ["ln_1", "q", "k", "v"]
    assert docs["llama"]["totals"]["macs"] == formulas.generation_macs(PRESETS["llama3.2-1b"], 6, 3)


def test_plots_of_a_llama_preset(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    path = tmp_path / "llama.png"
    result = run_cli("count", "--preset", "mistral-7b", "--tokens", "300", "--new-tokens", "4", "--plot", str(path))
    assert result.returncode == 0, result.stderr
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1900, 620)
    assert [p.name for p in tmp_path.iterdir()] == ["llama.png"]


@pytest.mark.parametrize("args, message", [
    (["--layers", "2", "--d-model", "64", "--heads", "8", "--kv-heads", "3"], "--kv-heads 3 does not divide --heads 8"),
    (["--layers", "2", "--d-model", "64", "--heads", "8", "--kv-heads", "16"], "--kv-heads 16 does not divide"),
    (["--layers", "2", "--d-model", "64", "--heads", "8", "--kv-heads", "0"], "--kv-heads must be at least 1"),
    (["--layers", "2", "--d-model", "64", "--heads", "8", "--head-dim", "5"], "--head-dim 5 is odd"),
    (["--layers", "2", "--d-model", "64", "--heads", "8", "--head-dim", "-4"], "--head-dim must be at least 1"),
    (["--layers", "2", "--d-model", "80", "--heads", "16", "--gated-mlp"], "80 / --heads 16 = 5 is an odd head size"),
    (["--layers", "2", "--d-model", "60", "--heads", "8", "--kv-heads", "2"], "give --head-dim"),
    (["--gated-mlp"], "missing --layers, --d-model, --heads"),
    (["--kv-heads", "2", "--d-model", "64", "--heads", "8"], "missing --layers"),
    (["--preset", "llama2-7b", "--kv-heads", "8"], "choose one way"),
    (["--preset", "llama2-7b", "--gated-mlp"], "choose one way"),
    (["--preset", "llama2-7b", "--dtype", "int8"], "invalid choice: 'int8'"),
    (["--preset", "llama-7b"], "unknown preset 'llama-7b'"),
    (["--model", "llama-7b"], "unknown model 'llama-7b'"),
    (["--model", "{falcon}"], "falcon.json is not a directory; pass a model name"),  # as generate says it
    (["--preset", "llama2-7b", "--tokens", "4000", "--new-tokens", "100"], "exceed llama2-7b's context of 4,096"),
    (["--config", "{falcon}"], "model_type='falcon' is not supported"),
    (["--config", "{sliding_qwen}"], "use_sliding_window=true"),
    (["--config", "{shapeless}"], "lacks intermediate_size"),
])  # fmt: skip
def test_bad_llama_input_is_one_line_exit_2_and_no_file(tmp_path, args, message):
    configs = {
        "falcon": {"model_type": "falcon", "hidden_size": 64},
        "sliding_qwen": {**QWEN_CONFIG, "use_sliding_window": True},
        "shapeless": {
            "model_type": "llama",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "vocab_size": 100,
        },  # fmt: skip
    }
    for name, content in configs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    args = [a.format(**{name: tmp_path / f"{name}.json" for name in configs}) for a in args]
    out = tmp_path / "out"
    out.mkdir()
    tokens = [] if "--tokens" in args else ["--tokens", "3"]
    for command in ("count", "params"):
        if command == "params" and ("--tokens" in args or "--dtype" in args):
            continue  # count's own options
        outputs = ["--json", str(out / "c.json")] + (["--csv", str(out / "c.csv")] if command == "count" else [])
        result = run_cli(command, *args, *(tokens if command == "count" else []), *outputs)
        assert result.returncode == 2, (command, result.stdout)
        assert result.stderr.startswith("minitransformer: error: ") and result.stderr.count("\n") == 1, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
        assert result.stdout == "" and list(out.iterdir()) == []


def test_the_readme_excerpt_of_llama2_7b_is_what_count_prints():
    import re

    from conftest import ROOT

    commands = (ROOT / "docs" / "commands.md").read_text()  # the README's command manual moved there
    command, block = re.search(r"`count (--preset llama2-7b [^`]*)`.*?```\n(.*?)```", commands, re.S).groups()
    pasted = [line for line in block.splitlines() if line.strip() != "..."]
    result = run_cli("count", *command.split())
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    assert len(pasted) == 11 and all(line in printed for line in pasted), [p for p in pasted if p not in printed]
    assert "t / 24,704" in block
