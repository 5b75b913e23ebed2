"""What every family owes, on every config of conformance_configs.py, against transformers' own random models:
logits at every position (past the row chunk and any window or chunk), 30 greedy tokens with our cache equal to
transformers' generate, a left-padded batch, float64 against the float64 truth, count = a real run = the closed
forms, the parameters against transformers' count on the meta device, trace's passes and the shapes it shows, every
output of generate and trace (the report, --json and the HTML report, held to each other), validate, the options it refuses (by name, as a UserError), and, for a mixture of experts, each
expert's load in the ledger as the router chose.

A family's own module (tests/families/test_<family>.py) holds only its quirks.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES, made  # noqa: E402
from shared_checks import two_byte_copy  # noqa: E402

from minitransformer import load_model  # noqa: E402
from minitransformer.engine.ledger import padding_of  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.parts.delta_rule import DECAYED_KEYS, DELTA_RULE  # noqa: E402
from minitransformer.families.table import ARCHITECTURES, model_types  # noqa: E402


def each(check: str) -> list:
    """(family, config) pairs that `check` runs on: every config, or the family's chosen few."""
    chosen = {"batch": "batch_configs", "float64": "float64_configs", "count": "count_configs"}.get(check)
    return [pytest.param(family, name, id=f"{family}-{name}") for family, spec in FAMILIES.items()
            for name in spec.config_names(getattr(spec, chosen) if chosen else None)]  # fmt: skip


def validated(family: str) -> list[str]:
    """The configs validate runs on; the first is the one trace, the HTML report and the refusals read."""
    return list(FAMILIES[family].validate or [next(iter(FAMILIES[family].configs))])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return lambda family, name: made(tmp_path_factory, family, name)


def test_every_family_in_the_table_has_its_configs_here():
    assert sorted(FAMILIES) == sorted(ARCHITECTURES), "a new family joins by adding its configs to conformance_configs"
    for family, spec in FAMILIES.items():
        assert spec.configs, family
        assert set(validated(family)) <= set(spec.configs), family
        for chosen in (spec.batch_configs, spec.float64_configs, spec.count_configs):
            assert set(chosen or ()) <= set(spec.configs), family


def test_every_model_type_the_table_reads_is_a_conformance_config_s():
    """A model type joins with a config of its own here (Mistral's and Qwen2's beside Llama's); a multimodal
    checkpoint's type is read as its text model, whose type must be here."""
    seen = {spec.hf_config(name).model_type for spec in FAMILIES.values() for name in spec.configs}
    text_of = {kind: text for a in ARCHITECTURES.values() for kind, text in a.config.multimodal.items()}
    missing = [kind for kind in model_types() if text_of.get(kind, kind) not in seen]
    assert not missing, f"model types without a conformance config: {missing}"


@pytest.mark.parametrize("family, name", each("parity"))
def test_logits_at_every_position_equal_transformers(model, family, name):
    _, ours, hf = model(family, name)
    assert ours.architecture.name == family
    assert checks.logits_at_every_position(ours, hf, FAMILIES[family].prompt_ids(name, FAMILIES[family].prompt)) <= 1


@pytest.mark.parametrize("family, name", each("parity"))
def test_a_pass_resumed_at_every_block_is_the_whole_pass_given_what_earlier_blocks_left(model, family, name):
    """run_from(layer, the stream that block read, ids=, choices= of the pass it came from) is that pass's logits at
    every block; without the choices, the same logits or a UserError that says to give them (Gemma 4's per-layer
    inputs and shared keys and values, GLM-5's shared choice of keys), never a KeyError from inside a block."""
    _, ours, _ = model(family, name)
    ids, L = FAMILIES[family].prompt_ids(name, 12, seed=3), ours.config.n_layer
    choices: dict = {}
    streams = [f"blocks.{i}.hook_resid_pre" for i in range(L)] + [f"blocks.{L - 1}.hook_resid_post"]
    whole, cache = ours.run_with_cache(ids, streams, choices=choices)
    for layer, name_of_stream in enumerate(streams):
        resumed = ours.run_from(layer, cache[name_of_stream][0], ids=ids, choices=choices, all_positions=True)
        assert np.array_equal(resumed, whole), (layer, float(np.abs(resumed - whole).max()))
        rows = np.stack([cache[name_of_stream][0]] * 2)  # patching's runs: a batch of streams, one pass's choices
        batch = ours.run_from(layer, rows, ids=ids, choices=choices, all_positions=True)
        assert max(checks.worst(row, whole) for row in batch) <= 1, (layer, checks.differ(batch[0], whole))
        try:
            alone = ours.run_from(layer, cache[name_of_stream][0], ids=ids, all_positions=True)
        except UserError as refused:
            assert "give run_from(..., choices=choices)" in str(refused), (layer, str(refused))
        else:
            assert np.array_equal(alone, whole), (layer, float(np.abs(alone - whole).max()))


@pytest.mark.parametrize("family, name", each("parity"))
def test_the_names_a_model_offers_hold_all_its_prompt_and_a_decode_step_compute(model, family, name):
    """model.stage_names, what hooks and captures may name, each block's own (tests/engine/test_hooks.py: a hybrid's
    recurrent layer names no attention weights), holds every name a prompt and a decode step compute: no hook of a
    stage that runs is refused. (It may hold more: stages of a padded batch, of prompts past an indexer's k.)"""
    _, ours, _ = model(family, name)
    ids = FAMILIES[family].prompt_ids(name, 12, seed=3)
    cache = ours.new_cache(capacity=len(ids) + 1)
    logits, prompt = ours.run_with_cache(ids, kv_cache=cache, all_positions=False)
    _, step = ours.run_with_cache([int(np.argmax(logits[-1]))], kv_cache=cache, all_positions=False)
    computed = set(prompt) | set(step)
    assert computed <= set(ours.stage_names), sorted(computed - set(ours.stage_names))[:8]


@pytest.mark.parametrize("family, name", each("parity"))
def test_a_bfloat16_checkpoint_kept_in_its_bytes_computes_what_its_upcast_does(model, family, name, tmp_path):
    """Kept in its 2 bytes (weights="stored"), a checkpoint's matrices are widened as the products read them and what
    element-wise stages read (norms' gains, a scan's decays) at load: the upcast model's float32 numbers, so its
    logits, a prompt's bit for bit, a decode step's to within its rounding (the logits' threads may differ)."""
    directory, _, _ = model(family, name)
    copy = two_byte_copy(directory, tmp_path / "bf16")
    stored, upcast = load_model(copy, weights="stored"), load_model(copy, weights="float32")
    assert stored.describe()["weights"] == "bfloat16" and "weights" not in upcast.describe()
    ids = FAMILIES[family].prompt_ids(name, 40, seed=9)
    kept, widened = stored.logits(ids), upcast.logits(ids)
    assert np.array_equal(kept, widened), float(np.abs(kept - widened).max())
    caches = stored.new_cache(), upcast.new_cache()
    for m, kv in zip((stored, upcast), caches):
        m.run(ids[:-2], cache=kv)
    for token in ids[-2:]:
        kept, widened = (m.run([token], cache=kv) for m, kv in zip((stored, upcast), caches))
        assert np.abs(kept - widened).max() <= 1e-6 * max(1.0, float(np.abs(widened).max())), (
            float(np.abs(kept - widened).max()), float(np.abs(widened).max()))  # fmt: skip


@pytest.mark.parametrize("family, name", each("greedy"))
def test_thirty_greedy_tokens_with_the_cache_equal_transformers_generate(model, family, name):
    _, ours, hf = model(family, name)
    spec, options = FAMILIES[family], FAMILIES[family].configs[name]
    tokens = checks.greedy(ours, hf, spec.prompt_ids(name, options.get("greedy", spec.greedy), seed=1))
    assert len(set(tokens)) >= options.get("distinct", spec.distinct)  # the logits spread: not one token repeated


@pytest.mark.parametrize("family, name", each("batch"))
def test_a_left_padded_batch_equals_each_row_alone_and_transformers(model, family, name):
    _, ours, hf = model(family, name)
    spec = FAMILIES[family]
    rows = [spec.prompt_ids(name, n, seed=2 + row) for row, n in enumerate(spec.batch)]
    assert checks.batch_logits(ours, hf, rows) <= 1
    even = [row[: min(spec.batch)] for row in rows]  # no row padded: no product of any pass spent on padding
    ledger = ours.generate(even, max_new_tokens=3, stop_at_eos=False, candidates=0)[0].ledger
    spent = [
        (p.step, r.layer, r.op)
        for p in ledger.phases
        for r in p.records
        if padding_of(r, list(p.pads), p.context, p.tokens)[1]
    ]
    assert (ledger.padding.dot_products, ledger.padding.macs) == (0, 0) and not spent, (ledger.padding, spent[:5])


@pytest.mark.parametrize("family, name", each("float64"))
def test_float64_within_1e_9_of_the_float64_truth(model, family, name):
    directory, _, _ = model(family, name)
    ids = FAMILIES[family].prompt_ids(name, FAMILIES[family].float64, seed=5)
    assert checks.float64_against_truth(directory, ids) <= checks.RELATIVE_FLOAT64


@pytest.mark.parametrize("family, name", each("count"))
def test_count_equals_a_real_run_and_the_closed_forms(model, family, name):
    _, ours, _ = model(family, name)
    assert checks.count_equals_a_real_run_and_the_closed_form(ours, *FAMILIES[family].count) > 0


@pytest.mark.parametrize("family, name", each("params"))
def test_parameters_equal_transformers_count_on_the_meta_device(model, family, name):
    from minitransformer.verbs.params import parameters

    _, ours, hf = model(family, name)
    c = ours.config
    total = checks.transformers_parameters(FAMILIES[family].hf_config(name))
    assert parameters(c).total == ours.architecture.formulas.parameters(c) == total == sum(
        p.numel() for p in hf.parameters())  # fmt: skip
    assert parameters(c).active == ours.architecture.formulas.active_parameters(c) <= total


@pytest.mark.parametrize("family", FAMILIES)
def test_trace_runs_the_passes_of_generate_and_shows_the_model_s_shapes(model, family):
    _, ours, _ = model(family, validated(family)[0])
    ids = FAMILIES[family].prompt_ids(validated(family)[0], 7, seed=8)
    shown = checks.traced_shapes(ours, ids)
    _, cache = ours.run_with_cache(ids)
    assert {f"blocks.{i}" for i in range(ours.config.n_layer)} <= {n.rsplit(".", n.count(".") - 1)[0] for n in shown}
    for name, shape in shown.items():  # each block's stage as the pass computed it (the logits: the last row only)
        if name.startswith("blocks."):
            assert name in cache and list(cache[name].shape) == shape, name
    folded = checks.folded_blocks(ours, ids, shown=[0])  # Gemma 4's and DeepSeek-V4's blocks were dropped unsaid
    L = ours.config.n_layer
    assert folded == [[f"blocks.{i}" for i in range(1, L)]] * 2, folded


@pytest.mark.parametrize("family", FAMILIES)
def test_every_output_of_generate_and_trace(model, family, tmp_path, capsys):
    """generate's report, --json and --html, and trace's report and --html, from the CLI, each held to the others
    (tests/output_checks.py): a family joins the suite only with every output of both; count's are held on a preset
    of every family (tests/views/test_every_output.py)."""
    import output_checks as check

    from minitransformer.cli import main

    directory, ours, _ = model(family, validated(family)[0])
    ids = ",".join(map(str, FAMILIES[family].prompt_ids(validated(family)[0], 6, seed=9)))
    ledger, page, traced = tmp_path / "generate.json", tmp_path / "generate.html", tmp_path / "trace.html"
    assert main(["generate", "--model", str(directory), "--ids", ids, "--max-new-tokens", "3", "--json", str(ledger),
                 "--html", str(page)]) == 0  # fmt: skip
    terminal, document, html = capsys.readouterr().out, json.loads(ledger.read_text()), page.read_text()
    assert [p["step"] for p in document["phases"]] == [0, 1, 2] and len(document["new_tokens"]) == 3
    check.page_carries_the_ledger(html, document)
    check.totals_are_the_terminal_s(html, terminal, document)
    check.passes_are_the_json_s(html, document)
    assert all(json.dumps(r["op"]) in html for p in document["phases"] for layer in p["layers"] for r in layer["ops"])

    assert main(["trace", "--model", str(directory), "--ids", ids, "--new-tokens", "2", "--html", str(traced)]) == 0
    terminal, html = capsys.readouterr().out, traced.read_text()
    data = check.page_data(html)
    assert data["report"] == "trace" and [p["step"] for p in data["document"]["phases"]] == [0, 1]
    assert data["document"]["prompt_tokens"] == [int(i) for i in ids.split(",")]
    check.totals_are_the_terminal_s(html, terminal, data["document"])
    check.passes_are_the_json_s(html, data["document"])
    assert {r["op"] for p in data["document"]["phases"] for run in p["layers"] for r in run["ops"]} == {
        r["op"] for p in document["phases"] for layer in p["layers"] for r in layer["ops"]
    }  # the same stages as generate's passes
    assert "greedy continuation" in terminal.splitlines()[-2] and f"report written to {traced}" in terminal


@pytest.mark.parametrize("family, name", [pytest.param(f, n, id=f"{f}-{n}") for f in FAMILIES for n in validated(f)])
def test_validate_says_all_ok_and_names_transformers_class(model, family, name):
    from minitransformer.verbs.validate import validate

    _, ours, hf = model(family, name)
    out = io.StringIO()
    assert validate(ours, steps=FAMILIES[family].validate_steps, out=out) is True, out.getvalue()
    text = out.getvalue()
    assert f"transformers {transformers.__version__} {type(hf).__name__}, float32" in text
    assert text.endswith("all OK\n") and "NOT OK" not in text
    assert all(said in text for said in FAMILIES[family].validate_says)


@pytest.mark.parametrize("family", FAMILIES)
def test_options_it_does_not_compute_are_refused_by_name(model, family, tmp_path):
    directory, _, _ = model(family, next(iter(FAMILIES[family].configs)))
    for change, refused in FAMILIES[family].refused:
        hf = json.loads((directory / "config.json").read_text()) | change
        (tmp_path / "config.json").write_text(json.dumps(hf))
        if not (tmp_path / "model.safetensors").exists():
            (tmp_path / "model.safetensors").symlink_to(directory / "model.safetensors")
        with pytest.raises(UserError, match=refused) as refusal:
            load_model(tmp_path)
        assert "\n" not in str(refusal.value), change


def routed_experts(family: str, name: str) -> int:
    config = FAMILIES[family].hf_config(name)
    return next((getattr(config, key) for key in ("num_local_experts", "num_experts", "n_routed_experts")
                 if getattr(config, key, None)), 0)  # fmt: skip


@pytest.mark.parametrize("family, name", [p for p in each("experts") if routed_experts(*p.values)])
def test_each_expert_computed_what_the_router_sent_it(model, family, name):
    """Every config with experts: each routed expert product's breakdown is the router's choice counted, expert by
    expert (a ledger that gave one expert another's tokens would pass every total)."""
    _, ours, _ = model(family, name)
    assert ours.config.n_experts == routed_experts(family, name)
    assert checks.expert_loads_follow_the_router(ours, FAMILIES[family].prompt_ids(name, 150, seed=7)) > 0


def selects(config) -> bool:
    """Whether a model chooses among experts or keys (a stage of indices): a mixture of experts, an indexer."""
    return any(getattr(config, key, None) for key in ("n_experts", "index_topk", "compressed_topk"))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_selection_s_replacement_must_be_indices_it_could_have_chosen(model, family):
    """A stage of indices (the experts a router chose, the keys an indexer chose) replaced by a hook, on the family's
    first config that has one: the same indices give the same logits; indices no row has (experts past E, keys past
    t, below -1) or numbers that are not whole are refused in words. A Mixtral given experts 100 to 103 of 4 read
    none of them, silently: 0 expert MACs, logits 4.7 off. A model that selects nothing has no stage of indices."""
    names = list(FAMILIES[family].configs)
    name = next((n for n in names if selects(model(family, n)[1].config)), names[0])
    _, ours, _ = model(family, name)
    ids = FAMILIES[family].prompt_ids(name, 12, seed=3)
    _, cache = ours.run_with_cache(ids, names=lambda n: True, all_positions=False)
    first: dict[str, str] = {}  # each kind of selection, at its first layer
    for stage, tensor in cache.items():
        if tensor.dtype.kind in "iu":
            first.setdefault(stage.split(".", 2)[-1], stage)
    assert bool(first) == selects(ours.config), (family, name, first)
    logits = ours.logits(ids)
    for stage in first.values():
        with ours.add_hook(stage, lambda t, n: t.copy()):
            np.testing.assert_allclose(ours.logits(ids), logits, rtol=0, atol=1e-5)  # a watched pass's layout
        for bad, says in ((lambda t, n: t + 10**6, "its values are indices"),
                          (lambda t, n: t * 0 - 2, "its values are indices"),
                          (lambda t, n: t + 0.5, "whole numbers")):  # fmt: skip
            with ours.add_hook(stage, bad), pytest.raises(UserError, match=says):
                ours.logits(ids)


# The values a delta-rule layer computes in float32 at every precision (Tape.in_float32, docs/precision.md): the rule's
# own stages, and the layer's norms of q and k, q's scale and the decay, which transformers computes inside its rule
IN_FLOAT32 = frozenset(name for stage in (*DELTA_RULE.values(), DECAYED_KEYS) for name in stage.names) | {
    "linear_attn.q_normed", "linear_attn.k_normed", "linear_attn.q_scaled", "linear_attn.g"}  # fmt: skip


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_stage_of_a_bfloat16_pass_holds_bfloat16_numbers(model, family):
    """--precision bfloat16 stores every stage's values in bfloat16 (docs/precision.md): each captured value, of a
    prompt past the chunks, windows and top-k, and of a decode step, is a bfloat16 number. A Gated DeltaNet's solve
    wrote its rows' differences in float32 (linear_attn.solved: 487 of 1,280 values not bfloat16). A delta rule's own
    stages are the exception: they compute in float32, as transformers' does (IN_FLOAT32 above)."""
    import ml_dtypes

    name = next(iter(FAMILIES[family].configs))
    directory, _, _ = model(family, name)
    ours = load_model(directory, precision="bfloat16")
    ids = FAMILIES[family].prompt_ids(name, 70, seed=5)
    cache = ours.new_cache(capacity=len(ids) + 1)
    logits, prompt = ours.run_with_cache(ids, names=lambda n: True, kv_cache=cache, all_positions=False)
    _, step = ours.run_with_cache([int(np.argmax(logits[-1]))], names=lambda n: True, kv_cache=cache)
    for when, captured in (("prompt", prompt), ("decode step", step)):
        for stage, value in captured.items():
            if stage.split(".", 2)[-1] in IN_FLOAT32:  # a delta rule's, in float32 as transformers computes it
                continue
            if value.dtype == np.float32:
                wide = value.astype(ml_dtypes.bfloat16).astype(np.float32)
                apart = ~((wide == value) | (np.isnan(wide) & np.isnan(value)))
                assert not apart.any(), (when, stage, int(apart.sum()), value.size)
