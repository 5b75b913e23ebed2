"""The HTML report: one self-contained page that shows where the dot products of a run live.

The page is a view of the run's JSON ledger (the document `--json` writes), which it carries inside
itself in a `<script type="application/json">`: nothing is counted here. Everything is drawn on the
server side, in Python: tables, the block diagram and the charts as inline SVG, attention maps as
inline PNG, so the page reads and prints with scripts off, opened from a file, offline. The small
inline script (report.js) only adds what needs a hand on the mouse: the full record under the
pointer, choosing a pass and a layer, replaying the answer token by token.

Identical layers are folded as count.py folds them: a phase's `layers` become runs of identical
blocks, `{"layer": first, "repeat": k, ...}` standing for layers first .. first + k - 1
(`fold_layers`, undone exactly by `unfold_layers`), and decode steps past the first few and the last
two carry their totals only, as `count --json` writes them. So a 96-layer count of 1,000 tokens makes
a page of a few hundred kilobytes.

Entry points: the `*_data` functions (generation, batch, count, trace, ledger) make a report's data from what a
verb computed; `page(data)` makes a whole page of it (`generation_page(generation)` in one step) and `write_page`
writes it; `fragment(data)` and the `*_fragment` functions give the part Jupyter shows inline (`_repr_html_`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from html import escape
from importlib import resources
from pathlib import Path

import numpy as np

from ..engine.kvcache import KeysValues
from ..engine.ledger import Ledger, Phase
from ..engine.stages import PRODUCTS, StageTable
from ..errors import UserError
from ..text import byte_size, elided, human, intensity, nonfinite_replaced, pass_name, percent, plural, s_for, shape
from ..text import count as n
from ..verbs.count import STEPS_SHOWN, Count
from ..verbs.generate import Generation
from ..version import __version__
from .colours import NOT_A_PRODUCT, PRODUCT_COLOURS
from .html_analyses import SECTIONS as ANALYSES
from .html_drawings import (
    attention_role,
    block_diagram,
    colour,
    drift_colour,
    drift_heatmap,
    expert_load,
    hatch_pattern,
    heatmap,
    label,
    layer_pattern,
    length,
    passes_chart,
    stage_table,
)
from .html_drawings import operands as operands_text
from .html_roofline import roofline_section
from .report import KV_CACHE, cache_name, cache_streams, capitalised, describe_model

ATTENTION_POSITIONS = 64  # attention maps show at most this many positions (the last ones)
ATTENTION_CELLS = 60_000  # maps of every layer when layers x heads x positions^2 stay below this; else one layer
LAYERS_LISTED = 16  # a run of identical layers longer than this is one row ("0..95, each") in the tables
_REPORTS = itertools.count()


# --- the data the page shows --------------------------------------------------------------------------
def fold_layers(phase: dict, kinds: list[str] | None = None) -> dict:
    """A phase of the JSON with runs of identical consecutive layers folded into one entry with "repeat"; given each
    layer's kind (layer_kinds), a run holds layers of one kind only, even where two kinds compute the same."""
    if "layers" not in phase:
        return phase
    runs: list[dict] = []
    for layer in phase["layers"]:
        last = runs[-1] if runs else None
        same_kind = kinds is None or kinds[layer["layer"]] == kinds[last["layer"]] if last else False
        if last and layer["layer"] == last["layer"] + last["repeat"] and same_kind and _same_block(last, layer):
            last["repeat"] += 1
        else:
            runs.append({**layer, "repeat": 1})
    return {**phase, "layers": runs}


def _same_block(run: dict, layer: dict) -> bool:
    keys = ("dot_products", "macs", "flops", "share")
    return all(run[k] == layer[k] for k in keys) and _unnamed(run["ops"], run["layer"]) == _unnamed(
        layer["ops"], layer["layer"]
    )


def _unnamed(ops: list[dict], layer: int) -> list[dict]:
    prefix = f"blocks.{layer}."
    return [{**op, "name": op["name"].removeprefix(prefix)} for op in ops]


def unfold_layers(phase: dict) -> dict:
    """The inverse of fold_layers: every layer in full, named as the model names it."""
    if "layers" not in phase:
        return phase
    layers = []
    for run in phase["layers"]:
        first = run["layer"]
        for i in range(first, first + run["repeat"]):
            ops = [{**op, "name": f"blocks.{i}." + op["name"].removeprefix(f"blocks.{first}.")} for op in run["ops"]]
            layers.append({**{k: v for k, v in run.items() if k != "repeat"}, "layer": i, "ops": ops})
    return {**phase, "layers": layers}


def shown_steps(steps: list[int], limit: int = STEPS_SHOWN) -> list[int]:
    """The decode steps shown in full, as count shows them: all, or the first limit - 2 and the last 2."""
    return steps if len(steps) <= limit else [*steps[: limit - 2], *steps[-2:]]


def _summary(phase: dict) -> dict:
    keys = ("phase", "step", "tokens", "context", "batch", "cached", "dot_products", "macs", "flops")
    return {k: phase[k] for k in keys}


def _folded(document: dict, detailed: set[int] | None = None) -> dict:
    """The document with identical layers folded and, if `detailed` is given, other decode steps as totals."""
    phases = document.get("phases", [])
    if detailed is None:
        detailed = {0, *shown_steps([p["step"] for p in phases[1:]])}
    kinds = layer_kinds(document)
    out = [fold_layers(p, kinds) if p["step"] in detailed else _summary(p) for p in phases]
    return {**document, "phases": out, "detailed_steps": sorted(p["step"] for p in out if "layers" in p)}


def layer_kinds(document: dict) -> list[str]:
    """Each layer's kind, as the page names it: the model's own name for it where its config has layer types
    (Gemma's and gpt-oss's sliding_attention and full_attention), and, where some layers have experts and others a
    dense MLP (DeepSeek-V3's first layers, Qwen3-MoE's mlp_only_layers), which of the two ("MoE", "dense MLP"), read
    off the layers' records; "" for every layer where all are of one kind."""
    model = document["model"]
    n_layer = model["n_layer"]
    types = [str(t) for t in model.get("layer_types") or model.get("layer_kinds") or ()]
    types = types if len(types) == n_layer else [""] * n_layer
    experts = [False] * n_layer
    phase = next((p for p in document.get("phases", []) if "layers" in p), None)
    for run in phase["layers"] if phase else ():
        for i in range(run["layer"], run["layer"] + run.get("repeat", 1)):
            experts[i] = any("breakdown" in op for op in run["ops"])  # a product computed expert by expert
    mlp = [("MoE" if e else "dense MLP") if 0 < sum(experts) < n_layer else "" for e in experts]
    kinds = [", ".join(part for part in (t, m) if part) for t, m in zip(types, mlp)]
    return kinds if len(set(kinds)) > 1 else [""] * n_layer


def _ops_of(items) -> dict[str, dict]:
    """op -> {group, dot_products, macs} of every matrix product over a run: items are (record, times)."""
    ops: dict[str, dict] = {}
    for r, times in items:
        if r.kind == "matmul":
            entry = ops.setdefault(r.op, {"group": r.stage.group, "dot_products": 0, "macs": 0})
            entry["dot_products"] += times * r.dot_products
            entry["macs"] += times * r.macs
    return ops


def _phase_items(phases: list[Phase]):
    return ((r, 1) for p in phases for r in p.records)


def _data(report: str, document: dict, ops: dict, attention: dict | None = None) -> dict:
    total = sum(op["macs"] for op in ops.values())
    if "totals" in document and total != document["totals"]["macs"]:
        raise AssertionError(f"the ops add up to {total} MACs, the ledger's total is {document['totals']['macs']}")
    kinds = layer_kinds(document) if "n_layer" in document["model"] else []
    return {
        "report": report,
        "version": __version__,
        "document": document,
        "ops": ops,
        "attention": attention,
        "layer_kinds": kinds,
    }


def attention_data(maps, limit: int = ATTENTION_POSITIONS) -> dict | None:
    """The attention maps for the page: the last `limit` positions, weights to 4 decimals, null where masked."""
    if maps is None or not maps.weights:
        return None
    n_all = maps.positions
    first = max(0, n_all - limit)
    layers = {}
    for layer, weights in maps.weights.items():
        shown = weights[:, first:, first:]
        layers[str(layer)] = [[None if np.isnan(w) else round(float(w), 4) for w in head.ravel()] for head in shown]
    return {"positions": n_all, "first": first, "window": maps.window, "layers": layers, "recorded": maps.recorded}


def attention_fits(config, positions: int) -> bool:
    """Whether the attention maps of every layer and head over `positions` positions keep the page small."""
    shown = min(positions, ATTENTION_POSITIONS)
    return config.n_layer * config.n_head * shown * shown <= ATTENTION_CELLS


def attention_layers(config, positions: int, chosen: int) -> list[int]:
    """Which layers' attention a report keeps: all of them while the maps stay small, else the chosen one (the first
    with attention from it on, where only some layers have attention; none in a model without attention)."""
    attending = [i for i in range(config.n_layer) if isinstance(config.layer_cache(i), KeysValues)]
    if attention_fits(config, positions):
        return attending
    return [next((i for i in attending if i >= chosen), chosen)] if attending else []


def generation_data(generation) -> dict:
    """A generation's report: its JSON, the prompt and the answer on top, then its ledger; a batch's (a list of
    Generation, as generate gives for several prompts) is batch_data's."""
    if isinstance(generation, (list, tuple)):
        return batch_data(generation)
    _with_ledger(generation)
    document = _folded(generation.to_dict())
    return _data(
        "generate", document, _ops_of(_phase_items(generation.ledger.phases)), attention_data(generation.attention)
    )


def batch_data(generations) -> dict:
    """A batch's report (generate with several prompts): its JSON (generate.batch_to_dict), the prompts and
    answers on top, then the one ledger."""
    from ..verbs.generate import batch_to_dict

    for generation in generations or [None]:
        _with_ledger(generation)
    ops = _ops_of(_phase_items(generations[0].ledger.phases))
    return _data("generate", _folded(batch_to_dict(generations)), ops)


def _with_ledger(generation) -> None:
    """A page is drawn of a Generation that kept its ledger; anything else is refused in words."""
    if not isinstance(generation, Generation):
        raise UserError(f"a generation's page is drawn of what model.generate returns, not {type(generation).__name__}")
    if generation.ledger is None:
        raise UserError(
            "this generation kept no ledger (ledger=False), which its page shows: generate with ledger=True"
        )


def count_data(count, balance: float | None = None, all_steps: bool = False, **options) -> dict:
    """A count's report data: its `count --json` document (`options` are json_chunks' further ones)."""
    from ..models.options import switch
    from ..verbs.memory import DEFAULT_BALANCE
    from .export import json_chunks

    switch("all_steps", all_steps)
    chunks = json_chunks(count, DEFAULT_BALANCE if balance is None else balance, all_steps, **options, indent=None)
    document = json.loads("".join(chunks))
    items = ((r, times) for p in count.passes for r, times in p.weighted())
    return _data("count", _folded(document, set(document["detailed_steps"])), _ops_of(items))


def analysis_data(report: str, document: dict) -> dict:
    """An analysis's page (lens, patch, attribute): its command's JSON document with the model's, its section
    (html_analyses.py); its bill is in the document, no pass's ledger."""
    return _data(report, document, {})


def ledger_data(ledger: Ledger, report: str = "ledger", extra: dict | None = None, attention=None) -> dict:
    document = {"model": ledger.model, **(extra or {}), **{k: v for k, v in ledger.to_dict().items() if k != "model"}}
    return _data(report, _folded(document), _ops_of(_phase_items(ledger.phases)), attention_data(attention))


def trace_data(ledger: Ledger, tokenizer, prompt_tokens: list[int], new_tokens: list[int], attention=None) -> dict:
    """A trace's passes as a report: their ledger (with what the cache saved, counted by the trace's loop), the
    prompt and the greedy tokens, one per pass that finished."""
    extra = {
        "prompt_tokens": prompt_tokens,
        "new_tokens": new_tokens,
        "text": tokenizer.decode(new_tokens) if new_tokens else "",
        "prompt_pieces": [tokenizer.token_str(i) for i in prompt_tokens],
        "new_pieces": [tokenizer.token_str(i) for i in new_tokens],
    }
    return ledger_data(ledger, "trace", extra, attention)


# --- the page ---------------------------------------------------------------------------------------------
def generation_page(generation) -> str:
    return page(generation_data(generation))


def generation_fragment(generation) -> str:
    return fragment(generation_data(generation))


def count_fragment(count) -> str:
    return fragment(count_data(count))


def ledger_fragment(ledger: Ledger) -> str:
    return fragment(ledger_data(ledger))


def register_notebook_display() -> None:
    """Give a Ledger, a Generation and a Count their `_repr_html_`, the method Jupyter draws an object with: the
    report's fragment, inline. The data does not import the views that show it (they sit layers above), so the
    view registers itself onto the data here, at its import; the package's __init__ imports this module, so
    `import minitransformer` is enough."""
    drawn = lambda generation: generation_fragment(generation) if generation.ledger is not None else None  # noqa: E731
    for cls, draw in ((Ledger, ledger_fragment), (Generation, drawn), (Count, count_fragment)):
        setattr(cls, "_repr_html_", draw)  # noqa: B010 - a method given from above, not an attribute read


register_notebook_display()


def _asset(name: str) -> str:
    return (resources.files("minitransformer") / "data" / "report" / name).read_text(encoding="utf-8")


def _title(data: dict) -> str:
    doc = data["document"]
    model = doc["model"].get("name", "model")
    if data["report"] in ("generate", "trace") and "prompt" in doc:
        return f"{model}: {doc['prompt']!r} -> {doc.get('text', '')!r}"
    return f"{model}: where the dot products live"


def page(data: dict) -> str:
    """A whole HTML document: opened from a file, offline, it needs nothing else."""
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(_title(data))} (minitransformer)</title>\n"
        f"<style>body {{ margin: 0; background: #fff; }}</style>\n</head>\n<body>\n{fragment(data)}\n</body>\n"
        f"</html>\n"
    )


# JSON has no NaN or infinity, which a run may well give (a float16 pass that overflows, a weight that is NaN): each
# such number sits in the page's data as {NONFINITE: "NaN"} ("Infinity", "-Infinity"), which report.js reads back
NONFINITE = "mt-nonfinite"


def _json_for_script(value) -> tuple[str, bool]:
    """JSON that cannot end the <script> element it sits in, its numbers that JSON cannot hold marked (NONFINITE);
    and whether there were any."""
    try:
        text, met = json.dumps(value, separators=(",", ":"), allow_nan=False), False
    except ValueError:  # a NaN or an infinity somewhere: walked only then (a count's large document never has one)
        text, met = json.dumps(nonfinite_replaced(value, _marked), separators=(",", ":"), allow_nan=False), True
    return text.replace("</", "<\\/").replace("<!--", "<\\!--"), met


# What the terminal's note of a run whose arithmetic met NaN or infinity says (cli.arithmetic_in_one_note), on its page
NONFINITE_NOTE = (
    "This run's numbers include NaN or infinity (grey cells, bars of no width): its arithmetic met a NaN or infinite "
    "weight or a value past the range of its number format, and a token chosen from logits that are not finite is "
    "not the model's."
)


def _marked(number: float) -> dict:
    """A float JSON cannot hold as {NONFINITE: its name in JavaScript}, which report.js reads back."""
    return {NONFINITE: "NaN" if number != number else "Infinity" if number > 0 else "-Infinity"}


def fragment(data: dict) -> str:
    """The report as one <div>, with its style, its data and its script: a page's body, or a notebook cell's output."""
    if data["document"].get("phases"):  # what the run's cache holds, in the script's words too
        data = {**data, "cache_name": _cache_word(data["document"])}
    document, nonfinite = _json_for_script(data)
    # The same data gives the same page; the counter keeps two reports in one notebook apart.
    root = f"mt-{hashlib.sha256(document.encode()).hexdigest()[:8]}-{next(_REPORTS)}"
    doc = data["document"]
    sections = [_header(data), _rule(data)] if data["report"] not in ANALYSES else [_header(data)]
    sections[1:1] = [_note(NONFINITE_NOTE)] if nonfinite else []
    if data["report"] in ANALYSES:
        sections.append(ANALYSES[data["report"]](doc))
    if doc.get("phases"):
        sections += [
            _controls(data),
            _pattern_section(data),
            *_phase_views(data),
            _ops_section(data),
            _passes_section(data),
        ]
    if data.get("attention"):
        sections.append(_attention_section(data, root + "-hatch"))
    if doc.get("drift"):
        sections.append(_drift_section(doc["drift"]))
    if doc.get("phases"):
        sections.append(_experts_section(doc))
    if doc.get("memory"):
        sections.append(_memory_section(doc))
    sections.append(roofline_section(doc))  # count --hardware: html_roofline.py
    sections.append(_footer(data))
    return (
        f'<div class="mt-report" id="{root}">\n<style>{_asset("report.css")}</style>\n'
        f"{hatch_pattern(root + '-hatch')}\n"
        + "\n".join(s for s in sections if s)
        + '\n<div class="tip" hidden></div>\n'
        f'<script type="application/json" class="mt-data">{document}</script>\n'
        f'<script>{_asset("report.js")}\nminitransformerReport(document.getElementById("{root}"));</script>\n'
        f"</div>"
    )


# --- markup helpers -----------------------------------------------------------------------------------------
def _cell(content: object, cls: str = "", header: bool = False) -> str:
    tag = "th" if header else "td"
    return f'<{tag} class="{cls}">{content}</{tag}>' if cls else f"<{tag}>{content}</{tag}>"


def _num(value: int | str, cls: str = "") -> str:
    """A right-aligned number cell; integers get thousands separators, as in the text report."""
    return _cell(n(value) if isinstance(value, int) else value, f"num {cls}".strip())


def _row(cells: list[str], cls: str = "", attrs: str = "") -> str:
    opening = "<tr" + (f' class="{cls}"' if cls else "") + (f" {attrs}" if attrs else "") + ">"
    return opening + "".join(cells) + "</tr>"


def _table(cls: str, headers: list[str], rows: list[str]) -> str:
    head = "".join(_cell(h, header=True) for h in headers)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _bar(share: float, fill: str = "") -> str:
    """A bar as long as `share` of its cell: pure CSS, so it shows (and prints) without script; none for a share that is
    no number (NaN: "width:nan%" was no width, and the bar filled its cell)."""
    style = f"width:{100 * share:.2f}%" if math.isfinite(share) else "width:0"
    style += f";background:{fill}" if fill else ""
    return f'<td class="barcell"><span class="bar" style="{style}"></span></td>'


def _swatch(table: StageTable, op: str) -> str:
    return f'<span class="swatch" style="background:{colour(table, op)}"></span>{escape(op)}'


def _note(text: str) -> str:
    return f'<p class="note">{text}</p>'


# --- sections -----------------------------------------------------------------------------------------------
DENSE_NOTE = (
    "Attention computed dense (--dense-attention): every T × t score of each head, as transformers' eager attention "
    "computes them, the keys the mask hides masked afterwards; the counts below are of that, not of row chunks or of "
    "the keys an indexer chose."
)


def _header(data: dict) -> str:
    doc, kind = data["document"], data["report"]
    model = doc["model"]
    source = model.get("source") or ("none, counted from shapes alone" if kind == "count" else "not recorded")
    kinds = {"generate": "a generation", "count": "a count from shapes alone", "trace": "a trace", "ledger": "a ledger"}
    analyses = {"lens": "a logit lens", "patch": "activation patching", "attribute": "a logit attribution"}
    what = (kinds | analyses)[kind]
    described = describe_model(model, source) if {"n_head", "ssm_heads", "state_size"} & set(model) else model["name"]
    out = [
        f'<header><h1>Where the dot products live <span class="kind">{what}</span></h1>',
        f'<p class="model">model {escape(described)}</p></header>',
    ]
    tokens = _tokens(doc, kind) if kind in ("generate", "trace") and "prompt_pieces" in doc else ""
    if tokens:
        out.append(_lede(doc, data.get("cache_name")))
    if kind == "count":
        steps, cached = len(doc["phases"]) - 1, doc["phases"][0]["cached"]
        batch = f", a batch of {doc['batch']} sequences" if doc.get("batch", 1) > 1 else ""
        out.append(
            f'<p class="lede">A {doc["prompt_tokens"]:,}-token prompt and {doc["new_tokens"]:,} new '
            f"token{s_for(doc['new_tokens'])}: 1 prefill + {steps:,} decode step{s_for(steps)}{batch}, "
            f"{'with the ' + data['cache_name'] if cached else 'without a cache'}. Counted from "
            f"{escape(doc.get('counted_from', 'shapes'))}.</p>"
        )
    if doc.get("dense_attention"):
        out.append(_note(DENSE_NOTE))
    if doc.get("generations"):
        out.append(_batch(doc))
    candidates = _candidates(doc["candidates"]) if doc.get("candidates") else ""
    if tokens or candidates:
        out.append(f'<div class="intro-grid"><div>{tokens}</div><div>{candidates}</div></div>')
    return '<section class="intro">' + "\n".join(out) + "</section>"


def _batch(doc: dict) -> str:
    """A batch: each prompt and its answer, then what the padding cost."""
    rows = "".join(
        f'<p class="text">{k + 1}. <span class="prompt-text">{escape(g["prompt"])}</span>'
        f"<strong>{escape(g['text'])}</strong></p>"
        for k, g in enumerate(doc["generations"])
    )
    padding = doc.get("totals", {}).get("padding")
    cost = (
        ""
        if padding is None
        else (
            f'<p class="lede">{plural(len(doc["generations"]), "prompt")} ran as one batch, left-padded to one length; '
            f"<strong>{n(padding['macs'])}</strong> of the MACs ({100 * padding['share']:.1f}%) were spent on padding "
            f"(pad slots, and rows that had finished but kept computing: {n(padding['finished_rows']['macs'])}).</p>"
        )
    )
    return f'<div class="tokens">{rows}</div>{cost}'


def _lede(doc: dict, cache: str | None) -> str:
    """What happened, in one paragraph, for someone who has not read anything else."""
    phases, model = doc.get("phases", []), doc["model"]
    if not phases:
        return ""
    decodes, totals = len(phases) - 1, doc["totals"]
    how = (
        f"one new position each, reading the earlier ones from the {cache}"
        if phases[0]["cached"]
        else "each recomputing the whole sequence, as the cache is off"
    )
    return (
        f'<p class="lede">The model read the prompt\'s {plural(len(doc["prompt_tokens"]), "token")} in one pass (the '
        f"<em>prefill</em>), which chose the first new token; then it made {decodes} more "
        f"pass{'es' if decodes != 1 else ''}, one per token (the <em>decode steps</em>), {how}. Every pass runs "
        f"the same {plural(model['n_layer'], 'transformer block')}, and every matrix product in them was counted: "
        f"<strong>{n(totals['dot_products'])}</strong> dot products, <strong>{n(totals['macs'])}</strong> "
        "multiply-accumulates (MACs) in all. Below: where they live.</p>"
    )


def _chip(piece: str, token_id: int, cls: str, attrs: str = "") -> str:
    return (
        f'<span class="{cls}" title="id {token_id}"{attrs}><code>{escape(label(piece, 40))}</code>'
        f"<small>{token_id}</small></span>"
    )


def _tokens(doc: dict, kind: str) -> str:
    prompt = "".join(_chip(p, i, "chip") for p, i in zip(doc["prompt_pieces"], doc["prompt_tokens"]))
    new = "".join(
        _chip(p, i, "chip new-token", f' data-step="{k}"')
        for k, (p, i) in enumerate(zip(doc["new_pieces"], doc["new_tokens"]))
    )
    chosen = "greedy, one per pass" if kind == "trace" else "one per pass"
    return (
        f'<div class="tokens"><p class="label">the prompt: {plural(len(doc["prompt_tokens"]), "token")} (␣ is a space)</p>'
        f'<p class="chips">{prompt}</p><p class="label">the answer, token by token ({chosen}) '
        f'<button type="button" class="replay js-only">replay</button></p><p class="chips answer">{new}</p>'
        f'<p class="text"><span class="prompt-text">{escape(doc.get("prompt", ""))}</span>'
        f"<strong>{escape(doc.get('text', ''))}</strong></p></div>"
    )


def _candidates(candidates: list[dict]) -> str:
    rows = [
        _row(
            [
                _num(k + 1),
                _cell(f"<code>{escape(repr(c['token']))}</code>"),
                _num(str(c["token_id"])),
                _num(f"{100 * c['probability']:.2f}%"),
                _bar(c["probability"]),
            ]
        )
        for k, c in enumerate(candidates)
    ]
    return (
        '<div class="candidates"><p class="label">the candidates for the first new token (probabilities at '
        "temperature 1, from the prefill's logits)</p>"
        + _table("candidates-table", ["rank", "token", "id", "probability", ""], rows)
        + "</div>"
    )


def _rule(data: dict) -> str:
    """The rule, and the colour of each kind of product the page draws (engine/stages.py's PRODUCTS)."""
    doc = data["document"]
    phases = doc.get("phases", [])
    drawn = {op["op"] for p in phases for run in p.get("layers", []) for op in run["ops"] if op["kind"] == "matmul"}
    drawn |= {
        r["op"] for p in phases for r in (*p.get("embed", ()), *p.get("final", ())) if r and r["kind"] == "matmul"
    }
    drawn |= {"logits"} if any(p.get("logits") for p in phases) else set()
    stages = stage_table(doc["model"]).stages
    kinds = {stages[op].product for op in drawn}
    legend = "".join(
        f'<span class="key"><span class="swatch" style="background:{PRODUCT_COLOURS[kind]}"></span>'
        f"{escape(label)}</span>"
        for kind, label in PRODUCTS.items()
        if kind in kinds
    )
    return (
        '<section class="rule"><p><strong>The rule behind every number.</strong> A matrix product '
        "(m × n)(n × p) is m·p dot products, each of length n: m·p·n multiply-accumulates (MACs; FLOPs = 2 × "
        "MACs). Layer norms, softmax, masking, reshapes and residual adds cost arithmetic too, but they are not "
        'dot products: they sit in their place below, with zero. <span class="js-only">Hover over any box, bar or '
        "row to see its record.</span></p>"
        f'<p class="legend">{legend}<span class="key"><span class="swatch free"></span>no dot products</span>'
        "</p></section>"
    )


def _controls(data: dict) -> str:
    doc = data["document"]
    passes = "".join(
        f'<option value="{p["step"]}">{pass_name(p["step"])}: T = {p["tokens"]:,}, t = {p["context"]:,}</option>'
        for p in doc["phases"]
        if "layers" in p
    )
    kinds = data.get("layer_kinds") or [""] * doc["model"]["n_layer"]
    layers = "".join(f'<option value="{i}">{i}{f" ({escape(k)})" if k else ""}</option>' for i, k in enumerate(kinds))
    alike = all(len(_block_views(p, kinds)) == 1 for p in doc["phases"] if "layers" in p)
    note = (
        "every block of a pass has the same shapes, so the same counts; the layer picks the names, the row and the "
        "attention maps"
        if alike
        else "the layer picks its kind's block, drawn and tabled, the names, the row and the attention maps"
    )
    return (
        f'<div class="controls js-only"><label>pass <select class="step-choice">{passes}</select></label> '
        f'<label>layer <select class="layer-choice">{layers}</select></label><span class="note">{note}</span>'
        "</div>"
    )


def _pattern_section(data: dict) -> str:
    """Where the layers are of several kinds (a hybrid's linear, state-space or sparse layers beside full attention;
    sliding and full; dense and MoE), their pattern drawn, layer by layer; nothing where every layer is alike."""
    kinds = data.get("layer_kinds") or []
    if len(set(kinds)) < 2:
        return ""
    return (
        '<section class="layer-pattern-view"><h2>The layers, by kind</h2>'
        + _note("Each square is a layer, layer 0 first; its colour is its kind, and its block is drawn below.")
        + f'<div class="diagram">{layer_pattern(kinds)}</div></section>'
    )


def _cache_word(doc: dict) -> str:
    """report.cache_name of a document's run, read from its prefill's stages (every run has one, in full)."""
    return cache_name(op["kind"] for layer in doc["phases"][0]["layers"] for op in layer["ops"])


def _pass_title(p: dict, cache: str) -> str:
    if p["phase"] == "prefill":
        last_only = p["logits"] is not None and p["logits"]["out_shape"][-2] == 1
        return (
            f"The prefill: T = {p['tokens']:,} new position{s_for(p['tokens'])} attending to t = {p['context']:,}"
            + ("; logits for the last position only" if last_only else "")
        )
    if p["cached"]:
        return (
            f"Decode step {p['step']}: T = {p['tokens']:,} new position{s_for(p['tokens'])} attending to "
            f"t = {p['context']:,} through the {cache}"
        )
    return (
        f"Decode step {p['step']} without a cache: all T = {p['tokens']:,} positions recomputed, attending to "
        f"t = {p['context']:,}"
    )


def _block_views(p: dict, kinds: list[str]) -> list[dict]:
    """The blocks of one pass that the page draws: one for each kind of layer and each set of shapes within a kind
    (layers of one kind have the same shapes, unless a family says otherwise), in the order of their first layer:
    {"kind", "layers", "run": the index of the run of the first layer, "shapes": a key equal for equal blocks}."""
    views: dict[tuple[str, str], dict] = {}
    for index, run in enumerate(p["layers"]):
        shapes = json.dumps(_unnamed(run["ops"], run["layer"]), sort_keys=True)
        for i in range(run["layer"], run["layer"] + run["repeat"]):
            kind = kinds[i] if i < len(kinds) else ""
            view = views.setdefault(
                (kind, shapes),
                {"kind": kind, "layers": [], "run": index, "shapes": shapes, "ops": [op["op"] for op in run["ops"]]},
            )
            view["layers"].append(i)
    found = list(views.values())
    for view in found if len(found) > 1 else ():  # blocks that differ where the config names no kinds: by their ops
        if not view["kind"]:
            others = {op for other in found if other is not view for op in other["ops"]}
            own = [op for op in view["ops"] if op not in others]
            view["kind"] = (
                f"with {', '.join(own[:3])}{', ...' if len(own) > 3 else ''}"
                if own
                else f"shaped as layer {view['layers'][0]}"
            )
    return found


def _kind_label(kind: str, model: dict) -> str:
    """A layer kind as a heading says it: its name, and the window of a sliding one."""
    window = model.get("sliding_window")
    return f"{kind} (a window of {window:,})" if kind.startswith("sliding") and window else kind


def _view_heading(view: dict, views: list[dict], model: dict) -> str:
    """What a drawn block stands for; that blocks are alike is said only where they are."""
    first, n_layer = view["layers"][0], model["n_layer"]
    name = f'layer <span class="layer-name">{first}</span> of {n_layer}'
    if len(views) == 1:
        return f"One transformer block, stage by stage ({name}; every block of this pass has the same shapes)"
    layers = view["layers"]
    kind = view["kind"]
    what = (
        f"the layers {escape(kind)}"
        if kind.startswith(("with ", "shaped as "))
        else (f"the {escape(_kind_label(kind, model))} layers")
    )
    of_kind = (
        f"{plural(len(layers), 'layer')} of this kind, each with these shapes: {elided(layers)}"
        if len(layers) > 1
        else "the only layer of this kind"
    )
    twins = [escape(v["kind"]) for v in views if v is not view and v["shapes"] == view["shapes"]]
    same = f"; in this pass the {' and '.join(dict.fromkeys(twins))} layers have the same shapes" if twins else ""
    return f"One block of {what}, stage by stage ({name}; {of_kind}{same})"


def _phase_views(data: dict) -> list[str]:
    """A section per pass shown in full: each kind of block it has drawn and tabled, and its layers (with script, one
    pass and one kind of block at a time: the chosen layer's)."""
    doc = data["document"]
    kinds = data.get("layer_kinds") or [""] * doc["model"]["n_layer"]
    table = stage_table(doc["model"])
    views = []
    for index, p in enumerate(doc["phases"]):
        if "layers" not in p:
            continue
        blocks = _block_views(p, kinds)
        drawn = []
        for k, view in enumerate(blocks):
            ops, run = p["layers"][view["run"]]["ops"], view["run"]
            drawn.append(
                f'<div class="kind-view{" current" if k == 0 else ""}" data-kind="{escape(view["kind"])}" '
                f'data-layers="{",".join(map(str, view["layers"]))}">'
                f"<h3>{_view_heading(view, blocks, doc['model'])}</h3>"
                + _note(
                    "Each matrix product is a box with area proportional to its MACs, compared within this "
                    "block; dashed boxes do no dot products. The line on the left is the residual stream x: each "
                    "branch leaves it where a line links a stage to it and is added back at a +."
                )
                + f'<div class="diagram">{block_diagram(ops, index, run, table)}</div>'
                f"<h3>The same block as a table</h3>{_block_table(ops, index, run, table)}</div>"
            )
        views.append(
            f'<section class="phase-view{" current" if index == 0 else ""}" data-view="{p["step"]}">'
            f"<h2>{escape(_pass_title(p, data['cache_name']))}</h2>"
            + "".join(drawn)
            + _scans_note(p)
            + f"<h3>Layer by layer: where this pass's MACs go</h3>{_layers_table(p, index, table, kinds)}</section>"
        )
    return views


def causal_cell(r: dict, attention: str) -> str:
    """What the causal mask keeps of attention's product (`attention`: its part, "scores" or "mix"; "" for any other
    product, which has no such cell)."""
    if "causal_macs" not in r:
        return ""
    # Computed in row chunks, or over the keys an indexer chose (tape.py): the dense form's cost beside it.
    dense = f"; dense: {n(r['dense_macs'])} MACs" if r.get("dense_macs", r["macs"]) != r["macs"] else ""
    if dense and "selected_keys" in r:
        dense = f"; sparse: {n(r['selected_keys'])} keys a query{dense}"
    if attention == "scores":
        return f"{n(r['causal_dot_products'])} needed ({n(r['causal_macs'])} MACs){dense}"
    return f"{n(r['causal_macs'])} MACs needed{dense}"


def _block_table(ops: list[dict], index: int, run: int, table: StageTable) -> str:
    """Every stage of one block with its counts; where a scan ran in chunks, each product's recurrent form beside
    (what the same positions cost one at a time), as count's table has it."""
    block_macs = sum(r["macs"] for r in ops)
    scanned = any("recurrent_macs" in r for r in ops)
    rows = []
    for i, r in enumerate(ops):
        attrs = f'data-phase="{index}" data-run="{run}" data-index="{i}" data-op="{escape(r["op"])}"'
        if r["kind"] == "matmul":
            rows.append(_row(_product_cells(r, block_macs, table, scanned), "product", attrs))
        else:
            stage = [
                _cell(escape(r["op"])),
                _cell(escape(r["equation"]), "eq"),
                _cell(""),
                _cell(shape(r["out_shape"]), "shape out"),
            ]
            none = [_num(0, "dots"), _cell(""), _num(0, "macs"), *[_cell("")] * (2 + scanned)]  # no dot products
            rows.append(_row(stage + none, "free", attrs))
    rows.append(
        _row(
            [
                _cell("block"),
                *[_cell("")] * 3,
                _num(sum(r["dot_products"] for r in ops)),
                _cell(""),
                _num(block_macs),
                _num("100%"),
                _cell(""),
                *([_num(sum(r.get("recurrent_macs", r["macs"]) for r in ops), "recurrent")] * scanned),
            ],
            "total",
        )
    )
    headers = ["stage", "equation", "A x B", "out", "dot products", "length", "MACs", "share", "causal"]
    return _table("block-table", headers + ["recurrent form (MACs)"] * scanned, rows)


def _product_cells(r: dict, block_macs: int, table: StageTable, scanned: bool) -> list[str]:
    """A product's row of the block table: its colour and name, equation, shapes, counts, share, what the causal
    mask keeps and (where the pass ran a scan in chunks) its recurrent form."""
    return [
        _cell(_swatch(table, r["op"])),
        _cell(escape(r["equation"]), "eq"),
        _cell(escape(operands_text(r)), "shape operands"),
        _cell(shape(r["out_shape"]), "shape out"),
        _num(r["dot_products"], "dots"),
        _num(length(r), "length"),
        _num(r["macs"], "macs"),
        _num(percent(r["macs"], block_macs)),
        _cell(escape(causal_cell(r, attention_role(table, r["op"]))), "causal"),
        *([_num(r["recurrent_macs"] if "recurrent_macs" in r else "", "recurrent")] * scanned),
    ]


def _scans_note(p: dict) -> str:
    """Where a pass ran a scan in chunks: its scans' MACs so, against the recurrent form's (each position in turn, as
    a decode step runs them), over every layer of the pass, as count's totals say them."""
    scans = [(run["repeat"], r) for run in p["layers"] for r in run["ops"] if "recurrent_macs" in r]
    if not scans:
        return ""
    chunked = sum(k * r["macs"] for k, r in scans)
    recurrent = sum(k * r["recurrent_macs"] for k, r in scans)
    return _note(
        f"Recurrent form: this pass's scans took {n(chunked)} MACs ({human(chunked)}) in chunks, {n(recurrent)} "
        f"({human(recurrent)}) had they run position by position as a decode step does ({chunked / recurrent:.2f}x "
        "in chunks, in products of many rows). The table's last column is each product's recurrent form (0: a "
        "product of the chunks alone)."
    )


def _layers_table(p: dict, index: int, table: StageTable, kinds: list[str] | None = None) -> str:
    """Embedding, each layer (a long run of identical ones as one row and its sum), the logits, the total; where the
    layers are of several kinds, a column says each one's."""
    total = p["macs"]
    named = kinds if kinds and any(kinds) else None
    blank = [_cell("")] if named else []

    def kind(i: int) -> list[str]:
        return [_cell(escape(named[i]), "kind")] if named else []

    def counts(dots: int, macs: int, share: float, fill: str = "") -> list[str]:
        return [_num(dots, "dots"), _num(macs, "macs"), _num(percent(macs, total)), _bar(share, fill)]

    rows = [_row([_cell("embed"), *blank, _num(0), _num(0), _cell(""), _cell("a lookup: no dot products")], "free")]
    for r, run in enumerate(p["layers"]):
        first, k = run["layer"], run["repeat"]
        each = counts(run["dot_products"], run["macs"], run["share"])
        attrs = f'data-phase="{index}" data-run="{r}"'
        if k <= LAYERS_LISTED:
            rows += [
                _row([_cell(i), *kind(i), *each], "layer", f'data-layer="{i}" {attrs}') for i in range(first, first + k)
            ]
        else:
            last = first + k - 1
            rows.append(
                _row(
                    [_cell(f"{first}..{last} (each)"), *kind(first), *each],
                    "layer",
                    f'data-layers="{first}-{last}" {attrs}',
                )
            )
            all_k = counts(k * run["dot_products"], k * run["macs"], k * run["share"])
            rows.append(_row([_cell(f"{k} layers"), *blank, *all_k], "layer-sum"))
    logits = p["logits"]
    if logits:
        cells = counts(logits["dot_products"], logits["macs"], logits["share"], colour(table, "logits"))
        rows.append(_row([_cell("logits"), *blank, *cells], "logits", f'data-phase="{index}" data-final="logits"'))
    rows.append(_row([_cell("total"), *blank, _num(p["dot_products"]), _num(total), _num("100%"), _cell("")], "total"))
    headers = ["layer", *(["kind"] if named else []), "dot products", "MACs", "share", "share of the pass"]
    return _table("layers-table", headers, rows)


def _pass_ops(p: dict) -> dict[str, int]:
    """op -> MACs over one pass shown in full (a folded run counted as many times as the layers it stands for)."""
    ops: dict[str, int] = {}
    for run in p["layers"]:
        for r in run["ops"]:
            if r["kind"] == "matmul":
                ops[r["op"]] = ops.get(r["op"], 0) + run["repeat"] * r["macs"]
    for r in (*p.get("embed", ()), *p.get("final", ())):  # a product outside the blocks (DeepSeek-V4's head)
        if r and r["kind"] == "matmul":
            ops[r["op"]] = ops.get(r["op"], 0) + r["macs"]
    if p["logits"]:
        ops["logits"] = ops.get("logits", 0) + p["logits"]["macs"]
    return ops


def _ops_section(data: dict) -> str:
    """Each product's MACs over every layer: in the prefill, in the last decode step shown, and over the whole run;
    then each group of the family's stage table (count's summary), its bar its products' colour where they are of
    one kind."""
    doc, whole = data["document"], data["ops"]
    table = stage_table(doc["model"])
    columns = _ops_columns(doc, whole)
    totals = [sum(ops.values()) for _, ops in columns]
    rows = []
    for op, entry in whole.items():
        tip = (
            f'data-op="{escape(op)}" data-tip="{escape(op)}: {n(entry["macs"])} MACs, '
            f'{n(entry["dot_products"])} dot products over the whole run"'
        )
        bar = _bar(entry["macs"] / totals[-1] if totals[-1] else 0, colour(table, op))
        rows.append(_row([_cell(_swatch(table, op)), *_macs_and_shares(columns, totals, [op], int), bar], "", tip))
    rows.append(_row([_cell("total"), *(c for t in totals for c in (_num(t), _num("100%"))), _cell("")], "total"))
    groups: dict[str, list[str]] = {}
    for op, entry in whole.items():
        groups.setdefault(entry["group"], []).append(op)
    for group, members in groups.items():
        fills = {colour(table, op) for op in members}
        fill = fills.pop() if len(fills) == 1 else NOT_A_PRODUCT
        share = sum(whole[op]["macs"] for op in members) / totals[-1] if totals[-1] else 0
        cells = [_cell(f"{escape(group)} ({', '.join(members)})"), *_macs_and_shares(columns, totals, members, human)]
        rows.append(_row([*cells, _bar(share, fill)], "group"))
    head = "".join(f'<th colspan="2">{escape(title)}</th>' for title, _ in columns)
    return (
        '<section class="ops"><h2>Where the MACs go, op by op</h2>'
        + _note("Each product summed over every layer; the bars show each op's share of the whole run.")
        + f'<table class="ops-table"><thead><tr><th rowspan="2">op</th>{head}<th rowspan="2" class="barhead">'
        "share of the whole run</th></tr><tr>"
        + "<th>MACs</th><th>share</th>" * len(columns)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _ops_columns(doc: dict, whole: dict) -> list[tuple[str, dict]]:
    """The op table's columns, each its title and op -> MACs: the prefill, the last decode step shown, the run."""
    shown = [p for p in doc["phases"] if "layers" in p]
    columns = [(f"prefill (T = {shown[0]['tokens']:,})", _pass_ops(shown[0]))]
    if len(shown) > 1:
        last = shown[-1]
        columns.append(
            (f"decode step {last['step']} (T = {last['tokens']:,}, t = {last['context']:,})", _pass_ops(last))
        )
    passes = len(doc["phases"])
    run = {op: v["macs"] for op, v in whole.items()}
    return [*columns, (f"the whole run ({passes:,} pass{'es' if passes != 1 else ''})", run)]


def _macs_and_shares(columns: list[tuple[str, dict]], totals: list[int], members: list[str], fmt) -> list[str]:
    """The MACs of some ops in each column (written by `fmt`) and their share of the column's total."""
    cells = []
    for (_, ops), total in zip(columns, totals):
        macs = sum(ops.get(op, 0) for op in members)
        cells += [_num(fmt(macs), "macs"), _num(percent(macs, total))]
    return cells


def _passes_section(data: dict) -> str:
    doc = data["document"]
    phases, cache, totals = doc["phases"], doc.get("cache"), doc["totals"]
    decodes, word = len(phases) - 1, data["cache_name"]
    lines = [
        f'<p class="totals">Total: <strong>{n(totals["dot_products"])}</strong> dot products, '
        f"<strong>{n(totals['macs'])}</strong> MACs ({human(totals['macs'])}), {human(totals['flops'])} FLOPs "
        f"over 1 prefill + {decodes:,} decode step{s_for(decodes)}.</p>"
    ]
    if "recurrent_macs" in totals:  # a scan ran in chunks: the whole run in the recurrent form (each pass's note)
        recurrent = totals["recurrent_macs"]
        lines.append(
            f'<p class="recurrent">Recurrent form: had every scan run position by position, as a decode step runs it, '
            f"these passes would cost {n(recurrent)} MACs ({human(recurrent)}) instead of {n(totals['macs'])} "
            f"({human(totals['macs'])}).</p>"
        )
    if cache:
        saved, without, with_cache = cache["saved_macs"], cache["without_cache"]["macs"], cache["with_cache"]["macs"]
        if cache["used"]:
            lines.append(
                f'<p class="cache">{capitalised(word)}: without it these tokens would cost {n(without)} MACs '
                f"({human(without)}); with it {n(with_cache)} ({human(with_cache)}): it saved "
                f"<strong>{human(saved)} MACs ({percent(saved, without)})</strong>.</p>"
            )
        else:
            lines.append(
                f'<p class="cache">{capitalised(word)} (off): with it these tokens would cost {n(with_cache)} MACs '
                f"({human(with_cache)}) instead of {n(without)} ({human(without)}): it would save "
                f"<strong>{human(saved)} ({percent(saved, without)})</strong>.</p>"
            )
    steps = cache.get("steps") if cache else None
    chart = f'<div class="chart">{passes_chart(steps, cache["used"], word)}</div>' if steps else ""
    reads = (
        "the keys and values of all earlier ones"
        if word == KV_CACHE
        else "each layer's state, as the earlier positions left it,"
    )
    how = (
        "The prefill computes every prompt position; each decode step then computes one new position, "
        f"which reads {reads} from the {word}. Without the cache, every step would recompute the whole sequence."
        if cache is None or cache["used"]
        else f"The {word} is off: each step recomputes the whole sequence so far, every position of it, where with "
        f"the cache it would compute one new position, which reads {reads} from the {word}."
    )
    return (
        '<section class="passes"><h2>The passes: the prefill, then one decode step per new token</h2>'
        + _note(how)
        + "".join(lines)
        + chart
        + _passes_table(phases, steps)
        + "</section>"
    )


def _passes_table(phases: list[dict], steps: list[dict] | None) -> str:
    """A row per pass, its size and its MACs; with the cache comparison, this run's MACs stand in the column of its
    way (with or without the cache), beside the other way's and what the cache saved. Many passes: the first and
    the last in the table, all of them in a list that opens."""
    by_step = {s["step"]: s for s in steps or []}
    cached = phases[0]["cached"]

    def row(p: dict) -> str:
        cells = [
            _num(p["step"]),
            _cell(p["phase"]),
            _num(p["tokens"]),
            _num(p["context"]),
            _num(p["dot_products"], "dots"),
        ]
        s, mine = by_step.get(p["step"]), _num(p["macs"], "macs")
        if s:
            other = _num(s["without_cache_macs" if cached else "with_cache_macs"], "other")
            cells += [mine, other] if cached else [other, mine]
            cells.append(_num(s["without_cache_macs"] - s["with_cache_macs"], "saved"))
        else:
            cells.append(mine)
        return _row(cells, "", f'data-step="{p["step"]}"')

    this_run = " (this run)"
    headers = ["step", "pass", "T", "t", "dot products"] + (
        [
            f"MACs with the cache{this_run if cached else ''}",
            f"MACs without it{'' if cached else this_run}",
            "saved by the cache",
        ]
        if steps
        else ["MACs"]
    )
    decodes = [p["step"] for p in phases[1:]]
    listed = {0, *(decodes if len(decodes) <= 40 else shown_steps(decodes))}
    rows = [row(p) for p in phases if p["step"] in listed]
    if len(listed) == len(phases):
        return _table("passes-table", headers, rows)
    rows.insert(
        len(listed) - 2,
        _row(
            [_cell("…"), f'<td colspan="{len(headers) - 1}">the other steps are in the list of every pass below</td>'],
            "gap",
        ),
    )
    every = _table("passes-table all", headers, [row(p) for p in phases])
    return (
        _table("passes-table", headers, rows)
        + f'<details class="all-passes"><summary>every pass ({len(phases):,})</summary>{every}</details>'
    )


def _attention_section(data: dict, hatch: str) -> str:
    doc, attention = data["document"], data["attention"]
    pieces = doc.get("prompt_pieces", []) + doc.get("new_pieces", [])
    first, n_all = attention["first"], attention["positions"]
    size = n_all - first
    layers = sorted(int(k) for k in attention["layers"])
    blocks = []
    for layer in layers:
        heads = attention["layers"][str(layer)]
        weights = [
            np.array([np.nan if w is None else w for w in flat], np.float32).reshape(size, size) for flat in heads
        ]
        maps = "".join(heatmap(w, pieces, first, h, layer, hatch) for h, w in enumerate(weights))
        blocks.append(
            f'<div class="attn-layer{" current" if layer == layers[0] else ""}" data-layer="{layer}">'
            f'<h3>Layer {layer}: {plural(len(heads), "head")}</h3><div class="heads">{maps}</div></div>'
        )
    window = attention["window"]
    behind = (
        f"; keys more than {plural(window - 1, 'position')} behind, outside the sliding window of {window}"
        if window
        else ""
    )
    cut = f" Positions {first:,}..{n_all - 1:,} of {n_all:,} are shown." if first else ""
    source = (
        "The rows of the prompt come from the prefill, each later row from one decode step."
        if attention.get("recorded")
        else "The weights come from one pass over the positions the generation fed, beside it and outside its "
        "ledger: the same as its prefill's rows and each decode step's row."
    )
    kept = (
        "every layer"
        if len(layers) == doc["model"]["n_layer"]
        else f"layer {', '.join(map(str, layers))} (the others were not kept, to keep the page small)"
    )
    return (
        '<section class="attention"><h2>Attention: who looks at whom</h2>'
        + _note(
            f"The softmax weights A of {kept}, every head: row i is the query at position i, column j the key "
            f"at position j; a row sums to 1. Hatched cells are masked: the future{behind}, and whatever else "
            f"the layer's mask hides (a chunk's bounds, keys an indexer did not choose).{cut} {source} White is 0, "
            "dark blue is 1."
        )
        + '<p class="attn-missing note" hidden></p>'
        + "".join(blocks)
        + "</section>"
    )


def tokens_per_expert(doc: dict) -> np.ndarray | None:
    """[layers, E]: the tokens each layer's router sent each expert, summed over the passes the page holds (each
    layer's first product computed expert by expert: its breakdown); None for a model without experts."""
    load: dict[int, dict[int, int]] = {}
    for phase in doc["phases"]:
        for run in phase.get("layers", ()):
            ops = next((r for r in run["ops"] if r.get("breakdown")), None)
            for layer in range(run["layer"], run["layer"] + run.get("repeat", 1)):
                for part in ops["breakdown"] if ops else ():
                    experts = load.setdefault(layer, {})
                    experts[part["expert"]] = experts.get(part["expert"], 0) + part["tokens"]
    if not load:
        return None
    E = doc["model"]["n_experts"]
    tokens = np.zeros((doc["model"]["n_layer"], E), dtype=np.int64)
    for layer, experts in load.items():
        for e, n_tokens in experts.items():
            tokens[layer, e] = n_tokens
    return tokens


def _experts_section(doc: dict) -> str:
    """Where a mixture of experts sent its tokens: a heatmap of tokens per expert, layer by layer."""
    tokens = tokens_per_expert(doc)
    if tokens is None:
        return ""
    routing = doc.get("routing")
    how = f"assumed, as count has no router: routing {escape(routing)}" if routing else "as this run's routers chose"
    return (
        '<section class="experts"><h2>Tokens per expert, layer by layer</h2>'
        + _note(
            f"Each row a layer, each column an expert; the darker, the more tokens the router sent it over "
            f"every pass shown ({how}). Each token goes to k = {doc['model']['top_k']} experts, so each row "
            f"sums to k x the tokens: the expert MACs are the same whoever gets them, only their load "
            f"differs."
        )
        + f'<div class="diagram">{expert_load(tokens)}</div></section>'
    )


def _drift_section(drift: dict) -> str:
    """What the precision cost against float64: the next token's drift, a heatmap of layers x stages, where values
    left the format's range (verbs/drift.py's JSON)."""
    p = escape(drift["precision"])
    kl = "inf (logits not all finite)" if drift["kl"] is None else f"{drift['kl']:.2e}"
    agree = f"{100 * drift['top1_agreement']:.0f}%"
    legend = "".join(
        f'<span class="swatch" style="background:{drift_colour(v)}"></span> {v:g} '
        for v in (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1)
    )
    rows = [
        _row(
            [
                _cell(escape(s["stage"])),
                _num(f"{s['max_rel']:.2e}" if s["max_rel"] is not None else "inf"),
                _num(f"{s['rms_rel']:.2e}" if s["rms_rel"] is not None else "inf"),
                _num(f"{s['max_abs']:.4g}"),
            ]
        )
        for s in drift["outside"]
    ]
    ranges = [
        _row(
            [
                _cell("-" if e["layer"] is None else str(e["layer"])),
                _cell(escape(e["stage"])),
                _cell(escape(e["where"])),
                _cell(escape(e["format"])),
                _num(f"{e['max_abs']:.4g}"),
                _cell("overflow" if "values" in e else "underflow"),
            ]
        )
        for e in drift["overflow"] + drift["underflow"]
    ]
    left = (
        _table("drift-range", ["layer", "stage", "where", "format", "max |x|", "what"], ranges)
        if ranges
        else _note(f"No value left {p}'s range: nothing overflowed, and no values that matter were flushed to zero.")
    )
    return (
        f'<section class="drift"><h2>Drift of {p} against float64</h2>'
        + _note(
            f"The same {plural(drift['positions'], 'token')} through the model at {p} and in float64: each "
            f"cell is a stage of a layer, coloured by max |ours - truth| / max |truth| over its tensor "
            f"(log scale; black: not finite), outlined red where {p} overflowed and blue where values that "
            f"matter were flushed to zero. Next token: KL(float64 || {p}) {kl} on average over the positions, "
            f"top-1 agreement {agree}."
        )
        + f'<div class="diagram">{drift_heatmap(drift)}</div><p class="legend">{legend}</p>'
        + _table("drift-outside", ["outside the blocks", "max rel", "rms rel", "max |x|"], rows)
        + left
        + "</section>"
    )


def _memory_section(doc: dict) -> str:
    m, table = doc["memory"], stage_table(doc["model"])
    act = m["activations"]
    items = [
        ("weights", m["weights"]["bytes"], f"{n(m['weights']['parameters'])} parameters"),
        *_cache_items(m, doc["phases"][0]["cached"]),
        ("activations, prefill peak", act["prefill"]["bytes"], f"at {act['prefill']['stage']}"),
    ]
    if "decode" in act:
        items.append(("activations, decode peak", act["decode"]["bytes"], f"at {act['decode']['stage']}"))
    largest = max(b for _, b, _ in items) or 1
    rows = [
        _row([_cell(escape(what)), _num(b, "bytes"), _num(byte_size(b)), _cell(escape(note)), _bar(b / largest)])
        for what, b, note in items
    ]
    decode = act.get("decode")
    decode_title = f"decode (T = 1, t = {decode['context']:,})" if decode else "decode"
    per_byte = [
        _row([_cell(_swatch(table, r["op"])), *_intensity_cells(r.get("prefill")), *_intensity_cells(r.get("decode"))])
        for r in m["intensity"]["ops"]
    ]
    balance = m["intensity"]["machine_balance_macs_per_byte"]
    return (
        '<section class="memory"><h2>Memory and arithmetic intensity</h2>'
        + _note(
            f"{m.get('dtype', 'float32')}, {m['bytes_per_number']} bytes a number. Activations: "
            f"{escape(act['estimate'])}."
        )
        + _table("memory-table", ["what", "bytes", "", "", "against the largest"], rows)
        + _note(
            f"Arithmetic intensity: MACs per byte moved ({escape(m['intensity']['bytes_moved'])}). Below the "
            f"machine balance, assumed {balance:g} MACs/byte, a product waits on memory. The dot marks the "
            "intensity on a log scale from 0.1 to 10,000 MACs/byte."
        )
        + _table(
            "intensity-table",
            ["op", "prefill bytes", "MACs/byte", "", f"{decode_title} bytes", "MACs/byte", ""],
            per_byte,
        )
        + "</section>"
    )


def _cache_items(m: dict, cached: bool) -> list[tuple[str, int, str]]:
    """What the cache holds, as count's report says it (views/count_report.py's memory lines), each number read from
    memory's JSON (verbs/memory.py): where every layer that keeps something keeps keys and values, the KV cache of
    this run and of the whole context; in a hybrid, a row for each kind of layer (its keys and values, growing with
    the context, or its recurrent state, the same at any context) and the whole cache. The keys an indexer keeps
    beside K and V (DeepSeek-V3.2's) have a row of their own; a cache of streams (DeepSeek-V4's), a row a stream.
    A batch's bytes are the batch's; a run without the cache says what it would have held."""
    kv, cache = m["kv_cache"], m["cache"]
    types = cache["layer_types"]
    attending = {kind: k for kind, k in types.items() if "positions" in k}
    states = {kind: k for kind, k in types.items() if k.get("state")}
    per_seq = " for the batch" if kv["batch"] > 1 else ""
    off = "" if cached else " (if the cache were on)"
    indexed = {kind: k for kind, k in attending.items() if "index_keys" in k.get("rows", {})}
    beside = _indexer_keys(indexed, per_seq + off)
    if any("window" in k for k in types.values()):  # DeepSeek-V4's streams side by side
        return _stream_items(m, per_seq + off)
    if not states:
        held = (
            f"{plural(kv['positions'], 'position', n(kv['positions']))} x {byte_size(kv['bytes_per_token'])}{per_seq} "
            f"(K and V of {plural(sum(k['layers'] for k in attending.values()), 'layer')}"
            + (", and the indexer's keys)" if beside else ")")
            + off
        )
        if len(kv.get("layer_types", {})) > 1:  # layers that hold different numbers of positions (a window on some)
            kinds = (f"{kind} {k['layers']} x {n(k['positions'])} positions" for kind, k in kv["layer_types"].items())
            held = "by layer type: " + ", ".join(kinds) + (per_seq and f", {per_seq.strip()}") + off
        return [
            ("KV cache, this run", kv["bytes"], held),
            *beside,
            ("KV cache, whole context", kv["bytes_at_context"], plural(kv["context"], "position", n(kv["context"]))),
        ]
    items = [item for kind, k in types.items() for item in _kind_items(kind, k, m, per_seq, off)]
    parts = (
        f"{byte_size(kv['bytes'])} keys and values + " if attending else ""
    ) + f"{byte_size(cache['state_bytes'])} state"
    return [
        *items,
        *beside,
        (
            "cache, this run",
            cache["bytes"],
            f"after {plural(cache['positions'], 'position', n(cache['positions']))} ({parts}){per_seq}{off}",
        ),
        ("cache, whole context", cache["bytes_at_context"], plural(kv["context"], "position", n(kv["context"]))),
    ]


def _stream_items(m: dict, run: str) -> list[tuple[str, int, str]]:
    """A cache of streams (DeepSeek-V4's), as count's report says it (views/report.py's cache_streams): a row for each
    kind of layer's window, compressed streams and compressors' state, the whole after the positions counted (each
    stream's share; `run` what else the text says of it: the batch's, if the cache were on) and at the context."""
    cache = m["cache"]
    items: list[tuple[str, int, str]] = []
    totals: dict[str, int] = {}  # each stream's bytes in every kind of layer
    for kind, k in cache["layer_types"].items():
        layers = plural(k["layers"], kind + " layer")
        for stream, what, b in cache_streams(k):
            named = what if stream == "state" else stream  # "compressors' state"
            totals[named] = totals.get(named, 0) + b
            note = f"{what} x {layers}{run}"
            if stream == "state":
                arrays = " + ".join(f"{name} {shape(tuple(dims))}" for name, dims in k["state"].items())
                note = f"{arrays} numbers x {layers}{run}: {what}, the same at any context"
            items.append((f"{stream}, {kind} layers", b, note))
    shares = " + ".join(f"{stream} {byte_size(b)}" for stream, b in totals.items())
    this_run = f"after {plural(cache['positions'], 'position', n(cache['positions']))} ({shares}){run}"
    context = m["kv_cache"]["context"]
    whole = ("cache, whole context", cache["bytes_at_context"], plural(context, "position", n(context)))
    return [*items, ("cache, this run", cache["bytes"], this_run), whole]


def _indexer_keys(indexed: dict, run: str) -> list[tuple[str, int, str]]:
    """The keys an indexer keeps beside K and V, in every layer that attends (`indexed`: those layers' kinds): a row,
    or none where there is no indexer; `run`: the batch's, if the cache were on, as the rows beside it say."""
    if not indexed:
        return []
    keys = [k["rows"]["index_keys"] for k in indexed.values()]
    first = next(iter(indexed.values()))["positions"]
    held = (
        plural(first, "position", n(first))
        if all(k["positions"] == first for k in indexed.values())
        else "by layer type: " + ", ".join(f"{kind} {n(k['positions'])}" for kind, k in indexed.items())
    )
    layers = plural(sum(k["layers"] for k in indexed.values()), "layer")
    return [
        (
            "of which the indexer's keys",
            sum(r["bytes"] for r in keys),
            f"{layers} x {n(keys[0]['numbers_per_position'])} numbers a position x {held}{run}",
        )
    ]


def _kind_items(kind: str, k: dict, m: dict, per_seq: str, off: str) -> list[tuple[str, int, str]]:
    """A hybrid's cache rows for one kind of layer: its keys and values (a position's numbers, as count's report has
    them, and the positions held), its recurrent state (the same at any context), or both (a Falcon-H1 layer); a
    batch's bytes per token or of state are the batch's (`per_seq`); without the cache, what it would hold (`off`)."""
    items = []
    state = k.get("state_bytes", k["bytes"] if k.get("state") else 0)
    if "positions" in k:
        kv = k["bytes"] - state
        keys, values = k.get("key_numbers", 0), k.get("value_numbers", 0)
        numbers = n(keys) + (f" + {n(values)}" if values not in (0, keys) else "")  # as the terminal: K's, V's if other
        layers, held = plural(k["layers"], kind + " layer"), plural(k["positions"], "position", n(k["positions"]))
        per_token = byte_size(kv // max(k["positions"], 1))
        about = f"K and V x {layers} x {numbers} numbers: {per_token} per token{per_seq}; {held} here{off}"
        items.append((f"KV cache, {kind} layers", kv, about))
    if k.get("state"):
        arrays = " + ".join(f"{name} {shape(tuple(dims))}" for name, dims in k["state"].items())
        about = f"{arrays} numbers x {plural(k['layers'], kind + ' layer')}{per_seq}: the same at any context{off}"
        items.append((f"state, {kind} layers", state, about))
    return items


def _intensity_cells(x: dict | None) -> list[str]:
    if x is None:
        return [_cell("")] * 3
    value = x["macs_per_byte"]
    bound = "memory-bound" if x["memory_bound"] else "compute-bound"
    position = min(1.0, max(0.0, (np.log10(max(value, 1e-3)) + 1) / 5))  # 0.1 .. 10,000 MACs/byte
    dot = f'<span class="logbar"><span class="dot" style="left:{100 * position:.1f}%"></span></span>'
    return [
        _num(byte_size(x["bytes"])),
        _num(intensity(value), "intensity"),
        _cell(dot + bound, bound),
    ]


def _footer(data: dict) -> str:
    return (
        "<footer><p>This page is a view of the run's JSON ledger (the document <code>--json</code> writes, "
        'identical layers folded), which it carries inside itself: <code>&lt;script type="application/json" '
        f'class="mt-data"&gt;</code>. Made by minitransformer {escape(data["version"])}; it needs no network and '
        "no server, and reads with scripts off.</p></footer>"
    )


def write_page(destination, data: dict, out=None) -> None:
    """Write the page to a destination checked beforehand (files.check_destination), and say on `out`
    where it went and how to open it."""
    from .files import write_text

    write_text(destination, [page(data)])
    say_written(destination, out)


def say_written(destination, out=None) -> None:
    """Say on `out` where a page went and how to open it (nothing for a stream: it holds the page)."""
    if out is not None and destination.path is not None and not destination.is_stream:
        where = Path(destination.path).resolve().as_uri() if destination.kind == "file" else destination.name
        print(f"report written to {destination.name}: open it in a browser ({where})", file=out)
