"""The drawings of the HTML report, as inline SVG: one block's stages, the passes of a generation, attention maps.

Each function takes the ledger's records as `Record.to_dict()` wrote them (the JSON) and returns SVG
markup; nothing is counted here. The SVG is complete without script: every mark has a `<title>`, so
a browser shows its numbers on hover even with scripts off, and `data-*` attributes let the page's
script show the full record instead.

The block diagram draws each stage of one block in the order it runs. A matrix product is a box
whose area is proportional to its MACs (side ~ sqrt(MACs), one aspect ratio for all), so the eye
compares the work of the stages; a stage without dot products is a small dashed box of fixed size.
"""

from __future__ import annotations

import base64
import struct
import zlib
from html import escape

import numpy as np

from ..engine.stages import StageTable
from ..families.table import architecture_of
from ..text import count, count_range, human, operand_shapes, percent, plural, shape
from .colours import layer_colour, product_colour

WIDTH = 1040  # the drawings' coordinate width (they shrink to fit a narrower window)
_BOX_W, _BOX_H = 300, 112  # the largest product's box
_BOX_X = 52  # left edge of the box column; the residual stream runs at _STREAM_X
_STREAM_X = 24
_TEXT_X = _BOX_X + _BOX_W + 18
_LINE = 15
_INBOX_CHAR = 8.0  # the width of a character of an op's name in its box (12 px bold), a little over, to be safe


def stage_table(model: dict) -> StageTable:
    """Every stage the family of a ledger's model can have (its JSON names the family): what each op is."""
    return architecture_of(model).all_stages()


def colour(table: StageTable, op: str) -> str:
    """An op's colour: its kind of product's (views/colours.py), read from its family's stage table."""
    return product_colour(table.stages.get(op))


def operands(r: dict) -> str:
    """ "[5, 64] x [64, 192]"; a product computed in chunks of query rows says so after its dense shapes."""
    return operand_shapes(r["a_shape"], r["b_shape"], r.get("chunks"))


def length(r: dict) -> str:
    """The length of a product's dot products, or their range where row chunks computed several ("128-1,000")."""
    return count_range(r.get("dot_length_min", r["dot_length"]), r.get("dot_length_max", r["dot_length"]))


def dot_products_text(r: dict) -> str:
    """ "960 dot products of length 64 = 61,440 MACs": the rule, applied to one record."""
    return f"{count(r['dot_products'])} dot products of length {length(r)} = {count(r['macs'])} MACs"


def record_title(r: dict, table: StageTable) -> str:
    """A record as a few lines of text: the tooltip a browser shows without script."""
    lines = [f"{r['name']}  ({r['kind']})", r["equation"]]
    if r["kind"] == "matmul":
        lines += [f"{operands(r)} -> {shape(r['out_shape'])}", dot_products_text(r)]
        lines += [causal_text(r, attention_role(table, r["op"]))] if "causal_macs" in r else []
        lines += [recurrent_text(r)] if "recurrent_macs" in r else []
    else:
        lines += [f"out {shape(r['out_shape'])}: no dot products"]
    return "\n".join(lines)


# A line of the block diagram's text column holds at most this many characters, wrapped at spaces beyond it: the
# column is WIDTH - _TEXT_X = 670 units wide, and a 12 px monospace character about 7.2 (the browser tests measure it).
_LINE_CHARS = 84


def wrap(text: str, limit: int = _LINE_CHARS, indent: str = "  ") -> list[str]:
    """`text` in lines of at most `limit` characters, broken at spaces (a word longer than a line stays whole); the
    lines after the first are indented, so that a wrapped line reads as the one before it continued."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = word if not line else f"{line} {word}"
        if line and len(candidate) > limit:
            lines.append(line)
            line = indent + word
        else:
            line = candidate
    return [*lines, line]


def attention_role(table: StageTable, op: str) -> str:
    """An op's part in attention (Stage.attention: "scores", "mix" or ""), read from its family's stage table: the
    page's records are the JSON's, which name the op but not its part."""
    stage = table.stages.get(op)
    return "" if stage is None else stage.attention


def causal_text(r: dict, attention: str) -> str:
    """What the causal mask keeps of attention's product (`attention`: its part, "scores" or "mix")."""
    if attention == "scores":
        return f"causal: {count(r['causal_dot_products'])} of them needed ({count(r['causal_macs'])} MACs)"
    return f"causal: {count(r['causal_macs'])} MACs needed"


def recurrent_text(r: dict) -> str:
    """A scan's product computed in chunks: what the same positions cost one at a time, as a decode step runs them."""
    if not r["recurrent_macs"]:
        return "recurrent form: none (the chunks' own product)"
    return (
        f"recurrent form: {count(r['recurrent_dot_products'])} dot products, {count(r['recurrent_macs'])} MACs "
        "(position by position)"
    )


def _text(x: float, y: float, content: str, cls: str = "", anchor: str = "start") -> str:
    anchor_attr = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}"{anchor_attr}>{escape(content)}</text>'


def block_diagram(ops: list[dict], phase_index: int, run_index: int, table: StageTable) -> str:
    """One block of one pass, stage by stage, top to bottom (see the module docstring).

    `phase_index` and `run_index` locate the records in the page's data (document.phases[p].layers[r].ops); `table`:
    the family's stages, which say each product's kind (its colour) and which stages read the residual stream itself,
    where a branch leaves it. A branch rejoins the stream at a stage of kind "residual", a + on the stream."""
    products = [r for r in ops if r["kind"] == "matmul"]
    largest = max((r["macs"] for r in products), default=0) or 1
    block_macs = sum(r["macs"] for r in products)
    rows, y = [], 30.0
    centres = []
    for i, r in enumerate(ops):
        ref = f'data-phase="{phase_index}" data-run="{run_index}" data-index="{i}"'
        if r["kind"] == "matmul":
            parts, top, h, height = _product(r, y, r["macs"] / largest, block_macs, table)
        else:
            parts, top, h, height = _free_stage(r, y, table)
        title = f"<title>{escape(record_title(r, table))}</title>"
        rows.append(
            f'<g class="stage {escape(r["kind"])}" data-op="{escape(r["op"])}" {ref}>{title}{"".join(parts)}</g>'
        )
        centres.append((top, top + h))
        y += height
    arrows = []
    middle = _BOX_X + _BOX_W / 2
    for (_, bottom), (top, _) in zip(centres, centres[1:]):
        if top - bottom > 2:
            arrows.append(f'<line class="flow" x1="{middle}" y1="{bottom:.1f}" x2="{middle}" y2="{top:.1f}"/>')
    height = y + 16
    stream = f'<line class="stream" x1="{_STREAM_X}" y1="14" x2="{_STREAM_X}" y2="{height - 6:.1f}"/>' + _text(
        _STREAM_X - 14, 12, "x: the residual stream [T, D]", "stream-label"
    )
    return (
        f'<svg class="block-diagram" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" '
        f'role="img" aria-label="the stages of one transformer block">{stream}{"".join(arrows)}{"".join(rows)}'
        f"</svg>"
    )


def _product(
    r: dict, y: float, scale: float, block_macs: int, table: StageTable
) -> tuple[list[str], float, float, float]:
    """A matrix product's box, its area its share of the block's largest product's MACs (`scale`), in the product's
    colour, beside its equation, shapes and counts: (the SVG parts, the box's top and height, the row's height)."""
    side = scale**0.5
    w, h = max(3.0, _BOX_W * side), max(3.0, _BOX_H * side)
    equation = wrap(r["equation"])
    lines = [
        *equation,
        *wrap(f"{operands(r)} -> {shape(r['out_shape'])}"),
        *wrap(f"{dot_products_text(r)} ({percent(r['macs'], block_macs)} of the block)"),
    ]
    if "causal_macs" in r:
        lines += wrap(causal_text(r, attention_role(table, r["op"])))
    if "recurrent_macs" in r:
        lines += wrap(recurrent_text(r))
    height = max(h, _LINE * (len(lines) + 1)) + 12
    top = y + (height - h) / 2
    x = _BOX_X + (_BOX_W - w) / 2
    parts = [
        f'<rect class="box product" x="{x:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" '
        f'fill="{colour(table, r["op"])}"/>'
    ]
    if w >= _INBOX_CHAR * len(r["op"]) + 10 and h >= 18:  # the name inside the box only where it fits
        parts.append(_text(_BOX_X + _BOX_W / 2, top + h / 2 + 4, r["op"], "inbox", "middle"))
    text_top = y + (height - _LINE * (len(lines) + 1)) / 2 + 12
    parts.append(_text(_TEXT_X, text_top, r["op"], "op"))
    for k, line in enumerate(lines):
        parts.append(_text(_TEXT_X, text_top + _LINE * (k + 1), line, "eq" if k < len(equation) else "numbers"))
    if r["op"] in table.stream_readers:  # a product that reads the stream itself (OLMo 2 has no pre-norms)
        cy = top + h / 2
        parts.append(f'<line class="stream-link" x1="{_STREAM_X}" y1="{cy:.1f}" x2="{x:.1f}" y2="{cy:.1f}"/>')
    return parts, top, h, height


def _free_stage(r: dict, y: float, table: StageTable) -> tuple[list[str], float, float, float]:
    """A stage without dot products: a small box, the op's name and its equation on the first line (wrapped where
    long), then what it makes; a + on the stream where the stream takes a branch back in (as _product returns)."""
    equation = wrap(f"{r['op']}\u00a0\u00a0{r['equation']}")
    equation[0] = equation[0].removeprefix(f"{r['op']}\u00a0\u00a0")
    height = 40 + _LINE * (len(equation) - 1)
    w, h = 132, 22
    top = y + (height - h) / 2
    x = _BOX_X + (_BOX_W - w) / 2
    made = f"out {shape(r['out_shape'])}: no dot products ({r['kind']})"
    text_top = top + 9 - _LINE * (len(equation) - 1) / 2
    parts = [
        f'<rect class="box free" x="{x:.1f}" y="{top:.1f}" width="{w}" height="{h}"/>',
        _text(_BOX_X + _BOX_W / 2, top + 15, r["op"], "inbox free-name", "middle"),
        f'<text x="{_TEXT_X}" y="{text_top:.1f}" class="eq"><tspan class="op">{escape(r["op"])}</tspan>'
        f"\u00a0\u00a0{escape(equation[0])}</text>",
        *(_text(_TEXT_X, text_top + _LINE * k, line, "eq") for k, line in enumerate(equation[1:], 1)),
        _text(_TEXT_X, text_top + _LINE * len(equation), made, "free-note"),
    ]
    cy = top + h / 2
    if r["kind"] == "residual":  # where the stream takes the branch back in
        parts.append(
            f'<line class="stream-link" x1="{_STREAM_X}" y1="{cy:.1f}" x2="{x:.1f}" y2="{cy:.1f}"/>'
            f'<circle class="stream-add" cx="{_STREAM_X}" cy="{cy:.1f}" r="8"/>'
            + _text(_STREAM_X, cy + 4.5, "+", "plus", "middle")
        )
    elif r["op"] in table.stream_readers:  # where a branch leaves the stream
        parts.append(f'<line class="stream-link" x1="{_STREAM_X}" y1="{cy:.1f}" x2="{x:.1f}" y2="{cy:.1f}"/>')
    return parts, top, h, height


def passes_chart(steps: list[dict], cached: bool, cache: str = "KV cache") -> str:
    """MACs of each pass with and without the cache (`cache`: what it holds, report.cache_name): paired bars, or two
    lines for many passes."""
    width, height, left, bottom, top = WIDTH, 230, 78, 34, 14
    n = len(steps)
    highest = max(max(s["with_cache_macs"], s["without_cache_macs"]) for s in steps) or 1
    plot_w, plot_h = width - left - 12, height - top - bottom

    def y_of(macs: float) -> float:
        return top + plot_h * (1 - macs / highest)

    marks = []
    for k in range(5):  # gridlines at 0, 1/4, ... of the highest
        value = highest * k / 4
        y = y_of(value)
        marks.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{width - 12}" y2="{y:.1f}"/>'
            + _text(left - 6, y + 4, human(value), "axis", "end")
        )
    if n <= 48:
        marks += _paired_bars(steps, y_of, left, plot_w, top + plot_h, height - bottom + 14)
    else:
        for key, cls in (("with_cache_macs", "with"), ("without_cache_macs", "without")):
            points = " ".join(f"{left + plot_w * i / (n - 1):.1f},{y_of(s[key]):.1f}" for i, s in enumerate(steps))
            marks.append(f'<polyline class="line-{cls}" points="{points}"/>')
        for i in range(0, n, max(1, n // 8)):
            marks.append(
                _text(left + plot_w * i / (n - 1), height - bottom + 14, str(steps[i]["step"]), "axis", "middle")
            )
    legend_y = height - 6
    legend = (
        f'<rect class="bar-with" x="{left}" y="{legend_y - 9}" width="10" height="10"/>'
        + _text(left + 14, legend_y, f"with the {cache}" + (" (this run)" if cached else ""), "axis")
        + f'<rect class="bar-without" x="{left + 220}" y="{legend_y - 9}" width="10" height="10"/>'
        + _text(
            left + 234,
            legend_y,
            "without it" + ("" if cached else " (this run)") + ": every step recomputes the whole sequence",
            "axis",
        )
    )
    return (
        f'<svg class="passes-chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="MACs per pass with and without the {cache}">{"".join(marks)}{legend}'
        f'<text x="{left}" y="{top - 2}" class="axis">MACs per pass</text></svg>'
    )


def _paired_bars(steps: list[dict], y_of, left: float, plot_w: float, floor: float, label_y: float) -> list[str]:
    """passes_chart's bars: a pair for each pass, with the cache and without, from `floor` up to `y_of` its MACs,
    and the pass's step under its pair (every few where there are many)."""
    n, marks = len(steps), []
    slot = plot_w / n
    bar = min(22.0, slot * 0.38)
    for i, s in enumerate(steps):
        x = left + slot * i + slot / 2
        tip = f"step {s['step']}: {count(s['with_cache_macs'])} MACs with the cache, {count(s['without_cache_macs'])} without"
        for dx, key, cls in ((-bar, "with_cache_macs", "with"), (0, "without_cache_macs", "without")):
            y = y_of(s[key])
            marks.append(
                f'<rect class="bar-{cls}" x="{x + dx:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                f'height="{floor - y:.1f}" data-step="{s["step"]}"><title>{escape(tip)}</title>'
                f"</rect>"
            )
        if n <= 16 or i % max(1, n // 12) == 0:
            marks.append(_text(x, label_y, "prefill" if s["step"] == 0 else str(s["step"]), "axis", "middle"))
    return marks


# An axis label is a number in the drawings' 12 px type (report.css): a digit about 8 units wide (DejaVu Sans's
# 0.64 em, a little over) and a line 15 units high; labels side by side keep a gap between them. The browser tests
# measure that none overlap.
_DIGIT, _LABEL_GAP, _AXIS_LINE = 8.0, 4.0, 15.0


def label_step(cell: float, room: float) -> int:
    """Every how many cells of `cell` units to label an axis so that labels `room` units apart fit: the least of
    1, 2, 5, 10, 20, 50, ... (labels at round numbers) that leaves them room."""
    scale = 1
    while True:
        for step in (scale, 2 * scale, 5 * scale):
            if step * cell >= room:
                return step
        scale *= 10


def expert_load(tokens: np.ndarray, first_layer: int = 0) -> str:
    """Tokens per expert [layers, E] as an image, a row per layer and a column per expert, white (none) to dark
    blue (the busiest), each cell's count in its tooltip: where a mixture of experts sent its tokens."""
    L, E = tokens.shape
    cell = max(6, min(24, 560 // max(E, 1)))
    left, top = 70, 40  # the title "expert" above the numbers, a line apart
    image = base64.b64encode(heatmap_png(tokens / max(int(tokens.max()), 1), cell)).decode()
    parts = [
        f'<image href="data:image/png;base64,{image}" x="{left}" y="{top}" width="{E * cell}" '
        f'height="{L * cell}" class="heat"/>',
        _text(left, 14, "expert", "axis"),
        _text(4, top - 6, "layer", "axis"),
    ]
    every = label_step(cell, len(str(E - 1)) * _DIGIT + _LABEL_GAP)  # the widest number and a gap between two
    for e in range(0, E, every):
        parts.append(_text(left + e * cell + cell / 2, top - 6, str(e), "axis", "middle"))
    for i in range(0, L, label_step(cell, _AXIS_LINE)):
        parts.append(_text(left - 6, top + i * cell + cell / 2 + 4, str(first_layer + i), "axis", "end"))
    for i in range(L):  # a tooltip per cell: which layer, which expert, how many tokens
        for e in range(E):
            parts.append(
                f'<rect class="cell" x="{left + e * cell}" y="{top + i * cell}" width="{cell}" '
                f'height="{cell}" fill="transparent"><title>layer {first_layer + i}, expert {e}: '
                f"{plural(int(tokens[i, e]), 'token', count(int(tokens[i, e])))}</title></rect>"
            )
    width, height = left + E * cell + 12, top + L * cell + 12
    return (
        f'<svg class="expert-load" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="tokens per expert, layer by layer">{"".join(parts)}</svg>'
    )


# --- the layers by kind -----------------------------------------------------------------------------------
# One colour a kind of layer (views/colours.py's palette of layers: none is a product's), in the order the kinds first
# come (a hybrid's linear, state-space or sparse layers beside its full attention; dense and MoE layers): the pattern a
# config's layer_types spell, drawn.
_KIND_CHAR = 7.0  # the width of a character of the legend (12 px), a little over


def layer_pattern(kinds: list[str]) -> str:
    """Each layer a square coloured by its kind, layer 0 first, wrapped into rows; a legend names each kind and how
    many layers are of it. Each square's tooltip says its layer and kind."""
    order = list(dict.fromkeys(kinds))
    fill = {kind: layer_colour(i) for i, kind in enumerate(order)}
    left, top, gap = 56, 22, 2
    per_row = min(len(kinds), 48)
    cell = max(10, min(24, (WIDTH - left - 12) // per_row - gap))
    rows = -(-len(kinds) // per_row)
    parts = [_text(4, top + cell - 4, "layer", "axis")]
    for start in range(0, len(kinds), per_row):
        y = top + (start // per_row) * (cell + gap + 14)
        parts.append(_text(left, y - 4, str(start), "axis"))
        for i in range(start, min(start + per_row, len(kinds))):
            x = left + (i - start) * (cell + gap)
            parts.append(
                f'<rect class="layer-kind" data-layer="{i}" data-kind="{escape(kinds[i])}" x="{x}" y="{y}" '
                f'width="{cell}" height="{cell}" fill="{fill[kinds[i]]}"><title>layer {i}: {escape(kinds[i])}</title>'
                "</rect>"
            )
    y, x = top + rows * (cell + gap + 14) + 8, left
    widest = left
    for kind in order:
        text = f"{kind} ({plural(kinds.count(kind), 'layer')})"
        if x > left and x + 18 + len(text) * _KIND_CHAR > WIDTH - 8:  # the next legend row
            x, y = left, y + 20
        parts.append(f'<rect class="swatch" x="{x}" y="{y - 10}" width="12" height="12" fill="{fill[kind]}"/>')
        parts.append(_text(x + 18, y, text, "legend"))
        x += 18 + int(len(text) * _KIND_CHAR) + 24
        widest = max(widest, x)
    width = max(left + per_row * (cell + gap), widest) + 8
    height = y + 10
    return (
        f'<svg class="layer-pattern" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="the layers by kind">{"".join(parts)}</svg>'
    )


# --- attention maps ---------------------------------------------------------------------------------------
_LOW, _HIGH, _HIDDEN = np.array([255, 255, 255]), np.array([8, 48, 107]), np.array([232, 232, 232])


def heatmap_png(weights: np.ndarray, cell: int) -> bytes:
    """[N, N] weights (NaN: masked) as a PNG, `cell` pixels a cell: white (0) to dark blue (1), masked grey."""
    w = np.nan_to_num(np.clip(weights, 0, 1), nan=0.0)[..., None]
    rgb = _LOW + (_HIGH - _LOW) * w
    rgb[np.isnan(weights)] = _HIDDEN
    rgb = np.repeat(np.repeat(rgb.round().astype(np.uint8), cell, axis=0), cell, axis=1)
    return png(rgb)


def png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB image [h, w, 3] as PNG bytes (no filter: the rows compress well as they are)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + row.tobytes() for row in np.ascontiguousarray(rgb, dtype=np.uint8))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


# A token label is at most 10 characters of 11 px monospace (about 67 px); turned 60 degrees, it reaches
# cos(60) x 67 = 34 px to the right of where it starts, 4 px right of its column's middle.
_TOKEN_OVERHANG = 48


def cell_size(n: int) -> int:
    return int(min(22, max(4, 300 // max(n, 1))))


def label(piece: str, limit: int = 10) -> str:
    """A token as a short label: spaces and newlines made visible, long ones cut."""
    text = piece.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def heatmap(weights: np.ndarray, pieces: list[str], first: int, head: int, layer: int, hatch_id: str) -> str:
    """One head's attention as an image of query rows x key columns, tokens along both edges, the masked
    cells hatched. `first` is the position of the first row and column shown."""
    n = weights.shape[-1]
    cell = cell_size(n)
    margin_left, margin_top = 78, 70
    size = n * cell
    every = max(1, -(-11 // cell))  # label every k-th token when cells are smaller than the text
    image = base64.b64encode(heatmap_png(weights, cell)).decode()
    parts = [
        f'<image href="data:image/png;base64,{image}" x="{margin_left}" y="{margin_top}" width="{size}" '
        f'height="{size}" class="heat" data-head="{head}"/>'
    ]
    hidden = np.isnan(weights)
    path = []
    for i in range(n):  # each row's masked cells are at most two runs: behind the window, and the future
        row = hidden[i]
        j = 0
        while j < n:
            if row[j]:
                k = j
                while k < n and row[k]:
                    k += 1
                left, top, w = margin_left + j * cell, margin_top + i * cell, (k - j) * cell
                path.append(f"M{left} {top}h{w}v{cell}h{-w}z")
                j = k
            else:
                j += 1
    if path:
        parts.append(
            f'<path d="{"".join(path)}" fill="url(#{hatch_id})" class="masked"><title>masked: a query '
            f"never sees these keys (its future{', or behind its window' if hidden[-1, 0] else ''})"
            f"</title></path>"
        )
    for i in range(0, n, every):
        text = escape(label(pieces[first + i]) if first + i < len(pieces) else "")
        y = margin_top + i * cell + cell / 2 + 4
        parts.append(f'<text x="{margin_left - 4}" y="{y:.1f}" class="tok" text-anchor="end">{text}</text>')
        x = margin_left + i * cell + cell / 2 + 4
        parts.append(
            f'<text x="{x:.1f}" y="{margin_top - 4}" class="tok" transform="rotate(-60 {x:.1f} '
            f'{margin_top - 4})">{text}</text>'
        )
    parts.append(_text(margin_left, 12, f"head {head}", "head-title"))
    # the last column's label, turned 60 degrees, reaches about half its length beyond the grid: room for it
    width, height = margin_left + size + _TOKEN_OVERHANG, margin_top + size + 8
    return (
        f'<svg class="heatmap" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="layer {layer} head {head} attention weights" data-layer="{layer}" data-head="{head}" '
        f'data-n="{n}" data-cell="{cell}" data-left="{margin_left}" data-top="{margin_top}">{"".join(parts)}'
        f"</svg>"
    )


def hatch_pattern(hatch_id: str) -> str:
    """The pattern masked cells are drawn with (defined once per report)."""
    return (
        f'<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
        f'<pattern id="{hatch_id}" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ececec"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="#b5b5b5" stroke-width="2"/></pattern></defs></svg>'
    )


# --- drift against float64 ----------------------------------------------------------------------------------
DRIFT_FLOOR = 1e-6  # relative drift at or below this is drawn white; 1 (all of the value) and above, darkest
# White, then yellow (1e-4), orange (1e-2), dark red (1): a float32 pass stays white, bfloat16 is yellow to orange
_DRIFT_STOPS = np.array([[255, 255, 255], [254, 227, 145], [236, 112, 20], [103, 0, 13]])


def drift_colour(rel: float | None) -> str:
    """White (1e-6 or less) through yellow and orange to dark red (1: the error as large as the values), on a log
    scale; black where our values are not finite (None in the JSON)."""
    if rel is None:
        return "#000"
    level = float(np.clip(np.log10(max(rel, DRIFT_FLOOR) / DRIFT_FLOOR) / -np.log10(DRIFT_FLOOR), 0, 1))
    where = level * (len(_DRIFT_STOPS) - 1)
    i = min(int(where), len(_DRIFT_STOPS) - 2)
    r, g, b = (_DRIFT_STOPS[i] + (_DRIFT_STOPS[i + 1] - _DRIFT_STOPS[i]) * (where - i)).round().astype(int)
    return f"#{r:02x}{g:02x}{b:02x}"


def drift_heatmap(drift: dict) -> str:
    """The drift ledger's `layers` as an image of layers (rows) x stages (columns), each cell coloured by the stage's
    max rel (drift_colour), outlined red where the precision overflowed there and blue where values that matter
    flushed to zero; every cell's numbers in its tooltip."""
    stages: dict[str, None] = {}
    for layer in drift["layers"]:
        for s in layer["stages"]:
            stages.setdefault(s["stage"])
    columns = list(stages)
    cell = 22
    left, top = 56, 12 + 7 * max((len(c) for c in columns), default=4)
    parts = [_text(4, top - 6, "layer", "axis")]
    for j, name in enumerate(columns):
        x, y = left + j * cell + cell / 2 + 4, top - 6
        parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" class="axis" transform="rotate(-60 {x:.1f} {y:.1f})">{escape(name)}</text>'
        )
    for i, layer in enumerate(drift["layers"]):
        y = top + i * cell
        parts.append(_text(left - 6, y + cell / 2 + 4, str(layer["layer"]), "axis", "end"))
        by_name = {s["stage"]: s for s in layer["stages"]}
        for j, name in enumerate(columns):
            s = by_name.get(name)
            if s is None:
                continue
            mark = " overflow" if s.get("overflow") else " underflow" if s.get("underflow") else ""
            rel = "inf" if s["max_rel"] is None else f"{s['max_rel']:.2e}"
            rms = "inf" if s["rms_rel"] is None else f"{s['rms_rel']:.2e}"
            tip = f"layer {layer['layer']} {name}: max rel {rel}, rms rel {rms}, max |x| {s['max_abs']:.4g}" + (
                f", {mark.strip()}" if mark else ""
            )
            parts.append(
                f'<rect class="cell{mark}" x="{left + j * cell}" y="{y}" width="{cell}" height="{cell}" '
                f'fill="{drift_colour(s["max_rel"])}" data-stage="{escape(name)}" '
                f'data-layer="{layer["layer"]}"><title>{escape(tip)}</title></rect>'
            )
    width = left + len(columns) * cell + 7 * max((len(c) for c in columns), default=4) // 2 + 12  # the last label
    height = top + len(drift["layers"]) * cell + 12
    return (
        f'<svg class="drift-map" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="relative drift against float64, layers by stages">{"".join(parts)}</svg>'
    )
