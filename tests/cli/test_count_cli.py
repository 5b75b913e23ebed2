"""`count` and `params` as a user meets them: the walkthrough, JSON and CSV that agree, plots, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from conftest import ROOT, run_cli, write_gpt2
from minitransformer.families.table import PRESETS
from minitransformer.verbs import formulas

GPT2 = PRESETS["gpt2"]


def test_count_walks_through_the_prefill_the_decode_steps_and_the_totals():
    result = run_cli("count", "--preset", "gpt2", "--tokens", "5", "--new-tokens", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    prefill_block = 12 * 5 * 768**2 + 2 * 5 * 5 * 768
    total = formulas.generation_macs(GPT2, 5, 3)
    without = formulas.generation_macs(GPT2, 5, 3, use_cache=False)
    for needle in (
        "T = 5 new positions attending to t = 5",
        "[5, 768] x [768, 2304]",  # qkv operands
        "[12, 5, 64] x [12, 64, 5]",  # scores per head
        f"{prefill_block:,}",  # the block total
        "causal dot products",
        "T*past + T(T+1)/2",  # the convention, stated
        "One block in decode step 2: T = 1 new position attending to t = 7",
        "[12, 1, 64] x [12, 64, 7]",
        f"{total:,} MACs",
        f"without it these tokens would cost {without:,} MACs",
        "MLP (mlp.up, mlp.down)",
        "73.7 KB per token",  # KV cache: 2 x 12 x 768 x 4 bytes
        "memory-bound",
    ):
        assert needle in out, needle
    # 300 dense scores per layer (12 heads x 5 x 5), 180 kept by the mask (12 x 15)
    scores = next(line for line in out.splitlines() if line.strip().startswith("scores") and "[12, 5, 5]" in line)
    assert " 300 " in scores and " 180 " in scores
    order = ["The prefill, one transformer block", "The prefill, layer by layer", "Decode steps", "Where the MACs go",
             "Total:", "Memory", "Arithmetic intensity"]  # fmt: skip
    assert [out.index(s) for s in order] == sorted(out.index(s) for s in order)


def test_count_json_has_the_generate_schema_and_agrees_with_the_csv(tmp_path):
    json_path, csv_path = tmp_path / "count.json", tmp_path / "count.csv"
    result = run_cli("count", "--layers", "3", "--d-model", "64", "--heads", "4", "--vocab", "1000", "--ctx", "64",
                     "--tokens", "7", "--new-tokens", "4", "--batch", "2",
                     "--json", str(json_path), "--csv", str(csv_path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(json_path.read_text())
    generate_keys = {"model", "prompt_tokens", "new_tokens", "phases", "totals", "cache"}
    assert generate_keys <= doc.keys() and "text" not in doc
    assert (doc["prompt_tokens"], doc["new_tokens"], doc["batch"]) == (7, 4, 2)  # counts: a count has no tokens
    assert [(p["phase"], p["tokens"], p["context"], p["batch"]) for p in doc["phases"]] == [
        ("prefill", 7, 7, 2), ("decode", 1, 8, 2), ("decode", 1, 9, 2), ("decode", 1, 10, 2)]  # fmt: skip
    assert doc["detailed_steps"] == [0, 1, 2, 3]
    config = PRESETS["gpt2"].__class__(n_layer=3, n_head=4, n_embd=64, vocab_size=1000, n_positions=64)
    assert doc["totals"]["macs"] == formulas.generation_macs(config, 7, 4, B=2) == sum(p["macs"] for p in doc["phases"])
    assert doc["cache"]["without_cache"]["macs"] == formulas.generation_macs(config, 7, 4, use_cache=False, B=2)
    prefill = doc["phases"][0]
    assert len(prefill["layers"]) == 3 and [layer["layer"] for layer in prefill["layers"]] == [0, 1, 2]
    qkv = next(o for o in prefill["layers"][2]["ops"] if o["op"] == "qkv")
    assert qkv["name"] == "blocks.2.attn.qkv" and qkv["a_shape"] == [2, 7, 64] and qkv["b_shape"] == [64, 192]
    assert qkv["dot_products"] == 2 * 7 * 192 and qkv["dot_length"] == 64 and qkv["flops"] == 2 * qkv["macs"]
    assert prefill["logits"]["dot_products"] == 2 * 1000
    assert doc["memory"]["kv_cache"]["bytes_per_token"] == formulas.kv_cache_bytes_per_token(config, B=2)
    assert doc["memory"]["weights"]["parameters"] == formulas.parameters(config)

    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert len(rows) == 4 * 7  # seven products per pass
    for phase in doc["phases"]:
        mine = [r for r in rows if int(r["step"]) == phase["step"]]
        assert sum(int(r["all_layers_macs"]) for r in mine) == phase["macs"]
        assert abs(sum(float(r["share_of_pass"]) for r in mine) - 1) < 1e-5
    scores = next(r for r in rows if r["op"] == "scores" and r["step"] == "0")
    assert (scores["layers"], scores["out_shape"], scores["dot_length"]) == ("3", "2x4x7x7", "16")
    assert int(scores["causal_dot_products"]) == 2 * 4 * formulas.causal_pairs(7, 7)


def test_count_json_on_stdout_is_one_document_and_long_runs_are_summarised():
    result = run_cli("count", "--preset", "distilgpt2", "--tokens", "3", "--new-tokens", "30", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # nothing else on stdout
    assert "Where the MACs go" in result.stderr
    full = doc["detailed_steps"]
    assert full == [0, 1, 2, 3, 4, 5, 6, 7, 8, 28, 29]
    for phase in doc["phases"]:
        assert ("layers" in phase) == (phase["step"] in full)
    closed = formulas.generation_macs(PRESETS["distilgpt2"], 3, 30)
    assert sum(p["macs"] for p in doc["phases"]) == doc["totals"]["macs"] == closed
    every = json.loads(run_cli("count", "--preset", "distilgpt2", "--tokens", "3", "--new-tokens", "30", "--all-steps",
                               "--json", "-").stdout)  # fmt: skip
    assert all("layers" in p for p in every["phases"]) and every["detailed_steps"] == list(range(30))


def test_all_steps_is_for_the_json_and_leaves_the_page_as_it_is(tmp_path):
    """--all-steps put every step in full into the HTML page too: 14 MB for GPT-2's 500 steps, 147 MB for DeepSeek-V4."""
    pages = [tmp_path / "shown.html", tmp_path / "all.html"]
    for page, extra in zip(pages, ([], ["--all-steps", "--json", str(tmp_path / "all.json")])):
        args = ("count", "--preset", "distilgpt2", "--tokens", "3", "--new-tokens", "30", "--html", str(page), *extra)
        assert run_cli(*args).returncode == 0
    assert pages[0].read_bytes() == pages[1].read_bytes()


def test_all_steps_without_the_json_is_refused_not_dropped(tmp_path):
    """--all-steps changes --json alone: without it, the run was accepted and the option silently did nothing."""
    for outputs in ([], ["--html", str(tmp_path / "page.html")], ["--csv", str(tmp_path / "rows.csv")]):
        result = run_cli("count", "--preset", "distilgpt2", "--tokens", "3", "--all-steps", *outputs)
        assert result.returncode == 2 and result.stdout == "", (outputs, result.returncode, result.stdout[:200])
        assert result.stderr.count("\n") == 1 and "give --json PATH" in result.stderr, result.stderr
    assert not list(tmp_path.iterdir())  # refused before any file


def test_count_no_cache_says_what_the_cache_would_save():
    result = run_cli("count", "--preset", "gpt2", "--tokens", "5", "--new-tokens", "3", "--no-cache")
    assert result.returncode == 0, result.stderr
    with_cache = formulas.generation_macs(GPT2, 5, 3)
    assert f"KV cache (off): with it these tokens would cost {with_cache:,} MACs" in result.stdout
    assert "scores (per block)" in result.stdout and "[12, 7, 7]" in result.stdout  # step 2 recomputes 7 positions


def test_count_a_model_directory_reads_only_its_config(tmp_path):
    directory = write_gpt2(tmp_path / "tiny", n_layer=2, n_head=2, n_embd=16, vocab_size=100)
    (directory / "model.safetensors").write_bytes(b"not weights")  # never opened
    result = run_cli("count", "--model", str(directory), "--tokens", "4")
    assert result.returncode == 0, result.stderr
    assert "tiny: 2 layers, d_model 16" in result.stdout


@pytest.mark.parametrize("verb", [["count"], ["params"], ["lens", "--count-only"]], ids=lambda v: v[0])
@pytest.mark.parametrize("flag, says", [
    ("--model", "the model's name or directory is empty"),
    ("--config", "--config is empty; give the path of a config.json file"),
])  # fmt: skip
def test_an_empty_model_or_config_is_refused_not_read_as_the_current_directory(tmp_path, verb, flag, says):
    """Path("") is ".": count --model "" counted whatever config.json the current directory held, as generate's
    --model "" once loaded it; --config "" answered that "." is a directory."""
    import os
    import subprocess

    write_gpt2(tmp_path, n_layer=2, n_head=2, n_embd=16, vocab_size=100)  # a model where the command runs
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "minitransformer", *verb, flag, ""]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    print(verb, flag, result.returncode, result.stdout[:200], result.stderr)
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout)
    assert result.stderr.startswith("minitransformer: error: ") and says in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_params_json_and_table():
    result = run_cli("params", "--preset", "gpt2", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["total"] == 124_439_808 and doc["tied_embeddings"] is True
    assert {"tensors", "kinds", "total", "tied_embeddings"} <= doc.keys()
    wte = {"name": "wte.weight", "shape": [50257, 768], "count": 38_597_376, "kind": "token_embedding"}
    assert doc["tensors"][0] == wte
    assert sum(doc["kinds"].values()) == doc["total"] == sum(t["count"] for t in doc["tensors"])
    assert "124,439,808 parameters" in result.stderr and "tied: counted once" in result.stderr


def test_plots_are_written_as_one_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    path = tmp_path / "count.png"
    result = run_cli("count", "--preset", "gpt2", "--tokens", "20", "--new-tokens", "5", "--plot", str(path))
    assert result.returncode == 0, result.stderr
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1900, 620)
    assert [p.name for p in tmp_path.iterdir()] == ["count.png"]  # no temporary left behind


def test_plot_without_matplotlib_is_a_one_line_error_before_anything_is_written(tmp_path):
    fake = tmp_path / "site"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("count", "--tokens", "5", "--json", str(out / "c.json"), "--plot", str(out / "c.png"),
                     env={"PYTHONPATH": str(fake)})  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "needs matplotlib" in result.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--preset", "gpt5", "--tokens", "3"], "unknown preset"),
    (["--tokens", "1000", "--new-tokens", "30"], "exceed gpt2's context of 1,024 positions (they take 1,029"),
    (["--layers", "2", "--d-model", "100", "--heads", "3", "--tokens", "3"], "not divisible by --heads 3"),
    (["--layers", "2", "--d-model", "0", "--heads", "1", "--tokens", "3"], "--d-model must be at least 1"),
    (["--layers", "-2", "--d-model", "8", "--heads", "1", "--tokens", "3"], "--layers must be at least 1"),
    (["--tokens", "-1"], "--tokens must be a whole number of at least 1, not -1"),
    (["--tokens", "3", "--batch", "0"], "--batch must be a whole number of at least 1, not 0"),
    (["--layers", "1", "--d-model", "256", "--heads", "4", "--tokens", "2000"],
     "exceed custom-1x256's context of 1,024 positions (they take 2,000: every token but the last new one is fed to "
     "the model); the prompt alone is too long; give a longer context, --ctx 2000 or more"),
    (["--preset", "gpt2", "--tokens", "1024", "--new-tokens", "2"], "at most 1 new token fits; give fewer --tokens or"),
    (["--preset", "gpt2", "--model", "gpt2", "--tokens", "3"], "choose one way"),
    (["--preset", "gpt2", "--heads", "4", "--tokens", "3"], "choose one way"),
    (["--config", "{missing}", "--tokens", "3"], "does not exist"),
    (["--config", "{bad}", "--tokens", "3"], "is not valid JSON"),
    (["--config", "{dir}", "--tokens", "3"], "is a directory"),
    (["--tokens", "3", "--plot", "{dir}/c.jpg"], "ending in .png"),
    (["--tokens", "3", "--json", "-", "--csv", "-"], "both write to stdout"),
    (["--tokens", "3", "--balance", "-1"], "--balance must be a positive number"),
    # a mistyped layer count: refused in its words before a list of a kind per layer is made (a MemoryError before)
    (["--layers", "10001", "--d-model", "64", "--heads", "4", "--tokens", "3"],
     "--layers must be at most 10,000, not 10,001"),
    (["--layers", str(10**22), "--d-model", "64", "--heads", "4", "--tokens", "3"], "--layers must be at most 10,000"),
    (["--config", "{huge}", "--tokens", "3"], "config n_layer must be a positive integer of at most 10,000, not 10"),
    (["--config", "{huge_llama}", "--tokens", "3"], "config num_hidden_layers must be a positive integer of at most"),
])  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_no_file(tmp_path, args, message):
    (tmp_path / "bad.json").write_text("{not json")
    huge = {**GPT2.to_hf_dict(), "n_layer": 10**12}
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    huge_llama = {**PRESETS["qwen3-0.6b"].to_hf_dict(), "num_hidden_layers": 10**12}
    huge_llama.pop("layer_types", None)  # made from the layer count by its rule, as a file without it has them
    (tmp_path / "huge_llama.json").write_text(json.dumps(huge_llama))
    out = tmp_path / "out"
    out.mkdir()
    files = {name: tmp_path / f"{name}.json" for name in ("bad", "huge", "huge_llama")}
    args = [a.format(missing=tmp_path / "none.json", dir=out, **files) for a in args]
    outputs = [] if "-" in args else ["--json", str(out / "c.json"), "--csv", str(out / "c.csv")]
    result = run_cli("count", *args, *outputs)
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith("minitransformer: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == "" and list(out.iterdir()) == []


def test_params_bad_input_is_one_line(tmp_path):
    result = run_cli("params", "--layers", "2", "--d-model", "10", "--heads", "4")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not divisible" in result.stderr


# The peak resident memory of this process image. getrusage's ru_maxrss would do, but Linux carries
# the parent's high-water mark across fork/vfork + exec, so a child of a large pytest process reports
# the parent's size; VmHWM in /proc belongs to the new image alone.
PEAK_RSS = (
    "import sys\n"
    "from minitransformer.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "peak = int(status.split('VmHWM:')[1].split()[0]) * 1024\n"
    "print('PEAK_RSS_BYTES', peak, file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc (Linux)")
@pytest.mark.parametrize("args, config, n_prompt, n_new", [
    (["--layers", "48", "--d-model", "4096", "--heads", "32", "--tokens", "1000"],
     PRESETS["gpt2"].__class__(n_layer=48, n_head=32, n_embd=4096), 1000, 1),
    (["--preset", "gpt3-175b", "--tokens", "1000", "--new-tokens", "1000"], PRESETS["gpt3-175b"], 1000, 1000),
], ids=["48x4096-prefill-1000", "gpt3-175b-1000-new-tokens"])  # fmt: skip
def test_big_models_count_within_200_mb(args, config, n_prompt, n_new, tmp_path):
    """Shape-only: no weight-sized array, and a long generation folds to one block a pass (the time is not asserted)."""
    import subprocess

    from conftest import ROOT

    result = subprocess.run([sys.executable, "-c", PEAK_RSS, "count", *args, "--json", str(tmp_path / "c.json")],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Total:" in result.stdout
    peak = int(result.stderr.split("PEAK_RSS_BYTES")[1])
    assert peak < 200 * 2**20, f"peak RSS {peak / 2**20:.0f} MB"
    doc = json.loads((tmp_path / "c.json").read_text())
    assert len(doc["phases"]) == n_new
    assert doc["totals"]["macs"] == formulas.generation_macs(config, n_prompt, n_new)


def test_tokens_has_a_stated_default(tmp_path):
    """count runs without --tokens: 100, as its help says, or what a smaller context leaves room for."""
    result = run_cli("count", "--preset", "deepseek-v3", "--json", str(tmp_path / "d.json"))
    assert result.returncode == 0, result.stderr
    assert "generation: a 100-token prompt and 1 new token" in result.stdout
    assert json.loads((tmp_path / "d.json").read_text())["prompt_tokens"] == 100
    assert "prompt length in tokens (default 100" in run_cli("count", "--help").stdout
    small = run_cli("count", "--layers", "1", "--d-model", "8", "--heads", "2", "--ctx", "40", "--new-tokens", "3")
    assert small.returncode == 0 and "generation: a 38-token prompt and 3 new tokens" in small.stdout  # 40 positions


def test_a_decode_step_is_described_wherever_the_context_holds_one():
    """A 1,023-token prompt of GPT-2 leaves room for the step after it (context 1,024): it was said to have none."""
    for tokens, context in ((1023, 1024), (1024, None)):
        doc = json.loads(run_cli("count", "--preset", "gpt2", "--tokens", str(tokens), "--json", "-").stdout)
        decode = doc["memory"]["activations"].get("decode")  # absent where no step fits
        assert (decode and decode["context"]) == context, (tokens, decode)


def test_a_dense_count_and_generation_say_so_in_the_json_and_on_the_page(tmp_path, small_gpt2):
    """--dense-attention changes what the ledger counts (every T x t score, not row chunks): the JSON and the page said
    nothing of it, so a shared page of dense counts read as the default's."""
    from minitransformer.views.html_report import DENSE_NOTE, generation_page

    for dense in (False, True):
        flag = ["--dense-attention"] if dense else []
        outputs = ["--json", str(tmp_path / f"{dense}.json"), "--html", str(tmp_path / f"{dense}.html")]
        assert (
            run_cli("count", "--preset", "gpt2", "--tokens", "300", "--new-tokens", "2", *flag, *outputs).returncode
            == 0
        )
        doc = json.loads((tmp_path / f"{dense}.json").read_text())
        assert doc.get("dense_attention", False) is dense, doc.get("dense_attention")
        assert ((tmp_path / f"{dense}.html").read_text().count(DENSE_NOTE) == 1) is dense
        scores = next(r for r in doc["phases"][0]["layers"][0]["ops"] if r["op"] == "scores")  # 300: row chunks
        assert (scores["macs"] == scores["dense_macs"]) is dense, (scores["macs"], scores["dense_macs"])
        out = small_gpt2.generate(list(range(5, 12)), max_new_tokens=2, dense_attention=dense)
        assert out.to_dict().get("dense_attention", False) is dense
        assert (generation_page(out).count(DENSE_NOTE) == 1) is dense


def test_a_directory_without_config_json_is_refused_saying_what_to_give(tmp_path):
    result = run_cli("count", "--model", str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "has no config.json" in result.stderr and "--preset" in result.stderr and "--config" in result.stderr
