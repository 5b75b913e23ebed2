"""The HTML report as a person sees it: written by the CLI, opened from a file in a real headless Chromium.

The page must show the ledger's own numbers, draw one box per stage of a GPT-2 block and of a Llama
block, raise no script error, fetch nothing, stay readable with scripts off, answer the mouse, and
stay small. Tests that need the browser skip, saying so, only where no Chromium binary exists; CI
sets MINITRANSFORMER_REQUIRE_BROWSER=1 so that there a missing browser fails instead.
"""

from __future__ import annotations

import io
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from browser import Chromium
from conftest import run_cli
from minitransformer import UserError, load_model
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY
from minitransformer.models.weights import expected_shapes
from minitransformer.verbs.attention_maps import AttentionRecorder, attention_of
from minitransformer.views.colours import LAYER_COLOURS, PRODUCT_COLOURS
from minitransformer.views.html_drawings import label
from minitransformer.views.html_report import fold_layers, generation_page, unfold_layers

GPT2 = GPT2_FAMILY.stage_table(GPT2Config())  # GPT-2's stages: every GPT-2 has the same

PROMPT = "The capital of France is"
DEMO_OPTIONS = ("--model", "demo")  # the demo answers without looking for GPT-2 or the network


# --- fixtures -------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium():
    binary = Chromium.find()
    if binary is None:
        if os.environ.get("MINITRANSFORMER_REQUIRE_BROWSER"):
            pytest.fail("MINITRANSFORMER_REQUIRE_BROWSER is set but no chromium, chromium-browser or google-chrome "
                        "is on PATH (`apt-get install chromium`)")  # fmt: skip
        pytest.skip("no Chromium on this machine (chromium, chromium-browser or google-chrome on PATH): the page is not "
                    "opened in a browser here; `apt-get install chromium` to run these tests (CI does)")  # fmt: skip
    browser = Chromium(binary)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The main command with --html and --json: the page and the ledger of the same run."""
    out = tmp_path_factory.mktemp("demo-report")
    html, ledger = out / "report.html", out / "ledger.json"
    result = run_cli("generate", PROMPT, *DEMO_OPTIONS, "--html", str(html), "--json", str(ledger))
    assert result.returncode == 0, result.stderr
    return html, json.loads(ledger.read_text()), result.stdout


@pytest.fixture(scope="session")
def count_run(tmp_path_factory):
    """GPT-3 175B generating 1,000 tokens after 1,000, counted: the largest page the issue names."""
    out = tmp_path_factory.mktemp("count-report")
    html, ledger = out / "gpt3.html", out / "gpt3.json"
    result = run_cli("count", "--preset", "gpt3-175b", "--tokens", "1000", "--new-tokens", "1000", "--html", str(html),
                     "--json", str(ledger))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return html, json.loads(ledger.read_text())


def write_llama(directory: Path, seed: int = 0, **overrides) -> Path:
    """A tiny random Llama checkpoint: 2 layers, 4 query heads sharing 2 key/value heads (grouped-query attention)."""
    directory.mkdir(parents=True, exist_ok=True)
    hf = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 97, "max_position_embeddings": 64,
          "rms_norm_eps": 1e-5, **overrides}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(hf))
    from minitransformer.models.config import load_config

    config = load_config(directory / "config.json")
    rng = np.random.default_rng(seed)
    tensors = {("" if name == "lm_head.weight" else "model.") + name: (rng.standard_normal(s) * 0.3).astype(np.float32)
               for name, s in expected_shapes(config).items()}  # fmt: skip
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


@pytest.fixture(scope="session")
def llama_run(tmp_path_factory):
    """A Llama generation's page, made through the Python API (the model has no tokenizer: ids go in)."""
    out = tmp_path_factory.mktemp("llama-report")
    model = load_model(write_llama(out / "tiny-llama"))
    generation = model.generate([5, 17, 3, 42, 8, 11], max_new_tokens=5, attention=[0, 1])
    html = out / "llama.html"
    html.write_text(generation_page(generation), encoding="utf-8")
    return html, generation.to_dict(), model


@pytest.fixture
def page_of(chromium):
    """Open a file in the browser; every page opened is closed after the test."""
    pages = []

    def open_page(path, **options):
        page = chromium.open(path, **options)
        pages.append(page)
        return page

    yield open_page
    for page in pages:
        page.close()


# --- what the DOM says ------------------------------------------------------------------------------------
def number(text: str) -> int:
    return int(text.replace(",", ""))


def table_rows(page, selector: str) -> list[list[str]]:
    """The visible text of each cell of each body row of the tables `selector` matches."""
    return page.evaluate(f"""Array.from(document.querySelectorAll({json.dumps(selector)})).map(
        row => Array.from(row.cells).map(cell => cell.innerText.trim()))""")


def current_view(step: int = 0) -> str:
    return f'.phase-view[data-view="{step}"]'


def embedded_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" class="mt-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1).replace("<\\/", "</"))


def detailed(document: dict) -> dict[int, dict]:
    return {p["step"]: p for p in document["phases"] if "layers" in p}


# --- without a browser: the data, the files, the sizes ---------------------------------------------------
def test_the_page_carries_the_run_ledger_folded_and_nothing_else(demo_run):
    html, ledger, _ = demo_run
    data = embedded_data(html.read_text())
    document = data["document"]
    for key in ("model", "prompt", "prompt_tokens", "new_tokens", "text", "candidates", "totals", "cache",
                "prompt_pieces", "new_pieces"):  # fmt: skip
        assert document[key] == ledger[key], key
    assert [p["step"] for p in document["phases"]] == [p["step"] for p in ledger["phases"]] == list(range(8))
    for folded, full in zip(document["phases"], ledger["phases"]):
        assert [run["repeat"] for run in folded["layers"]] == [4]  # the demo's 4 identical blocks are one entry
        assert unfold_layers(folded) == full
    assert sum(op["macs"] for op in data["ops"].values()) == ledger["totals"]["macs"]
    assert [s["with_cache_macs"] for s in ledger["cache"]["steps"]] == [p["macs"] for p in ledger["phases"]]
    assert sum(s["without_cache_macs"] for s in ledger["cache"]["steps"]) == ledger["cache"]["without_cache"]["macs"]


def test_folding_is_undone_exactly_and_only_folds_identical_layers(demo_run):
    _, ledger, _ = demo_run
    phase = ledger["phases"][0]
    assert unfold_layers(fold_layers(phase)) == phase
    odd = json.loads(json.dumps(phase))
    odd["layers"][2]["ops"][1]["macs"] += 1  # a layer that differs breaks the run in three
    assert [(r["layer"], r["repeat"]) for r in fold_layers(odd)["layers"]] == [(0, 2), (2, 1), (3, 1)]
    assert unfold_layers(fold_layers(odd)) == odd


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "data", "poster") and value is not None:
                self.links.append((tag, name, value))


def test_the_page_is_self_contained(demo_run):
    html, _, stdout = demo_run
    text = html.read_text()
    parser = _Links()
    parser.feed(text)
    assert parser.links and all(v.startswith(("data:image/png;base64,", "#")) for _, _, v in parser.links), {
        v[:40] for _, _, v in parser.links
    }
    for needle in ("http://", "https://", "<link", "fetch(", "XMLHttpRequest", "import(", "@import"):
        assert needle not in text, needle
    assert f"report written to {html}: open it in a browser ({html.resolve().as_uri()})" in stdout


def test_page_sizes(demo_run, count_run):
    demo_bytes, gpt3_bytes = demo_run[0].stat().st_size, count_run[0].stat().st_size
    print(f"demo generate page {demo_bytes:,} bytes; gpt3-175b count page {gpt3_bytes:,} bytes")
    assert demo_bytes < 1_000_000
    assert gpt3_bytes < 5_000_000


def test_the_count_page_carries_the_count_ledger(count_run):
    html, ledger = count_run
    document = embedded_data(html.read_text())["document"]
    assert document["detailed_steps"] == ledger["detailed_steps"] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 998, 999]
    for folded, full in zip(document["phases"], ledger["phases"]):
        if "layers" in full:
            assert [run["repeat"] for run in folded["layers"]] == [96]
            assert unfold_layers(folded) == full
        else:
            assert folded == full
    assert document["memory"] == ledger["memory"] and document["cache"] == ledger["cache"]
    assert len(ledger["cache"]["steps"]) == 1000


def visible(n: int, window: int | None = None) -> np.ndarray:
    """[n, n] bool: which key j query i may look at (j <= i, and within the window where there is one)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    keep = j <= i
    return keep if window is None else keep & (j > i - window)


@pytest.mark.parametrize("use_cache", [True, False])
def test_attention_maps_of_a_generation_equal_one_pass_over_the_whole_sequence(small_gpt2, use_cache):
    """The prefill's rows and each decode step's row, put together, are the weights of a pass over all of it."""
    out = small_gpt2.generate([464, 3139, 286, 4881, 318], max_new_tokens=6, use_cache=use_cache, attention=[0, 1])
    ids = out.prompt_tokens + out.new_tokens[:-1]  # the last new token was never fed back
    _, cache = small_gpt2.run_with_cache(ids, names="blocks.*.attn.weights")
    for layer in (0, 1):
        kept, whole = out.attention.weights[layer], cache[f"blocks.{layer}.attn.weights"]
        assert kept.shape == whole.shape == (2, 10, 10)
        seen = visible(10)
        np.testing.assert_allclose(kept[:, seen], whole[:, seen], atol=1e-5)
        assert np.isnan(kept[:, ~seen]).all() and (whole[:, ~seen] == 0).all()
    assert not small_gpt2.hooks._hooks  # the recorder took its hooks off again


def test_attention_maps_under_a_sliding_window(tmp_path):
    """Mistral-style: each decode row covers only the last `window` keys; it lands at the right offset."""
    model = load_model(write_llama(tmp_path / "windowed", model_type="mistral", sliding_window=3))
    out = model.generate([4, 9, 2, 7, 1], max_new_tokens=5, attention=1)
    ids = out.prompt_tokens + out.new_tokens[:-1]
    _, cache = model.run_with_cache(ids, names="blocks.1.attn.weights")
    kept, whole = out.attention.weights[1], cache["blocks.1.attn.weights"]
    seen = visible(9, window=3)
    assert seen.sum(axis=1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    np.testing.assert_allclose(kept[:, seen], whole[:, seen], atol=1e-5)
    assert np.isnan(kept[:, ~seen]).all()


@pytest.mark.parametrize(
    ("family", "name"),
    [("gemma", "gemma2-bias-untied-no-caps"), ("llama4_text", "chunks-nope-temperature-alternating")],
)
@pytest.mark.parametrize("use_cache", [True, False])
def test_a_recorders_maps_are_hidden_where_each_layers_mask_hid_the_key(tmp_path, family, name, use_cache):
    """A trace's maps (AttentionRecorder, its own passes) were hatched by the config's sliding window on every layer:
    Gemma 2's global layer lost the weights behind the window, Llama 4's other chunks read as weights of 0. They are
    hidden where the layer's scores were -inf, as a generation's maps (attention_of) are."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    from conformance_configs import FAMILIES
    from family_checks import save_random

    spec = FAMILIES[family]
    save_random(tmp_path, spec.hf_config(name), seed=spec.configs[name]["seed"], spread=spec.spread)
    model = load_model(tmp_path)  # Gemma 2: a window of 5 on layer 1, none on 0; Llama 4: chunks of 24 but layer 3
    layers = list(range(model.config.n_layer))
    with AttentionRecorder(model, layers, use_cache) as recorder:
        out = model.generate(list(range(3, 33)), max_new_tokens=4, use_cache=use_cache)
    own = attention_of(model, out.prompt_tokens + out.new_tokens[:-1], layers)
    for layer in layers:
        kept, whole = recorder.maps().weights[layer], own.weights[layer]
        hidden = np.isnan(whole)
        assert (np.isnan(kept) == hidden).all(), (layer, np.isnan(kept).sum(), hidden.sum())
        np.testing.assert_allclose(kept[~hidden], whole[~hidden], atol=1e-5)
    hidden = {layer: int(np.isnan(own.weights[layer][0]).sum()) for layer in layers}
    causal = 33 * 32 // 2  # the future of 33 positions, every layer's
    window = causal + sum(33 - i for i in range(5, 33))  # keys 5 or more behind the query
    chunks = causal + 24 * 9  # the 9 positions of the second chunk do not see the first's 24
    assert hidden == ({0: causal, 1: window} if family == "gemma" else {0: chunks, 1: chunks, 2: chunks, 3: causal})


@pytest.mark.parametrize(("preset", "says"), [
    ("qwen3.5-9b", "layer 0 computes no attention weights (it keeps a state instead); the layers that do: 3, 7"),
    ("mamba-130m", "layer 0 computes no attention weights (it keeps a state instead); none of mamba-130m's layers"),
])  # fmt: skip
def test_attention_maps_of_a_layer_that_keeps_a_state_are_refused_saying_which_layers_attend(preset, says):
    """A hybrid's recurrent layer has no weights to draw: refused naming the layers that attend (the stage selector's
    'no stage is named blocks.0.attn.weights' said neither why nor where)."""
    from minitransformer.families.table import PRESETS
    from minitransformer.models.model import Model
    from minitransformer.verbs.attention_maps import attention_layers_of

    config = PRESETS[preset]
    model = Model.without_weights(config.prefix(min(config.n_layer, 8)))
    with pytest.raises(UserError) as refused:
        attention_layers_of(model, [0, 1])
    assert says in str(refused.value), str(refused.value)


def test_a_recorder_refuses_a_layer_the_model_lacks(small_gpt2):
    with pytest.raises(UserError, match="among 0..1"):
        AttentionRecorder(small_gpt2, [2])


def test_notebooks_show_the_report_inline(small_gpt2):
    out = small_gpt2.generate("Hello", max_new_tokens=2)
    for shown in (out._repr_html_(), out.ledger._repr_html_()):
        assert shown.startswith('<div class="mt-report"') and shown.endswith("</div>")
        assert "<html" not in shown and "<body" not in shown
        assert f"{out.ledger.totals.macs:,}" in shown
    from minitransformer.verbs.count import count_generation

    assert "Memory and arithmetic intensity" in count_generation(small_gpt2.config, 3, 2)._repr_html_()


def test_a_page_of_a_batch_or_of_no_ledger(small_gpt2):
    """generation_page of a generation kept without its ledger ended in a KeyError (and Jupyter's display with it), and
    of a batch's list in an AttributeError: a batch's page is the command's, a ledger-less generation is refused in
    words and Jupyter shows its text."""
    from minitransformer.views.html_report import batch_data, page

    bare = small_gpt2.generate("Hello", max_new_tokens=2, ledger=False)
    with pytest.raises(UserError, match=re.escape("this generation kept no ledger (ledger=False)")):
        generation_page(bare)
    assert bare._repr_html_() is None  # Jupyter falls back to repr
    for wrong, needle in ((None, "not NoneType"), ("Hello", "not str"), ([bare, None], "kept no ledger")):
        with pytest.raises(UserError, match=re.escape(needle)):
            generation_page(wrong)
    batch = small_gpt2.generate(["Hello", "The capital of"], max_new_tokens=2)
    numbered = re.compile(r"(-[0-9a-f]{8}-)\d+")  # each page's elements are numbered apart
    ours, command_s = (numbered.sub(r"\1N", p) for p in (generation_page(batch), page(batch_data(batch))))
    assert ours == command_s and '"The capital of"' in ours and '"Hello"' in ours


def test_html_destination_is_checked_before_any_work(tmp_path):
    result = run_cli("generate", PROMPT, *DEMO_OPTIONS, "--html", str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr.strip()
        == f"minitransformer: error: cannot write {tmp_path}: it is a directory; give the path of a file"
    )
    same = tmp_path / "both"
    result = run_cli("count", "--preset", "gpt2", "--tokens", "5", "--json", str(same), "--html", str(same))
    assert result.returncode == 2 and result.stdout == "" and "would both write to" in result.stderr
    result = run_cli("trace", PROMPT, *DEMO_OPTIONS, "--html", str(tmp_path / "missing" / "t.html"))
    assert result.returncode == 2 and result.stdout == "" and "does not exist" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_trace_writes_the_report_of_its_passes(tmp_path, small_gpt2_dir):
    html = tmp_path / "trace.html"
    result = run_cli("trace", "One two", "--model", str(small_gpt2_dir), "--new-tokens", "2", "--html", str(html))
    assert result.returncode == 0, result.stderr
    data = embedded_data(html.read_text())
    document = data["document"]
    assert data["report"] == "trace" and [p["step"] for p in document["phases"]] == [0, 1]  # 2 tokens: 2 passes
    assert document["prompt_tokens"] == [3198, 734] and len(document["new_tokens"]) == 2
    assert re.search(r"greedy continuation '(.*)'", result.stdout).group(1) == document["text"]
    assert sorted(data["attention"]["layers"]) == ["0", "1"]
    assert data["attention"]["positions"] == 3  # 2 prompt positions and the first new token, fed back
    assert document["cache"]["with_cache"]["macs"] == document["totals"]["macs"]


def test_html_to_stdout_moves_the_report_to_stderr(small_gpt2_dir):
    result = run_cli("generate", "Hi", "--model", str(small_gpt2_dir), "--max-new-tokens", "2", "--html", "-")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("<!DOCTYPE html>") and result.stdout.rstrip().endswith("</html>")
    assert "Where the dot products live" in result.stderr


# --- in the browser ---------------------------------------------------------------------------------------
def test_no_script_errors_and_nothing_fetched(page_of, demo_run, count_run, llama_run):
    for html in (demo_run[0], count_run[0], llama_run[0]):
        page = page_of(html)
        assert page.console == [], (html.name, page.console)
        fetched = [u for u in page.requests if not u.startswith("data:")]
        assert fetched == [html.resolve().as_uri()], fetched
        assert page.evaluate("document.querySelector('.mt-report').classList.contains('js')")  # the script ran


def test_the_numbers_on_the_page_are_the_ledger_s(page_of, demo_run):
    html, ledger, _ = demo_run
    page = page_of(html)
    for step, phase in detailed(ledger).items():
        page.evaluate(f"""(() => {{ const s = document.querySelector('.step-choice'); s.value = '{step}';
                          s.dispatchEvent(new Event('change')); }})()""")  # fmt: skip
        view = current_view(step)
        assert page.evaluate(f"document.querySelector('{view}').offsetHeight") > 0
        ops = phase["layers"][0]["ops"]
        rows = table_rows(page, f"{view} .block-table tbody tr:not(.total)")
        assert [r[0] for r in rows] == [op["op"] for op in ops]
        for row, op in zip(rows, ops):
            assert (number(row[4]), number(row[6])) == (op["dot_products"], op["macs"]), op["name"]
            if op["kind"] == "matmul":
                assert number(row[5]) == op["dot_length"]
                assert row[2] == f"{op['a_shape']} x {op['b_shape']}".replace("'", "")
        labels = page.evaluate(f"""Array.from(document.querySelectorAll('{view} svg.block-diagram g.stage.matmul'))
                                   .map(g => g.textContent)""")  # fmt: skip
        products = [op for op in ops if op["kind"] == "matmul"]
        assert len(labels) == len(products)
        for text, op in zip(labels, products):
            assert f"{op['dot_products']:,} dot products of length {op['dot_length']:,} = {op['macs']:,} MACs" in text
        layer_rows = table_rows(page, f"{view} .layers-table tbody tr.layer")
        assert [number(r[2]) for r in layer_rows] == [layer["macs"] for layer in phase["layers"]]
        logits_row = table_rows(page, f"{view} .layers-table tbody tr.logits")[0]
        assert number(logits_row[2]) == phase["logits"]["macs"]
    passes = table_rows(page, ".passes-table tbody tr[data-step]")
    steps = ledger["cache"]["steps"]
    assert [(number(r[5]), number(r[6]), number(r[7])) for r in passes] == [
        (s["with_cache_macs"], s["without_cache_macs"], s["without_cache_macs"] - s["with_cache_macs"]) for s in steps
    ]
    assert [number(r[5]) for r in passes] == [p["macs"] for p in ledger["phases"]]
    totals = page.evaluate("document.querySelector('.totals').innerText")
    assert f"{ledger['totals']['dot_products']:,} dot products, {ledger['totals']['macs']:,} MACs" in totals
    candidates = table_rows(page, ".candidates-table tbody tr")
    assert [(r[1], number(r[2]), r[3]) for r in candidates] == [
        (repr(c["token"]), c["token_id"], f"{100 * c['probability']:.2f}%") for c in ledger["candidates"]
    ]
    answer = page.evaluate("Array.from(document.querySelectorAll('.answer .new-token small')).map(e => e.innerText)")
    assert [int(a) for a in answer] == ledger["new_tokens"]
    whole = table_rows(page, ".ops-table tbody tr[data-op]")
    by_op = {r[0]: number(r[-3]) for r in whole}
    assert sum(by_op.values()) == ledger["totals"]["macs"]
    assert by_op["logits"] == sum(p["logits"]["macs"] for p in ledger["phases"])


def read_png(data: bytes) -> np.ndarray:
    """Chromium's screenshot as an [h, w, 3] uint8 array (matplotlib decodes it; CI has the plot extra)."""
    image = pytest.importorskip("matplotlib.image", reason="matplotlib (the plot extra) decodes the screenshot")
    pixels = image.imread(io.BytesIO(data), format="png")
    return (pixels[..., :3] * 255).round().astype(np.uint8)


def box_areas(page, view: str) -> list[dict]:
    return page.evaluate(f"""Array.from(document.querySelectorAll('{view} svg.block-diagram g.stage')).map(g => {{
        const boxes = g.querySelectorAll('rect.box'); const r = boxes[0].getBoundingClientRect();
        return {{op: g.dataset.op, boxes: boxes.length, kind: g.classList.contains('matmul') ? 'matmul' : 'free',
                 width: r.width, height: r.height, x: r.x, y: r.y, fill: getComputedStyle(boxes[0]).fill}}; }})""")


def test_a_screenshot_shows_the_block_one_box_per_stage(page_of, demo_run):
    html, ledger, _ = demo_run
    page = page_of(html, width=1280, height=900)
    boxes = box_areas(page, current_view(0))
    assert [b["op"] for b in boxes] == list(GPT2.block_ops) and all(b["boxes"] == 1 for b in boxes)
    macs = {op["op"]: op["macs"] for op in ledger["phases"][0]["layers"][0]["ops"]}
    products = [b for b in boxes if b["kind"] == "matmul"]
    assert [b["op"] for b in products] == ["qkv", "scores", "mix", "out", "mlp.up", "mlp.down"]
    per_mac = [b["width"] * b["height"] / macs[b["op"]] for b in products]
    assert max(per_mac) / min(per_mac) < 1.02  # area proportional to MACs
    assert all(b["width"] > 0 and b["height"] > 0 for b in boxes)

    shot = read_png(page.screenshot(full_page=True))
    height, width, _ = shot.shape
    assert width == 1280 and height > 2000
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 200  # text, bars, boxes, heatmaps: not a blank page
    scroll = page.evaluate("window.scrollY")
    for op, painted in (("qkv", (0x4E, 0x79, 0xA7)), ("scores", (0xE8, 0x89, 0x2B)), ("mlp.down", (0x59, 0xA1, 0x4F))):
        box = next(b for b in products if b["op"] == op)  # its colour where the DOM puts it (away from its label)
        y, x = int(box["y"] + scroll + box["height"] * 0.2), int(box["x"] + box["width"] * 0.2)
        assert tuple(shot[y, x]) == painted, op


def test_a_llama_block_is_drawn_with_its_own_stages(page_of, llama_run):
    html, document, model = llama_run
    page = page_of(html)
    boxes = box_areas(page, current_view(0))
    assert [b["op"] for b in boxes] == list(model.stage_table.block_ops)
    assert len(boxes) == 22 and all(b["boxes"] == 1 for b in boxes)
    by_op = {b["op"]: b for b in boxes}
    assert by_op["k"]["width"] < by_op["q"]["width"] and by_op["v"]["width"] == by_op["k"]["width"]  # GQA
    assert {"mlp.gate", "mlp.up", "mlp.down"} <= {b["op"] for b in boxes if b["kind"] == "matmul"}
    assert by_op["rope"]["kind"] == by_op["mlp.mul"]["kind"] == "free"
    heads = page.evaluate("document.querySelectorAll('.attn-layer.current svg.heatmap').length")
    assert heads == model.config.n_head == 4
    rows = table_rows(page, f"{current_view(0)} .block-table tbody tr:not(.total)")
    ops = document["phases"][0]["layers"][0]["ops"]
    assert [(r[0], number(r[6])) for r in rows] == [(op["op"], op["macs"]) for op in ops]


def test_with_scripts_off_every_table_is_still_there(page_of, demo_run):
    html, ledger, _ = demo_run
    page = page_of(html, scripts=False)
    assert page.evaluate("document.querySelector('.mt-report').classList.contains('js')") is False
    assert page.console == []
    views = page.evaluate("Array.from(document.querySelectorAll('.phase-view')).map(v => v.offsetHeight)")
    assert len(views) == 8 and all(h > 0 for h in views)  # every pass, one after the other
    shown = page.evaluate("document.body.innerText")
    for phase in ledger["phases"]:
        block = phase["layers"][0]
        assert f"{block['macs']:,}" in shown and f"{phase['macs']:,}" in shown
    assert f"{ledger['totals']['macs']:,} MACs" in shown
    tables = page.evaluate("Array.from(document.querySelectorAll('table')).filter(t => t.offsetHeight > 0).length")
    assert tables >= 8 * 2 + 3  # per pass the block and its layers; candidates, ops, passes
    assert page.evaluate("document.querySelector('.controls').offsetHeight") == 0  # controls that need script hide
    heatmaps = page.evaluate("Array.from(document.querySelectorAll('svg.heatmap')).filter(s => s.getBoundingClientRect()"
                             ".height > 0).length")  # fmt: skip
    assert heatmaps == 16  # 4 layers x 4 heads, all shown


def choose(page, what: str, value: int) -> None:
    page.evaluate(f"""(() => {{ const s = document.querySelector('.{what}-choice'); s.value = '{value}';
                      s.dispatchEvent(new Event('change')); }})()""")  # fmt: skip


def hover_text(page, selector: str, dx: float = 0.5, dy: float = 0.5) -> str | None:
    page.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})")
    box = page.evaluate(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
                            return [r.x, r.y, r.width, r.height]; }})()""")  # fmt: skip
    page.move_mouse(box[0] + box[2] * dx, box[1] + box[3] * dy)
    return page.evaluate("(t => t.hidden ? null : t.textContent)(document.querySelector('.tip'))")


def test_hover_choose_a_pass_and_a_layer(page_of, demo_run):
    html, ledger, _ = demo_run
    page = page_of(html)
    qkv = f'{current_view(0)} g.stage[data-op="qkv"] rect'
    text = hover_text(page, qkv)
    assert text.startswith("blocks.0.attn.qkv  (matmul)") and "960 dot products of length 64" in text
    assert "= 61,440 MACs = 122,880 FLOPs" in text

    choose(page, "step", 3)
    visible_views = page.evaluate("Array.from(document.querySelectorAll('.phase-view')).filter(v => v.offsetHeight > 0)"
                                  ".map(v => v.dataset.view)")  # fmt: skip
    assert visible_views == ["3"]
    scores = table_rows(page, f"{current_view(3)} .block-table tbody tr[data-op='scores']")[0]
    assert scores[3] == "[4, 1, 8]"  # decode step 3: one query against the 8 cached positions
    choose(page, "layer", 2)
    text = hover_text(page, f'{current_view(3)} g.stage[data-op="scores"] rect')
    assert text.startswith("blocks.2.attn.qk  (matmul)") and "32 dot products of length 16" in text
    assert page.evaluate(f"document.querySelector('{current_view(3)} .layer-name').textContent") == "2"
    highlighted = page.evaluate(f"Array.from(document.querySelectorAll('{current_view(3)} tr.current-layer'))"
                                ".map(r => r.dataset.layer)")  # fmt: skip
    assert highlighted == ["2"]
    assert page.evaluate("document.querySelector('.attn-layer.current').dataset.layer") == "2"

    data = embedded_data(html.read_text())
    weights = data["attention"]["layers"]["2"][1]  # head 1 of layer 2, row-major 12 x 12
    text = hover_text(page, '.attn-layer.current svg.heatmap[data-head="1"] image', dx=2.5 / 12, dy=7.5 / 12)
    assert f"weight {weights[7 * 12 + 2]:.4f}" in text and "query 7" in text and "key 2" in text
    text = hover_text(page, '.attn-layer.current svg.heatmap[data-head="1"] image', dx=9.5 / 12, dy=3.5 / 12)
    assert "masked: the future" in text

    text = hover_text(page, '.passes-chart rect.bar-without[data-step="5"]', dy=0.9)
    step = ledger["cache"]["steps"][5]
    assert f"without it {step['without_cache_macs']:,} MACs" in text


def test_the_count_page_of_gpt3(page_of, count_run):
    html, ledger = count_run
    page = page_of(html)
    boxes = box_areas(page, current_view(0))
    assert [b["op"] for b in boxes] == list(GPT2.block_ops)
    layers = table_rows(page, f"{current_view(0)} .layers-table tbody tr.layer")
    prefill = ledger["phases"][0]
    assert len(layers) == 1 and layers[0][0] == "0..95 (each)" and number(layers[0][2]) == prefill["layers"][0]["macs"]
    memory = table_rows(page, ".memory-table tbody tr")
    m = ledger["memory"]
    assert [number(r[1]) for r in memory] == [
        m["weights"]["bytes"], m["kv_cache"]["bytes"], m["kv_cache"]["bytes_at_context"],
        m["activations"]["prefill"]["bytes"], m["activations"]["decode"]["bytes"]]  # fmt: skip
    intensity = table_rows(page, ".intensity-table tbody tr")
    assert [r[0] for r in intensity] == [r["op"] for r in m["intensity"]["ops"]]
    assert [r[3].endswith("bound") for r in intensity] == [True] * len(intensity)
    assert page.evaluate("document.querySelectorAll('.passes-table.all tbody tr').length") == 1000
    total = page.evaluate("document.querySelector('.totals').innerText")
    assert f"{ledger['totals']['macs']:,} MACs" in total


def test_ci_installs_the_browser_and_requires_it():
    from conftest import ROOT

    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    test_command = next(i for i, line in enumerate(lines) if "pytest" in line)
    install = next(i for i, line in enumerate(lines) if "apt-get install -y chromium" in line)
    required = lines.index("export MINITRANSFORMER_REQUIRE_BROWSER=1")
    assert install < required < test_command
    assert "apt-get update && apt-get install -y chromium" in lines[install]
    assert "command -v chromium" in lines[install - 1] and "id -u" in lines[install - 1]  # only if missing, as root


@pytest.mark.parametrize(
    "preset",
    [
        "gpt2",
        "llama2-7b",
        "qwen3-0.6b",
        "olmo-2-7b",
        "pythia-160m",
        "gemma-2-2b",
        "phi-3-mini",
        "mixtral-8x7b",
        "qwen3-30b-a3b",
        "gpt-oss-20b",
        "deepseek-v3",
        "mamba-codestral-7b",
        "nemotron-h-8b",
    ],
)
def test_a_branch_leaves_the_stream_where_the_family_reads_it(preset):
    """The residual stream's links in the block drawing: one to each stage that reads the stream itself (the
    pre-norms; OLMo 2, which has none, its five projections of x) and one to each residual add."""
    from minitransformer.families.table import PRESETS
    from minitransformer.verbs.count import count_generation
    from minitransformer.views.html_report import count_fragment

    config = PRESETS[preset].prefix(2)
    html = count_fragment(count_generation(config, 6, 1))
    diagram = html.split('<svg class="block-diagram"', 1)[1].split("</svg>", 1)[0]
    one_branch = ("mamba-codestral-7b", "nemotron-h-8b")  # a layer one norm, one mixer, one add (its scan's inner
    # adds are not the stream's)
    readers = {"olmo-2-7b": ["q", "k", "v", "mlp.gate", "mlp.up"], "pythia-160m": ["ln_1", "ln_2"]}.get(
        preset, ["ln_1"] if preset in one_branch else ["ln_1", "ln_2"]
    )
    adds = ["resid_post"] if preset in ("pythia-160m", *one_branch) else ["resid_mid", "resid_post"]  # NeoX adds both
    stages = re.findall(r'<g class="stage [^"]*" data-op="([^"]*)"[^>]*>(.*?)</g>', diagram, re.S)
    linked = [op for op, inside in stages if 'class="stream-link"' in inside]
    assert linked == [op for op, _ in stages if op in readers + adds]
    assert sorted(linked) == sorted(readers + adds)


@pytest.mark.parametrize("preset, layers, inner", [
    ("qwen3.5-27b", 4, {"delta.corrected", "delta.chunk_out", "delta.update"}),  # inside the Gated DeltaNet's scan
    ("deepseek-v3", 4, {"moe.shared_add"}),  # the shared expert's output added to the routed experts'
    ("nemotron-3-nano-30b-a3b", 2, {"moe.shared_add"}),
])  # fmt: skip
def test_a_plus_joins_the_stream_only_where_the_stream_is_added_to(preset, layers, inner):
    """A + on the residual stream is a stage of kind residual (x = x + a branch), in every block drawn; the sums
    inside a branch (kind add: a scan's, a mixture's) are drawn in their place with no + and no link to the stream."""
    from minitransformer.families.table import PRESETS, architecture_of
    from minitransformer.verbs.count import count_generation
    from minitransformer.views.html_report import count_fragment

    config = PRESETS[preset].prefix(layers)
    stages = architecture_of(config).all_stages().stages
    html = count_fragment(count_generation(config, 70, 1))  # 70 positions: a scan in two chunks
    drawn, joined = set(), set()
    for diagram in re.findall(r'<svg class="block-diagram".*?</svg>', html, re.S):
        for op, inside in re.findall(r'<g class="stage [^"]*" data-op="([^"]*)"[^>]*>(.*?)</g>', diagram, re.S):
            drawn.add(op)
            if 'class="stream-add"' in inside:
                joined.add(op)
    assert inner <= drawn and {stages[op].kind for op in inner} == {"add"}
    assert joined == {op for op in drawn if stages[op].kind == "residual"}
    assert "resid_post" in joined and joined <= {"resid_mid", "resid_post"}  # Nemotron-H's layers: one branch each


# --- every kind of layer drawn, and every label inside its box ---------------------------------------------------
def kinds_page(tmp_path_factory, name: str, config, tokens: int, new_tokens: int = 1) -> tuple[Path, dict]:
    """A count's page and the JSON ledger it carries (unfolded: every layer in full)."""
    from minitransformer.verbs.count import count_generation
    from minitransformer.views.html_report import count_data, page

    count = count_generation(config, tokens, new_tokens)
    data = count_data(count)
    html = tmp_path_factory.mktemp("kinds") / f"{name}.html"
    html.write_text(page(data), encoding="utf-8")
    return html, {**data["document"], "phases": [unfold_layers(p) for p in data["document"]["phases"]]}


@pytest.fixture(scope="session")
def deepseek_page(tmp_path_factory):
    """The issue's own command, without --tokens (its default is 100): 3 dense layers, then 58 with experts."""
    out = tmp_path_factory.mktemp("deepseek") / "ds.html"
    result = run_cli("count", "--preset", "deepseek-v3", "--html", str(out), "--json", str(out.with_suffix(".json")))
    assert result.returncode == 0, result.stderr
    return out, json.loads(out.with_suffix(".json").read_text())


@pytest.fixture(scope="session")
def gemma_page(tmp_path_factory):
    """Gemma 2 2B past its window of 4,096: its sliding layers' chunks see fewer keys than its full layers'."""
    from minitransformer.families.table import PRESETS

    return kinds_page(tmp_path_factory, "gemma", PRESETS["gemma-2-2b"].prefix(4), 4_500)


@pytest.fixture(scope="session")
def qwen3moe_page(tmp_path_factory):
    """Qwen3-30B-A3B's shapes cut to 6 layers, layers 0 and 3 dense (as mlp_only_layers makes them)."""
    from dataclasses import replace

    from minitransformer.families.table import PRESETS

    config = replace(
        PRESETS["qwen3-30b-a3b"].prefix(6),
        layer_types=("dense_mlp", *("sparse_moe",) * 2, "dense_mlp", *("sparse_moe",) * 2),
    )
    return kinds_page(tmp_path_factory, "qwen3moe", config, 100)


def shown_block(page) -> dict:
    """The block the page shows now: its heading, its drawing's stages and its table's rows (op, MACs)."""
    return page.evaluate("""(() => {
        const blocks = Array.from(document.querySelectorAll('.phase-view.current .kind-view'))
            .filter(v => v.offsetHeight > 0);
        const v = blocks[0];
        return {count: blocks.length, heading: v.querySelector('h3').innerText,
                drawn: Array.from(v.querySelectorAll('svg.block-diagram g.stage')).map(g => g.dataset.op),
                rows: Array.from(v.querySelectorAll('.block-table tbody tr:not(.total)')).map(
                    r => [r.cells[0].innerText.trim(), r.cells[6].innerText.trim()])}; })()""")


@pytest.mark.parametrize("which, chosen, kinds", [
    ("deepseek", [0, 2, 5, 60], {0: "dense MLP", 2: "dense MLP", 5: "MoE", 60: "MoE"}),
    ("gemma", [0, 1, 2, 3], {0: "sliding_attention", 1: "full_attention", 2: "sliding_attention", 3: "full_attention"}),
    ("qwen3moe", [0, 1, 3, 5], {0: "dense MLP", 1: "MoE", 3: "dense MLP", 5: "MoE"}),
])  # fmt: skip
def test_each_kind_of_layer_is_drawn_and_tabled_and_the_layer_chosen_shows_its_own(
    page_of, request, which, chosen, kinds
):
    html, document = request.getfixturevalue(f"{which}_page")
    page = page_of(html)
    assert page.console == []
    prefill = document["phases"][0]
    for layer in chosen:
        choose(page, "layer", layer)
        shown = shown_block(page)
        ops = prefill["layers"][layer]["ops"]
        assert shown["count"] == 1  # with script, the chosen layer's block alone
        assert shown["drawn"] == [op["op"] for op in ops], (which, layer)
        assert shown["rows"] == [[op["op"], f"{op['macs']:,}"] for op in ops], (which, layer)
        assert f"layer {layer} of {document['model']['n_layer']}" in shown["heading"]
        assert f"One block of the {kinds[layer]}" in shown["heading"] and "every block" not in shown["heading"]
        experts = {"router", "expert.gate", "expert.up", "expert.down"}
        assert (experts <= set(shown["drawn"])) == (kinds[layer] == "MoE"), (which, layer)
    text = page.evaluate("document.body.innerText")
    assert "every block of this pass has the same shapes" not in text  # the blocks differ: nothing says they do
    off = page_of(html, scripts=False)  # without script, every kind one after the other
    headings = off.evaluate(
        "Array.from(document.querySelectorAll('.phase-view .kind-view > h3:first-child')).map(h => h.innerText)"
    )
    assert len(headings) == len({kinds[layer] for layer in kinds}) * (len(document["detailed_steps"]))


def test_gemma_s_sliding_and_full_layers_differ_past_the_window(page_of, gemma_page):
    """Past the window, each kind's block is its own: the sliding layers' chunks see at most W + 127 keys. A row
    computed in row chunks says so, and states the range of its dot products' lengths."""
    html, document = gemma_page
    prefill = document["phases"][0]
    sliding, full = ({op["op"]: op for op in prefill["layers"][i]["ops"]} for i in (0, 1))
    assert sliding["mix"]["macs"] < full["mix"]["macs"] and sliding["scores"]["macs"] < full["scores"]["macs"]
    assert sliding["mix"]["dot_length_max"] == 4_096 + 128 - 1 and full["mix"]["dot_length_max"] == 4_500
    page = page_of(html)
    for layer, op in ((0, sliding["mix"]), (1, full["mix"])):
        choose(page, "layer", layer)
        row = page.evaluate("""Array.from(document.querySelectorAll('.phase-view.current .kind-view'))
            .filter(v => v.offsetHeight > 0)[0].querySelector('.block-table tr[data-op="mix"]').innerText""")
        assert "in 36 row chunks" in row and f"128-{op['dot_length_max']:,}" in row and f"{op['macs']:,}" in row


def test_a_model_of_one_kind_still_says_its_blocks_are_alike(page_of, demo_run):
    page = page_of(demo_run[0])
    heading = page.evaluate(f"document.querySelector('{current_view(0)} .kind-view h3').innerText")
    assert (
        heading == "One transformer block, stage by stage (layer 0 of 4; every block of this pass has the same shapes)"
    )
    choose(page, "layer", 3)
    assert page.evaluate(f"document.querySelector('{current_view(0)} .layer-name').textContent") == "3"


TEXT_OUTSIDE = """(() => { const out = [];
  document.querySelectorAll('svg').forEach(svg => {
    const box = svg.getBoundingClientRect();
    if (box.width === 0) return;
    svg.querySelectorAll('text').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width === 0) return;
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        out.push(svg.getAttribute('class') + ': ' + t.textContent);
      if (t.classList.contains('inbox')) {  // a name inside a stage's box stays inside it
        const rect = t.parentNode.querySelector('rect.box').getBoundingClientRect();
        if (r.left < rect.left || r.right > rect.right) out.push('inside its box: ' + t.textContent);
      }
    });
  });
  return out; })()"""


def test_no_label_is_wider_than_its_box(page_of, demo_run, llama_run, deepseek_page, qwen3moe_page, tmp_path):
    """Every text of every drawing inside its drawing, and every name inside its box: the ones that were clipped
    (Mixtral's and DeepSeek's "added back to the tokens' rows", RoPE's "position x frequency", the heatmaps'
    last token) are read whole."""
    mixtral = tmp_path / "mixtral.html"
    assert run_cli("count", "--preset", "mixtral-8x7b", "--html", str(mixtral)).returncode == 0
    pages = {"demo": demo_run[0], "llama": llama_run[0], "deepseek": deepseek_page[0], "qwen3moe": qwen3moe_page[0],
             "mixtral": mixtral}  # fmt: skip
    for name, html in pages.items():
        page = page_of(html, scripts=False)  # every pass and every kind of block laid out
        assert page.evaluate(TEXT_OUTSIDE) == [], name
        texts = page.evaluate("Array.from(document.querySelectorAll('svg text')).map(t => t.textContent).join('\\n')")
        read = re.sub(r"\s+", " ", texts)  # a long line wrapped in the drawing reads as one
        if name in ("mixtral", "deepseek"):
            assert "(added back to the tokens' rows)" in read
        if name in ("llama", "mixtral", "deepseek"):
            assert "position x frequency" in read, name
        if name == "demo":
            pieces = demo_run[1]["prompt_pieces"] + demo_run[1]["new_pieces"]
            assert label(pieces[-2]) in texts.splitlines()  # the last token fed back, at the heatmaps' edge


def test_blocks_that_differ_are_told_apart_even_where_the_config_names_no_kinds():
    """The drawn blocks follow the records: layers whose records differ get a block each, named by the ops only they
    have where the config gives no kind (a family to come whose config names none), and nothing says they are alike."""
    from minitransformer.families.table import PRESETS
    from minitransformer.verbs.count import count_generation
    from minitransformer.views import html_report

    data = html_report.count_data(count_generation(PRESETS["deepseek-v3"].prefix(4), 20, 1))
    assert data["layer_kinds"] == ["dense MLP"] * 3 + ["MoE"]
    unnamed = {**data, "layer_kinds": [""] * 4}
    views = html_report._block_views(data["document"]["phases"][0], unnamed["layer_kinds"])
    assert [(v["kind"], v["layers"]) for v in views] == [
        ("with mlp.gate, mlp.up, mlp.act, ...", [0, 1, 2]),
        ("with router, router.sigmoid, router.choose, ...", [3]),
    ]
    page = html_report.fragment(unnamed)
    assert "One block of the layers with router, router.sigmoid, router.choose, ..., stage by stage" in page
    assert "every block of this pass has the same shapes" not in page


@pytest.mark.parametrize("preset", ["mamba-codestral-7b", "nemotron-3-nano-30b-a3b"])
def test_the_count_page_of_a_state_space_model_runs_and_draws_each_kind_of_layer(page_of, tmp_path, preset):
    """A model without attention (Mamba-2) and a hybrid whose first layer is a Mamba layer: no script error, and the
    block drawn is the Mamba layer's, its scan's products among its stages."""
    html = tmp_path / "count.html"
    result = run_cli("count", "--preset", preset, "--tokens", "300", "--new-tokens", "3", "--html", str(html))
    assert result.returncode == 0, result.stderr
    page = page_of(html)
    assert page.console == [], page.console
    ops = f"Array.from(document.querySelectorAll('{current_view(0)} g.stage')).map(g => g.dataset.op)"
    assert {"ssm.in_proj", "ssm.conv", "ssd.scores", "ssd.chunk_state", "ssm.out_proj"} <= set(page.evaluate(ops))
    text = hover_text(page, f'{current_view(0)} g.stage[data-op="ssd.chunk_state"] rect')
    assert text is not None and text.startswith("blocks.0.mixer.ssd.chunk_state  (matmul)"), text


@pytest.mark.parametrize("preset", ["qwen3.5-27b", "nemotron-h-8b", "deepseek-v3.2-exp"])
def test_the_layer_pattern_is_drawn_square_by_square_as_the_config_spells_it(page_of, tmp_path, preset):
    """Which layers are linear attention, state-space, MLP, experts or full attention: a square a layer, in order,
    each of its kind's colour, the legend counting each kind; a model of one kind draws none."""
    from minitransformer.families.table import PRESETS
    from minitransformer.views.html_report import layer_kinds

    html, data = tmp_path / "count.html", tmp_path / "count.json"
    assert (
        run_cli("count", "--preset", preset, "--tokens", "20", "--html", str(html), "--json", str(data)).returncode == 0
    )
    kinds = layer_kinds(json.loads(data.read_text()))
    assert len(kinds) == PRESETS[preset].n_layer and len(set(kinds)) > 1
    page = page_of(html, scripts=False)
    squares = page.evaluate("""Array.from(document.querySelectorAll('svg.layer-pattern rect.layer-kind')).map(
        r => [Number(r.dataset.layer), r.dataset.kind, r.getAttribute('fill')])""")
    assert [(layer, kind) for layer, kind, _ in squares] == list(enumerate(kinds))
    fills = {kind: {fill for _, k, fill in squares if k == kind} for kind in set(kinds)}
    assert all(len(f) == 1 for f in fills.values()) and len({f.pop() for f in fills.values()}) == len(fills)
    used = {fill for _, _, fill in squares}
    assert not used & set(PRODUCT_COLOURS.values()), used  # a layer's colour is never a product's (views/colours.py)
    legend = page.evaluate(
        "Array.from(document.querySelectorAll('svg.layer-pattern text.legend')).map(t => t.textContent)"
    )
    assert legend == [f"{kind} ({kinds.count(kind)} layer{'s' if kinds.count(kind) > 1 else ''})"
                      for kind in dict.fromkeys(kinds)]  # fmt: skip
    assert page.evaluate(TEXT_OUTSIDE) == []


def test_the_colours_of_layers_and_of_products_are_far_apart():
    """The layer pattern's palette and the products' share no colour, nor one a glance could take for another: each
    pair differs by at least 60 of 255 in some channel."""
    rgb = [[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in (*LAYER_COLOURS, *PRODUCT_COLOURS.values())]
    layers = rgb[: len(LAYER_COLOURS)]
    products = rgb[len(LAYER_COLOURS) :]
    nearest = min(max(abs(a - b) for a, b in zip(x, y)) for x in layers for y in products)
    assert nearest >= 60, nearest
    assert len({tuple(c) for c in layers}) == len(layers) and len({tuple(c) for c in products}) == len(products)


def test_a_model_of_one_kind_of_layer_draws_no_pattern(page_of, demo_run):
    page = page_of(demo_run[0])
    assert page.evaluate("document.querySelectorAll('svg.layer-pattern').length") == 0


@pytest.mark.parametrize("options", [
    ("--preset", "gpt2"),
    ("--preset", "gpt2", "--no-cache"),
    ("--preset", "gpt2", "--batch", "4"),
    ("--preset", "gemma-3-4b", "--batch", "2", "--no-cache"),
    ("--preset", "qwen3.5-27b", "--batch", "2", "--no-cache"),
    ("--preset", "deepseek-v4-flash", "--no-cache"),
])  # fmt: skip
def test_the_memory_table_says_what_the_terminal_says_of_a_batch_and_of_a_run_without_the_cache(tmp_path, options):
    """A batch's bytes per token are the batch's, and a run without the cache holds none: the terminal's memory lines
    say "for the batch" and "(if the cache were on)"; the page's rows said neither (helper-63)."""
    html = tmp_path / "count.html"
    result = run_cli("count", *options, "--tokens", "20", "--new-tokens", "3", "--html", str(html))
    assert result.returncode == 0, result.stderr
    table = re.search(r'<table class="memory-table">(.*?)</table>', html.read_text(), re.S)
    rows = [[re.sub("<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)]  # fmt: skip
    run_rows = [r for r in rows if r and r[0] in ("KV cache, this run", "cache, this run")]
    assert len(run_rows) == 1, rows
    terminal = result.stdout[result.stdout.index("Memory (") :]
    for phrase, said in (("for the batch", "--batch" in options), ("(if the cache were on)", "--no-cache" in options)):
        assert (phrase in terminal) == said, (phrase, terminal)
        assert (phrase in run_rows[0][3]) == said, (phrase, run_rows[0])
    # every row of what this run's cache holds (a kind of layer's, a stream's, the indexer's) says it as well
    held = [r for r in rows if r and "whole context" not in r[0] and r[0] not in ("weights",)
            and not r[0].startswith("activations")]  # fmt: skip
    assert all(("(if the cache were on)" in r[3]) == ("--no-cache" in options) for r in held), held
    # a kind of layer's keys and values: a position's numbers of K (and of V), as the terminal counts them
    for r in held:
        if r[0].startswith("KV cache, ") and "this run" not in r[0]:
            numbers = re.search(r"layers? x ([\d,]+(?: \+ [\d,]+)?) numbers", r[3]).group(1)
            assert f"layers x {numbers} numbers" in terminal or f"layer x {numbers} numbers" in terminal, (r, terminal)


# --- the hybrids' pages: their memory and their scans, as the terminal has them ---------------------------------
@pytest.fixture(scope="session")
def hybrid_pages(tmp_path_factory):
    """The pages, ledgers and terminal reports of a hybrid of each kind: Qwen3.5's linear attention beside full
    attention (the issue's own command), Nemotron-H's Mamba-2, attention and MLP layers, Mamba-2 alone."""
    out = tmp_path_factory.mktemp("hybrids")
    pages = {}
    for preset, tokens in (("qwen3.5-27b", "1000"), ("nemotron-h-8b", "1000"), ("mamba-codestral-7b", "300")):
        html, ledger = out / f"{preset}.html", out / f"{preset}.json"
        result = run_cli("count", "--preset", preset, "--tokens", tokens, "--html", str(html), "--json", str(ledger))
        assert result.returncode == 0, result.stderr
        pages[preset] = html, json.loads(ledger.read_text()), result.stdout
    return pages


@pytest.mark.parametrize("preset, states, attending", [
    ("qwen3.5-27b", {"linear_attention": "157 MB"}, {"full_attention": 16}),
    ("nemotron-h-8b", {"mamba": "104 MB"}, {"full_attention": 4}),
    ("mamba-codestral-7b", {"mamba": "276 MB"}, {}),
])  # fmt: skip
def test_a_hybrid_s_memory_table_is_its_terminal_s_kind_of_layer_by_kind(page_of, hybrid_pages, preset, states,
                                                                          attending):  # fmt: skip
    """K and V of the layers that attend (16 of Qwen3.5-27B's 64, 4 of Nemotron-H-8B's 52: the page said 64 and 52),
    each recurrent layer's state, the same at any context (absent from the page before), the whole cache: the rows'
    bytes are the terminal's, line by line."""
    import output_checks as check

    html, document, terminal = hybrid_pages[preset]
    page = page_of(html)
    assert page.console == [], page.console
    rows = table_rows(page, ".memory-table tbody tr")
    names = check.memory_rows_are_the_terminal_s(rows, terminal, document)
    by_name = {r[0]: r for r in rows}
    for kind, human in states.items():
        row = by_name[f"state, {kind} layers"]
        assert row[2] == human and row[3].endswith("the same at any context"), row
        assert f"{human}, the same at any context" in terminal
    for kind, layers in attending.items():
        assert f"x {layers} {kind} layers" in by_name[f"KV cache, {kind} layers"][3]
    assert not [name for name in names if name.startswith("KV cache, this run")]  # no "K and V of all 64 layers"
    assert {"cache, this run", "cache, whole context"} <= set(names)


@pytest.mark.parametrize("preset", ["qwen3.5-27b", "mamba-codestral-7b"])
def test_the_recurrent_form_is_on_the_page_beside_the_chunked_scan(page_of, hybrid_pages, preset):
    """Each scan product's cost position by position, in the block table as in count's (its last column), and the
    pass's scans in chunks against it, as count's totals line says them."""
    html, document, terminal = hybrid_pages[preset]
    page = page_of(html)
    view = f"{current_view(0)} .kind-view.current"
    headers = page.evaluate(f"Array.from(document.querySelectorAll('{view} .block-table th')).map(h => h.innerText)")
    assert headers[-1] == "recurrent form (MACs)"
    rows = {r[0]: r for r in table_rows(page, f"{view} .block-table tbody tr")}
    ops = {r["op"]: r for r in document["phases"][0]["layers"][0]["ops"]}
    scanned = [op for op, r in ops.items() if "recurrent_macs" in r]
    assert scanned and all(number(rows[op][-1]) == ops[op]["recurrent_macs"] for op in scanned)
    assert number(rows["block"][-1]) == sum(r.get("recurrent_macs", r["macs"]) for r in ops.values())
    said = re.search(r"Recurrent form: the scans over the prompt took ([\d,]+) MACs .* in chunks, ([\d,]+) ", terminal)
    note = page.evaluate(
        f"Array.from(document.querySelectorAll('{current_view(0)} p.note')).map(p => p.innerText)"
        ".find(t => t.startsWith('Recurrent form'))"
    )
    assert f"took {said.group(1)} MACs" in note and f"in chunks, {said.group(2)} " in note, (said.groups(), note)
    whole = page.evaluate("document.querySelector('p.recurrent').innerText")
    assert f"{document['totals']['recurrent_macs']:,} MACs" in whole and f"{document['totals']['macs']:,}" in whole


AXIS_OVERLAPS = """(selector => { const boxes = Array.from(document.querySelectorAll(selector)).map(t => {
    const r = t.getBoundingClientRect(); return {text: t.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom}; });
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b) out.push(a.text + ' / ' + b.text);
  }
  return [boxes.length, out]; })"""


def test_no_two_labels_of_the_tokens_per_expert_heatmap_overlap(page_of, deepseek_page, qwen3moe_128_page):
    """Past expert 99 the labels ran together ("99102105108..."): every label is apart from every other, with 128
    experts (Qwen3-30B-A3B) and 256 (DeepSeek-V3), and the last expert still has its place."""
    for html, experts in ((qwen3moe_128_page, 128), (deepseek_page[0], 256)):
        page = page_of(html, scripts=False)
        count, overlaps = page.evaluate(f"({AXIS_OVERLAPS})('svg.expert-load text.axis')")
        assert overlaps == [] and count > 20, (html.name, overlaps)
        labels = page.evaluate(
            "Array.from(document.querySelectorAll('svg.expert-load text.axis')).map(t => t.textContent)"
        )
        numbers = [int(t) for t in labels if t.isdigit()]
        assert max(numbers) > experts - 20 and numbers[1] - numbers[0] in (1, 2, 5, 10, 20), labels[:6]
        assert page.evaluate(TEXT_OUTSIDE) == []


@pytest.fixture(scope="session")
def qwen3moe_128_page(tmp_path_factory):
    html = tmp_path_factory.mktemp("experts-128") / "qwen3moe.html"
    result = run_cli("count", "--preset", "qwen3-30b-a3b", "--tokens", "100", "--new-tokens", "2", "--html", str(html))
    assert result.returncode == 0, result.stderr
    return html


def test_numbers_json_cannot_hold_reach_the_page_and_its_script(tmp_path, page_of, capsys):
    """A run that gives NaN (a weight that is NaN, a float16 pass that overflows) still writes its page: JSON has no NaN
    or infinity, so each sits in the page's data as {"mt-nonfinite": "NaN"}, which the script reads back as the
    number (json.dumps refused the page before: a traceback). Marked only where one is: a finite page has no mark."""
    from safetensors.numpy import load_file

    from conftest import write_gpt2
    from minitransformer.cli import main
    from minitransformer.views.html_report import NONFINITE, _json_for_script

    directory = write_gpt2(tmp_path / "nan-gpt2")
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["transformer.h.0.attn.c_attn.weight"][0, 0] = np.nan
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    html = tmp_path / "nan.html"
    assert main(["generate", "Hi", "--model", str(directory), "--max-new-tokens", "2", "--html", str(html)]) == 0
    capsys.readouterr()
    data = embedded_data(html.read_text())
    candidates = data["document"]["candidates"]
    assert candidates and all(c["probability"] == {NONFINITE: "NaN"} for c in candidates), candidates[:2]
    marked, met = _json_for_script([1.5, float("inf"), -float("inf"), {"x": [float("nan")]}])
    assert met and json.loads(marked) == [
        1.5, {NONFINITE: "Infinity"}, {NONFINITE: "-Infinity"}, {"x": [{NONFINITE: "NaN"}]}
    ]  # fmt: skip
    assert _json_for_script({"a": [1.5, 2]}) == ('{"a":[1.5,2]}', False)
    page = page_of(html)
    assert page.console == [], page.console
    # the script's own reading of the data, as report.js does it: the marks are numbers again
    read = page.evaluate(
        """(() => { var text = document.querySelector("script.mt-data").textContent;
        var data = JSON.parse(text, function (key, value) {
          return value !== null && typeof value === "object" && "mt-nonfinite" in value ? Number(value["mt-nonfinite"]) : value;
        });
        return data.document.candidates.map(c => Number.isNaN(c.probability)); })()"""
    )
    assert read == [True] * len(candidates), read


def test_keeping_the_attention_maps_leaves_the_generation_s_ledger_as_it_is():
    """The maps came from hooks on the generation's own passes, and a watched pass computes every T x t score: past
    128 positions `generate --html` counted the dense prefill, while the other way (no cache) was counted in row
    chunks, so the page's cache "saved" -1.2 M MACs on the prefill. The generation now runs unwatched; its maps come
    from one pass of their own, the same weights."""
    from shared_checks import random_model

    model = random_model(n_layer=2, n_head=2, d_head=8, n_inner=32, vocab=100, n_positions=300, seed=4)
    prompt = [(7 * i + 3) % 100 for i in range(200)]
    plain = model.generate(prompt, max_new_tokens=3)
    drawn = model.generate(prompt, max_new_tokens=3, attention=[0, 1])
    assert drawn.new_tokens == plain.new_tokens
    assert [p.macs for p in drawn.ledger.phases] == [p.macs for p in plain.ledger.phases]
    book = drawn.ledger
    assert all(ours <= other for ours, other in zip([p.macs for p in book.phases][1:], book.other_way_macs[1:]))
    ids = prompt + drawn.new_tokens[:-1]
    _, cache = model.run_with_cache(ids, names="blocks.*.attn.weights")
    for layer in (0, 1):
        kept, whole = drawn.attention.weights[layer], cache[f"blocks.{layer}.attn.weights"]
        seen = visible(len(ids))
        np.testing.assert_array_equal(kept[:, seen], whole[:, seen])
        assert np.isnan(kept[:, ~seen]).all()


@pytest.mark.parametrize("use_cache", [True, False])
def test_the_passes_section_says_how_the_steps_ran(small_gpt2, use_cache):
    """Without the cache, the section opened as with it ("each decode step then computes one new position, which
    reads ... from the KV cache"), the header and table saying the cache was off."""
    out = small_gpt2.generate([464, 3139, 286, 4881, 318], max_new_tokens=3, use_cache=use_cache)
    section = generation_page(out).split('<section class="passes">')[1].split("</section>")[0]
    off = "is off: each step recomputes the whole sequence so far"
    assert (off in section) != use_cache and ("each decode step then computes one new position" in section) == use_cache
