"""The analyses' sections of the HTML report (lens, patch, attribute): each a view of its command's JSON document,
drawn as a heatmap of layers by positions (or a table), with the bill the analysis ran up."""

from __future__ import annotations

import math
from html import escape

import numpy as np

from ..text import human

CELL = 26  # a heatmap's cell, px


def share_colour(value: float | None, scale: float = 1.0) -> str:
    """White at 0, red towards +scale, blue towards -scale (clipped); grey where there is no value (None, or NaN: a run
    whose arithmetic overflowed)."""
    if value is None or math.isnan(value):
        return "#ddd"
    level = float(np.clip(value / scale, -1, 1))
    fade = round(255 * (1 - abs(level)))
    return f"#ff{fade:02x}{fade:02x}" if level >= 0 else f"#{fade:02x}{fade:02x}ff"


def heatmap(rows: list[tuple[str, list[float | None]]], columns: list[str], what: str, scale: float = 1.0) -> str:
    """Rows by columns as an SVG image, each cell coloured by its value (share_colour) and written in it, each cell's
    row, column and value in its tooltip."""
    left = 12 + 7 * max((len(label) for label, _ in rows), default=4)
    top = 12 + 6 * max((len(c) for c in columns), default=4)
    parts = []
    for j, name in enumerate(columns):
        x, y = left + j * CELL + CELL / 2 + 4, top - 6
        parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" class="axis" transform="rotate(-60 {x:.1f} {y:.1f})">{escape(name)}</text>'
        )
    for i, (label, values) in enumerate(rows):
        y = top + i * CELL
        parts.append(
            f'<text x="{left - 6}" y="{y + CELL / 2 + 4:.1f}" class="axis" text-anchor="end">{escape(label)}</text>'
        )
        for j, value in enumerate(values):
            shown = "n/a" if value is None else f"{value:.3f}"
            tip = f"{label}, {columns[j]}: {what} {shown}"
            parts.append(
                f'<rect class="cell" x="{left + j * CELL}" y="{y}" width="{CELL}" height="{CELL}" '
                f'fill="{share_colour(value, scale)}"><title>{escape(tip)}</title></rect>'
                f'<text x="{left + j * CELL + CELL / 2:.1f}" y="{y + CELL / 2 + 3:.1f}" class="value" '
                f'text-anchor="middle">{"" if value is None else f"{value:.2f}".replace("-0.00", "0.00")}</text>'
            )
    width, height = left + len(columns) * CELL + 40, top + len(rows) * CELL + 12
    return (
        f'<svg class="drift-map share-map" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(what)}">{"".join(parts)}</svg>'
    )


def bill_table(bill: dict) -> str:
    """An analysis's bill: a row an item, then the total's row in the same form, then what the analysis saved."""
    lines = [("<tr>", i) for i in bill["items"]] + [('<tr class="total">', bill | {"what": "total"})]
    rows = [
        f'{tr}<td>{escape(i["what"])}</td><td class="num">{i["passes"]:,}</td>'
        f'<td class="num">{human(i["dot_products"])}</td><td class="num">{human(i["macs"])}</td></tr>'
        for tr, i in lines
    ]
    s = bill.get("saved")
    note = (
        f"<p>{escape(s['what'])}: {human(s['dot_products'])} dot products, {human(s['macs'])} MACs "
        f"({s['macs']:,}).</p>"  # as the terminal's bill says it
        if s
        else ""
    )
    return (
        '<h3>Its bill</h3><table class="bill"><tr><th>what</th><th>passes</th><th>dot products</th>'
        f"<th>MACs</th></tr>{''.join(rows)}</table>{note}"
    )


def _pieces(ids: list[int], pieces: list[str | None] | None) -> list[str]:
    """A heatmap's column of each position: its token as text and its position, or its id where nothing decoded it."""
    return [
        f"{p!r} {k}" if p is not None else f"{i} {k}" for k, (i, p) in enumerate(zip(ids, pieces or [None] * len(ids)))
    ]


def patch_section(doc: dict) -> str:
    """patch's document: the stream's heatmap (layers by positions), the heads' where asked, the bill."""
    columns = _pieces(doc["clean"]["ids"], doc["clean"]["pieces"])
    word = lambda t: repr(t["text"]) if t["text"] is not None else f"id {t['id']}"  # noqa: E731
    head = (
        f"<p>The share of logit({escape(word(doc['target']))}) - logit({escape(word(doc['versus']))}) each patch "
        f"restores: clean {doc['clean_difference']:.4f}, corrupted {doc['corrupt_difference']:.4f}. "
        f"{escape(doc['conventions'])}. Red: restored (1, all of it), blue: pushed the other way.</p>"
    )
    stream = heatmap([(f"block {i}", row) for i, row in enumerate(doc["residual"])], columns, "share restored")
    out = ['<section class="patch"><h2>Activation patching</h2>', head]
    out += ["<h3>The stream each block reads, patched at one position</h3>", f'<div class="diagram">{stream}</div>']
    if "heads" in doc and not doc["head_layers"]:
        out += ["<h3>Each head's output</h3><p>No layer of this model has attention heads to patch.</p>"]
    elif "heads" in doc:  # a layer's cells are [position][head], in the layers whose heads were patched
        rows = [
            (f"block {i} head {h}", list(cells))
            for i in doc["head_layers"]
            for h, cells in enumerate(zip(*doc["heads"][i]))
        ]
        out += [
            "<h3>Each head's output, patched at one position</h3>",
            f'<div class="diagram">{heatmap(rows, columns, "share restored")}</div>',
        ]
    return "\n".join([*out, bill_table(doc["bill"]), "</section>"])


def lens_section(doc: dict) -> str:
    """lens's document: the target's probability per entry (by position where every position was read), the top
    tokens of the last position's entries, the bill."""
    target = doc["target"]
    word = repr(target["text"]) if target["text"] is not None else f"id {target['id']}"
    labels = list(dict.fromkeys(e["entry"] for e in doc["entries"]))
    positions = sorted({e["position"] for e in doc["entries"]})
    by = {(e["entry"], e["position"]): e for e in doc["entries"]}
    rows = [(label, [by[label, p]["probability"] for p in positions]) for label in labels]
    every = _pieces(doc["prompt"], doc.get("prompt_pieces"))
    columns = [every[p] for p in positions]
    last = positions[-1]
    table = "".join(
        f'<tr><td>{escape(label)}</td><td class="num">{by[label, last]["rank"]:,}</td>'
        f'<td class="num">{by[label, last]["probability"]:.4f}</td><td>'
        + escape(", ".join(f"{t['text']!r} {t['probability']:.3f}" for t in by[label, last]["top"]))
        + "</td></tr>"
        for label in labels
    )
    return "\n".join(
        [
            '<section class="lens"><h2>The logit lens</h2>',
            f"<p>{escape(word)}'s probability read from each layer's stream; {escape(doc['conventions'])}.</p>",
            f'<div class="diagram">{heatmap(rows, columns, "probability")}</div>',
            f'<h3>At position {last}</h3><table class="lens"><tr><th>entry</th><th>rank</th><th>p</th>'
            f"<th>top tokens</th></tr>{table}</table>",
            bill_table(doc["bill"]),
            "</section>",
        ]
    )


BAR = 240  # the widest bar of the attribution's chart, px


def _bar_row(label: str, value: float, largest: float, piece: bool) -> str:
    """One row of the attribution's chart: its label, its value, a bar as long as |value| (red: for the target)."""
    width = round(BAR * abs(value) / largest) if largest and math.isfinite(value) else 0  # NaN, inf: no bar
    colour = share_colour(value, largest or 1.0) if width else "#ddd"
    kind = "piece" if piece else "part"
    indent = "&nbsp;&nbsp;&nbsp;&nbsp;" if piece else ""
    return (
        f'<tr class="{kind}"><td>{indent}{escape(label)}</td><td class="num">{value:.4f}</td><td>'
        f'<div class="bar" style="width:{width}px;height:12px;background:{colour}" '
        f'title="{escape(label)}: {value:.4f}"></div></td></tr>'
    )


def attribute_section(doc: dict) -> str:
    """attribute's document: each part's share of the logit difference as a bar (red: towards the target, blue:
    towards the other token), a split part's pieces (heads, experts) indented below it, the sum, the bill."""
    word = lambda t: repr(t["text"]) if t["text"] is not None else f"id {t['id']}"  # noqa: E731
    values = [p["attribution"] for p in doc["parts"]] + [
        q["attribution"] for p in doc["parts"] for q in p.get("pieces", [])
    ]
    largest = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    rows = []
    for part in doc["parts"]:
        rows.append(_bar_row(part["part"], part["attribution"], largest, False))
        rows += [_bar_row(q["piece"], q["attribution"], largest, True) for q in part.get("pieces", [])]
    total = sum(p["attribution"] for p in doc["parts"])
    head = (
        f"<p>logit({escape(word(doc['target']))}) - logit({escape(word(doc['versus']))}) at the last position: "
        f"{doc['difference']:.4f}, split among what wrote the stream the final norm reads; "
        f"{escape(doc['conventions'])}. Red: towards the target, blue: towards the other token; a split "
        f"part's pieces (its heads, its experts) below it, summing to it.</p>"
    )
    table = '<table class="attribution"><tr><th>part</th><th>contribution</th><th></th></tr>'
    total_row = f'<tr class="total"><td>sum of the parts</td><td class="num">{total:.4f}</td><td></td></tr></table>'
    section = ['<section class="attribute"><h2>Direct logit attribution</h2>', head, table, *rows, total_row]
    return "\n".join([*section, bill_table(doc["bill"]), "</section>"])


# an analysis's report -> its section
SECTIONS = {"patch": patch_section, "lens": lens_section, "attribute": attribute_section}
