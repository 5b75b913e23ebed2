"""Bytes per product and the roofline on named hardware (count --hardware), against hand-worked closed forms and the
two limits the numbers must respect: a decode step cannot beat reading its weights once, a prefill cannot beat its
MACs at the peak."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli
from minitransformer.families.table import ARCHITECTURES, PRESETS
from minitransformer.verbs.count import count_generation, decode_at
from minitransformer.verbs.hardware import MACHINES, machine, names, probe_this_cpu
from minitransformer.verbs.memory import experts_read, operand_bytes, weights_outside_products
from minitransformer.verbs.params import parameters
from minitransformer.verbs.roofline import DecodeSteps, pass_time, roofline


def test_gpt2_small_decode_at_context_1024_in_float16_by_hand():
    """Per layer: the weights once (12 D^2), the KV cache read (K^T and V, 2 t D), and the activations (each product's
    A and output: 18 D + 2 H t); then the logits (D V of the tied embedding) and, outside the products, the biases
    and LayerNorm gains whole (13 D a layer + 2 D) and one row of each embedding table. 2 bytes a number."""
    D, H, F, V, L, t = 768, 12, 3072, 50257, 12, 1024
    step = decode_at(PRESETS["gpt2"], t)  # after 1,023 cached positions (count's --new-tokens could not reach it)
    assert (step.tokens, step.context) == (1, t)
    per_op = {r.op: operand_bytes(r, 2) for r in step.block if r.kind == "matmul"}
    assert per_op == {
        "qkv": {"activations": 2 * (D + 3 * D), "weight": 2 * 3 * D * D},
        "scores": {"activations": 2 * (D + H * t), "kv_cache": 2 * D * t},  # Q [H, 1, dh] in, S [H, 1, t] out
        "mix": {"activations": 2 * (H * t + D), "kv_cache": 2 * D * t},
        "out": {"activations": 2 * (D + D), "weight": 2 * D * D},
        "mlp.up": {"activations": 2 * (D + F), "weight": 2 * D * F},
        "mlp.down": {"activations": 2 * (F + D), "weight": 2 * F * D},
    }
    layer = {kind: sum(b.get(kind, 0) for b in per_op.values()) for kind in ("weight", "kv_cache", "activations")}
    assert layer == {"weight": 2 * 12 * D * D, "kv_cache": 2 * 2 * t * D, "activations": 2 * (18 * D + 2 * H * t)}
    decode = pass_time(PRESETS["gpt2"], step.weighted(), step, machine("h100-sxm"), "float16")
    assert decode.context == t
    outside = 2 * (L * 13 * D + 2 * D + 2 * D)
    assert decode.outside_bytes == outside
    assert decode.bytes == {"activations": L * layer["activations"] + 2 * (D + V), "weight": L * layer["weight"]
                            + 2 * D * V, "kv_cache": L * layer["kv_cache"], "outside_products": outside}  # fmt: skip
    # Every product of the step is memory-bound on an H100: the step takes its bytes at the bandwidth.
    assert all(o.bound == "memory" for o in decode.ops)
    assert decode.time_s == pytest.approx(decode.total_bytes / 3.35e12, rel=1e-12)


def test_llama3_8b_on_an_h100_respects_both_limits():
    """count --preset llama3-8b --hardware h100-sxm --dtype bfloat16 after a 1,000-token prompt: decode no faster than
    reading the weights a step reads (one row of the embedding table, all the rest) and within 5% of it; the prefill
    no faster than its MACs at the peak and within 25% (scores, mix and the one row of logits are memory-bound)."""
    result = run_cli("count", "--preset", "llama3-8b", "--tokens", "1000", "--hardware", "h100-sxm", "--dtype",
                     "bfloat16", "--json", "-")  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    hw = document["hardware"]
    assert hw["name"] == "h100-sxm" and hw["peak_flops"] == 989.5e12 and hw["bandwidth_bytes_per_s"] == 3.35e12
    config = PRESETS["llama3-8b"]
    D, V = config.n_embd, config.vocab_size
    step_weights = 2 * (parameters(config).total - V * D + D)  # untied: the embedding is read a row at a time
    limit = hw["bandwidth_bytes_per_s"] / step_weights
    assert 0.95 * limit <= hw["decode_tokens_per_s"] <= limit
    assert hw["decode_context"] == 1001
    prefill_macs = document["phases"][0]["macs"]
    floor = 2 * prefill_macs / hw["peak_flops"]
    assert floor <= hw["prefill_s"] <= 1.25 * floor
    memory_bound = {o["op"] for o in hw["prefill"]["ops"] if o["bound"] == "memory"}
    assert memory_bound == {"scores", "mix", "logits"}
    text = result.stderr
    assert "These are roofline bounds, not measurements" in text
    assert "the memory-bound products add the rest (scores, mix, logits)" in text


def _recurrent_state_moved(config) -> int:
    """Numbers of state a decode step moves in a model's recurrent layers, from the recurrent form's equations: a
    Gated DeltaNet layer reads its state S [Hv, dk, dv] twice (S^T k before the update, S^T q after it) and writes
    its update k (x) delta once; a Mamba-2 layer writes its update x_dt (x) B [Hs, P, N] once and reads the state
    once (h C); both read the K - 1 inputs their causal conv keeps of each of its channels and write them back."""
    kinds = list(config.layer_types)
    if config.family == "qwen3_5":
        Hk, Hv, dk, dv, K = (config.linear_key_heads, config.linear_value_heads, config.linear_key_dim,
                             config.linear_value_dim, config.linear_kernel)  # fmt: skip
        per_layer = 3 * Hv * dk * dv + 2 * (K - 1) * (2 * Hk * dk + Hv * dv)
        return kinds.count("linear_attention") * per_layer
    Hs, P, N, Ng, K = config.ssm_heads, config.ssm_head_dim, config.state_size, config.n_groups, config.conv_kernel
    return kinds.count("mamba") * (2 * Hs * P * N + 2 * (K - 1) * (Hs * P + 2 * Ng * N))


@pytest.mark.parametrize("preset", ["qwen3.5-27b", "mamba-codestral-7b", "nemotron-h-8b"])
def test_a_hybrid_decode_step_reads_its_weights_once_the_kv_cache_of_its_attention_and_its_state(preset):
    """A decode step at context t = 1,001 in bfloat16: every parameter once but the embedding table (a row of it),
    the keys and values of the attention layers alone (2 Hkv dh t each), and the recurrent layers' state, read and
    written, the same at any context (_recurrent_state_moved); so no decode rate beats the bandwidth over those
    bytes, and the rate stays within 1% of it (the activations are the rest)."""
    config, size, t = PRESETS[preset], 2, 1001
    attention = list(config.layer_types).count("full_attention")
    assert attention > 0 or config.family == "mamba2"
    steps = {}
    for context in (t, 20):
        step = decode_at(config, context)
        steps[context] = pass_time(config, step.weighted(), step, machine("h100-sxm"), "bfloat16")
    decode = steps[t]
    assert config.tie_word_embeddings is False
    D, V = config.n_embd, config.vocab_size
    assert decode.bytes["weight"] + decode.bytes["outside_products"] == size * (parameters(config).total - V * D + D)
    kv = attention * 2 * config.n_kv_head * config.head_dim * t * size if attention else 0
    assert decode.bytes.get("kv_cache", 0) == kv
    state = size * _recurrent_state_moved(config)
    assert decode.bytes["state"] == state == steps[20].bytes["state"] > 0
    least = decode.bytes["weight"] + decode.bytes["outside_products"] + kv + state
    assert least <= decode.total_bytes <= 1.01 * least
    assert 1 / decode.time_s <= machine("h100-sxm").bandwidth / least
    # The state's products read the state (B) or write it (their output), the conv reads its windows as a view
    ops = {o.op: o.bytes for o in decode.ops}
    conv = next(op for op in ops if op.endswith(".conv"))
    assert set(ops[conv]) == {"activations", "weight", "state"}
    for op, moved in ops.items():
        if op.startswith(("delta.", "ssm.input", "ssm.output")):
            assert set(moved) == {"activations", "state"}, (op, moved)


def test_a_hybrid_s_count_with_hardware_writes_the_roofline_of_its_scan(tmp_path):
    """count --preset qwen3.5-27b --tokens 1000 --hardware h100-sxm --json --html: the JSON's hardware object has the
    state among a decode step's bytes, the prefill's scan products read and write it, and the page draws every
    product of both passes as a point."""
    html, out = tmp_path / "count.html", tmp_path / "count.json"
    result = run_cli("count", "--preset", "qwen3.5-27b", "--tokens", "1000", "--hardware", "h100-sxm", "--json",
                     str(out), "--html", str(html))  # fmt: skip
    assert result.returncode == 0, result.stderr
    hw = json.loads(out.read_text())["hardware"]
    assert hw["name"] == "h100-sxm" and hw["prefill_s"] > 0 and hw["decode_tokens_per_s"] > 0
    assert set(hw["decode"]["bytes_by_operand"]) >= {"weight", "kv_cache", "state", "activations"}
    prefill = {o["op"]: o["bytes_by_operand"] for o in hw["prefill"]["ops"]}
    assert "state" in prefill["delta.read"] and "state" in prefill["delta.query"] and "state" in prefill["delta.write"]
    assert "state" not in prefill["delta.kk"] and "state" not in prefill["delta.mix"]  # keys, chunks: activations
    page = html.read_text()
    assert page.count('class="point') == len(hw["prefill"]["ops"]) + len(hw["decode"]["ops"])
    assert "the state's products too" in result.stdout + result.stderr


def test_a_mixture_reads_only_the_experts_that_got_tokens():
    """Balanced routing spreads B T k rows over min(E, B T k) experts; worst sends them all to k. A decode step of one
    sequence reads k experts' weights: its products read what `params` calls active, less the embedding table (a row
    is looked up) and the norms' gains (read outside the products)."""
    config = PRESETS["mixtral-8x7b"]
    E, k = config.n_experts, config.top_k
    for T in (1, 2, 3, 4, 5):
        prefill = count_generation(config, T, 1).prefill
        assert {experts_read(r) for r in prefill.block if r.breakdown is not None} == {min(E, T * k)}
    worst = count_generation(config, 100, 1, routing="worst").prefill
    assert {experts_read(r) for r in worst.block if r.breakdown is not None} == {k}
    count = count_generation(config, 100, 2)
    p = parameters(config)
    bound = roofline(count, "h200", "bfloat16")
    norms = p.kinds["norms"]
    assert bound.decode is not None
    assert bound.decode.bytes["weight"] == 2 * (p.active - config.vocab_size * config.n_embd - norms)
    assert bound.prefill.bytes["weight"] == 2 * (p.total - config.vocab_size * config.n_embd - norms)


@pytest.mark.parametrize("preset", sorted({next(iter(a.presets)) for a in ARCHITECTURES.values()}))
def test_the_parameters_read_outside_the_products_are_the_small_rest(preset):
    """Every parameter a product reads is counted once (B a weight: Record.b_operand), and what is left (norms' gains,
    biases, an embedding row a position) is a small positive rest: a family whose products' B were taken for weights
    when they are a cache or a state would break it."""
    config = PRESETS[preset]
    prefill = count_generation(config, 4, 1).prefill
    outside = weights_outside_products(config, prefill.weighted(), 4)
    assert 0 < outside < 0.005 * parameters(config).total


def test_the_compute_bound_batch_is_the_least_that_is():
    count = count_generation(PRESETS["llama3-8b"], 100, 2)
    bound = roofline(count, "a100-80gb", "bfloat16")
    batch = bound.compute_bound_batch
    assert batch is not None and batch > 1
    steps = DecodeSteps(count, bound.decode.context, machine("a100-80gb"), "bfloat16")
    before, at = steps.at(batch - 1), steps.at(batch)
    assert before.compute_s < before.memory_s and at.compute_s >= at.memory_s
    weights = bound.weights_compute_bound_batch
    assert weights is not None and weights < batch  # the KV cache's products never turn compute-bound
    # At a long context the KV cache a sequence adds outweighs its MACs: no batch does (llama3-8b at 1,000 tokens).
    long = roofline(count_generation(PRESETS["llama3-8b"], 1000, 1), "h100-sxm", "bfloat16")
    assert long.compute_bound_batch is None
    assert long.per_sequence["memory_s"] > long.per_sequence["compute_s"]


def test_a_step_compute_bound_at_one_sequence_says_what_the_second_adds():
    """Where one sequence's step is compute-bound already (a machine of little compute and much bandwidth), what one
    more sequence adds is the second's: the search's batch less one was batch 0 (counted as 1: every figure 0), then
    refused as a batch below 1."""
    from minitransformer.verbs.hardware import Machine

    slow = Machine("slow", "little compute, much bandwidth", {"float32": 1e9}, 100e9, "made up for the test")
    count = count_generation(PRESETS["gpt2"], 16, 2)
    bound = roofline(count, slow)
    assert bound.compute_bound_batch == 1 and bound.per_sequence["batch"] == 2
    steps = DecodeSteps(count, bound.decode.context, slow, "float32")
    one, two = steps.at(1), steps.at(2)
    assert bound.per_sequence["macs"] == two.macs - one.macs == one.macs > 0, (bound.per_sequence, one.macs)


def test_every_machine_has_its_source_and_every_format():
    for m in MACHINES.values():
        assert set(m.peak_flops) == {"float32", "bfloat16", "float16"} and m.bandwidth > 0
        assert m.source and m.peak("bfloat16") >= m.peak("float32")


def test_this_cpu_is_probed():
    cpu = probe_this_cpu(buffer_bytes=2**24, sizes=(256,), reps=1)
    assert cpu.name == "this-cpu" and cpu.bandwidth > 1e8 and cpu.peak("float32") > 1e8
    assert cpu.peak("bfloat16") == cpu.peak("float32") and "probed" in cpu.source
    bound = roofline(count_generation(PRESETS["gpt2"], 5, 2), cpu, "float32")
    assert bound.prefill_s > 0 and bound.decode_tokens_per_s > 0


def test_an_unknown_machine_is_refused_in_one_line_naming_them_all(tmp_path):
    out = tmp_path / "count.json"
    result = run_cli("count", "--preset", "gpt2", "--tokens", "5", "--hardware", "h1000", "--json", str(out))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert all(name in result.stderr for name in names()) and "h1000" in result.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def roofline_page(tmp_path_factory):
    """A Mixtral count's page and JSON with --hardware: the prefill's and a decode step's products on the roofline."""
    out = tmp_path_factory.mktemp("roofline")
    html, document = out / "count.html", out / "count.json"
    result = run_cli("count", "--preset", "mixtral-8x7b", "--tokens", "300", "--new-tokens", "3", "--hardware", "mi300x",
                     "--dtype", "bfloat16", "--html", str(html), "--json", str(document))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return html, json.loads(document.read_text())


def test_the_page_draws_each_product_as_a_point_on_the_roof(roofline_page):
    """In a real browser: no script error; one point per product of the prefill (circles) and of the decode step
    (squares), each with its JSON numbers in its tooltip; the compute-bound ones on the flat roof, the memory-bound
    ones below it, left of the ridge; hovering one shows its numbers."""
    import os

    from browser import Chromium

    binary = Chromium.find()
    if binary is None:
        if os.environ.get("MINITRANSFORMER_REQUIRE_BROWSER"):
            pytest.fail("MINITRANSFORMER_REQUIRE_BROWSER is set but no Chromium is on PATH")
        pytest.skip("no Chromium on this machine: the page is not opened in a browser here")
    html, document = roofline_page
    hw = document["hardware"]
    browser = Chromium(binary)
    try:
        page = browser.open(html)
        assert page.console == []
        points = page.evaluate("""Array.from(document.querySelectorAll('svg.roofline-chart .point')).map(p => {
            const box = p.getBoundingClientRect();
            return {phase: p.classList.contains('prefill') ? 'prefill' : 'decode', op: p.dataset.op, tip: p.dataset.tip,
                    x: box.x + box.width / 2, y: box.y + box.height / 2, tag: p.tagName}; })""")
        expected = [(phase, o) for phase in ("prefill", "decode") for o in hw[phase]["ops"]]
        assert [(p["phase"], p["op"]) for p in points] == [(phase, o["op"]) for phase, o in expected]
        assert {p["tag"] for p in points if p["phase"] == "prefill"} == {"circle"}
        assert {p["tag"] for p in points if p["phase"] == "decode"} == {"rect"}
        for p, (_, o) in zip(points, expected):
            assert f"{o['macs']:,} MACs" in p["tip"] and f"{o['bound']}-bound" in p["tip"]
        flat = [p["y"] for p, (_, o) in zip(points, expected) if o["bound"] == "compute"]
        slanted = [p for p, (_, o) in zip(points, expected) if o["bound"] == "memory"]
        assert flat and slanted and max(flat) - min(flat) < 1
        assert all(p["y"] > flat[0] + 1 for p in slanted)
        ridge_x = max(p["x"] for p in slanted)
        assert all(p["x"] > ridge_x for p, (_, o) in zip(points, expected) if o["bound"] == "compute")
        rows = page.evaluate("document.querySelectorAll('table.roofline-table tbody tr').length")
        assert rows == len(expected)
        last = points[-1]  # drawn last, so on top of any point at the same place
        box = page.evaluate("""(() => { const all = document.querySelectorAll('svg.roofline-chart .point');
            const p = all[all.length - 1];
            p.scrollIntoView({block: 'center'}); const b = p.getBoundingClientRect();
            return [b.x + b.width / 2, b.y + b.height / 2]; })()""")
        page.move_mouse(*box)
        tip = page.evaluate("document.querySelector('.tip').hidden ? '' : document.querySelector('.tip').textContent")
        assert tip == last["tip"]
    finally:
        browser.close()


def test_the_documented_table_of_machines_is_the_code_s():
    """Each machine's row in the README (or wherever the docs moved it) gives the figures verbs/hardware.py holds."""
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    for m in MACHINES.values():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{m.name}` |"))
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert cells[1] == m.label
        assert float(cells[2]) * 1e12 == m.peak("float32")
        assert float(cells[3].replace(",", "")) * 1e12 == m.peak("bfloat16") == m.peak("float16")
        assert cells[4] == f"{m.bandwidth / 1e12:g} TB/s" and cells[5] == f"{m.balance('bfloat16'):,.0f}"


class Margins(DecodeSteps):
    """A batch search over a made-up margin of the batch (the step at batch b stands for b itself), every batch asked
    recorded."""

    def __init__(self, margin) -> None:
        self.margin, self.asked = margin, []

    def at(self, batch):
        self.asked.append(batch)
        return batch


def least_by_hand(margin, largest: int = 2**20) -> int | None:
    return next((b for b in range(1, largest + 1) if margin(b) >= 0), None)


@pytest.mark.parametrize(
    "name, margin",
    [
        ("a line", lambda b: 0.37 * b - 1325.2),
        ("a line past zero at a whole batch", lambda b: 2.0 * (b - 1326)),
        ("bytes per expert read until all are, then a line", lambda b: 1e-3 * b - 0.5 * min(b, 64) - 1.0),
        ("a step", lambda b: -1.0 if b < 777 else 1.0),
        ("a root", lambda b: b**0.5 - 40.5),
        ("compute-bound at once", lambda b: 1.0),
        ("flat, then rising", lambda b: -5.0 if b < 3000 else b - 3000.5),
        ("never", lambda b: -1.0 + b * 1e-9),
    ],
)
def test_the_batch_search_finds_the_least_compute_bound_batch_in_few_steps(name, margin):
    """The least batch whose margin (compute time less memory time) is >= 0, as trying every batch finds it, whatever
    the margin's shape, so long as it rises with the batch; where it is a line past the batches that read every
    expert, two or three steps past doubling find it, where halving the bracket took ten."""
    steps = Margins(margin)
    found = steps.least_batch(margin)
    assert found == least_by_hand(margin), f"{name}: found {found}, by hand {least_by_hand(margin)}"
    distinct = sorted(set(steps.asked))  # DecodeSteps counts each batch's step once
    assert len(distinct) <= 3 * 21, f"{name}: {len(distinct)} batches counted"
    if name.startswith(("a line", "bytes")):
        doubling = [b for b in distinct if b & (b - 1) == 0]
        assert len(distinct) - len(doubling) <= 3, f"{name}: counted {distinct}"


def test_a_decode_step_at_a_long_context_and_the_largest_batch_is_counted_where_its_prefill_could_not_be():
    """The batch search counts decode steps up to LARGEST_BATCH sequences: at half a million positions a prefill of
    that batch has score tensors NumPy cannot describe even without values (2**63 elements), a decode step's one row
    of scores a head can be; it was refused halfway through count --hardware's report."""
    from dataclasses import replace

    from minitransformer.errors import UserError
    from minitransformer.verbs.count import check_run
    from minitransformer.verbs.roofline import LARGEST_BATCH

    config, t = replace(PRESETS["llama3-8b"], n_positions=2**19), 2**19
    with pytest.raises(UserError, match="more than NumPy can describe"):
        check_run(config, t - 2, 2, LARGEST_BATCH)
    step, one = decode_at(config, t, LARGEST_BATCH), decode_at(config, t)
    assert (step.context, step.batch) == (t, LARGEST_BATCH)
    assert step.macs == LARGEST_BATCH * one.macs, (step.macs, LARGEST_BATCH, one.macs)


def test_phase_time_of_a_real_run_s_prefill_is_its_count_s_and_a_ledger_is_refused():
    """phase_time (docs/api.md) on one pass of a real run's ledger: the prefill's roofline is the one a count of the
    same shapes gives (the ledger and the count agree product for product); a whole ledger was an AttributeError."""
    from minitransformer import UserError, load_model
    from minitransformer.roofline import phase_time

    model = load_model("demo")
    out = model.generate("The capital of France is", max_new_tokens=2)
    real = phase_time(model.config, out.ledger.phases[0], "h100-sxm")
    counted = roofline(count_generation(model.config, 5, 2), "h100-sxm").prefill
    assert (real.macs, real.total_bytes, real.time_s) == (counted.macs, counted.total_bytes, counted.time_s)
    assert real.macs == out.ledger.phases[0].macs > 0
    with pytest.raises(UserError, match="phase_time takes a model's config and one pass of its ledger"):
        phase_time(model.config, out.ledger, "h100-sxm")
