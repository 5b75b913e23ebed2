"""The HTML report's roofline (count --hardware): the machine's roof drawn on log-log axes, each product of the prefill
and of a decode step a point at its arithmetic intensity, and the same numbers as a table.

A view of the count's JSON `hardware` object (verbs/roofline.py's Roofline.to_dict()); nothing is counted here. On
a roofline, a product at intensity I (MACs per byte moved) can at best run at min(peak, 2 I bandwidth) FLOP/s: on the
slanted roof it waits on memory, on the flat one on arithmetic. The points sit on the roof by construction, since
their times are the roofline's bounds: what the drawing shows is where each product sits, and how far from the ridge.
"""

from __future__ import annotations

import math
from html import escape

from ..engine.stages import StageTable
from ..text import count as n
from ..text import human, percent, seconds
from .html_drawings import WIDTH, colour, stage_table

_HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM = 340, 86, 24, 18, 46


def _decades(low: float, high: float) -> tuple[int, int]:
    return math.floor(math.log10(low)), math.ceil(math.log10(high))


def _points(hw: dict) -> list[tuple[str, dict]]:
    return [(phase, op) for phase in ("prefill", "decode") if hw.get(phase) for op in hw[phase]["ops"] if op["bytes"]]


def _tip(phase: str, op: dict, hw: dict) -> str:
    flops = 2 * op["macs"] / op["time_s"] if op["time_s"] else 0
    return (
        f"{op['op']} ({phase}): {n(op['macs'])} MACs, {human(op['bytes'])}B moved, "
        f"{op['macs_per_byte']:.3g} MACs/byte; at least {seconds(op['time_s'])} on {hw['name']} "
        f"({human(flops)}FLOP/s at best): {op['bound']}-bound"
    )


def roofline_chart(hw: dict, table: StageTable) -> str:
    """The roof (min(peak, 2 I bandwidth)) and each product as a point, log-log, in its kind of product's colour (the
    family's `table` says each op's)."""
    peak, bandwidth = hw["peak_flops"], hw["bandwidth_bytes_per_s"]
    ridge = hw["balance_macs_per_byte"]
    points = _points(hw)
    intensities = [op["macs_per_byte"] for _, op in points] + [ridge]
    x_low, x_high = _decades(min(intensities) / 2, max(intensities) * 4)
    y_low, y_high = _decades(min(peak, 2 * bandwidth * 10.0**x_low), peak * 1.01)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x_of(intensity: float) -> float:
        return _LEFT + plot_w * (math.log10(intensity) - x_low) / (x_high - x_low)

    def y_of(flops: float) -> float:
        return _TOP + plot_h * (1 - (math.log10(flops) - y_low) / (y_high - y_low))

    decades = [(10.0**k, x_of(10.0**k)) for k in range(x_low, x_high + 1)]  # gridlines at each power of 10
    marks = [
        f'<line class="grid" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + plot_h}"/>'
        f'<text x="{x:.1f}" y="{_TOP + plot_h + 16}" class="axis" text-anchor="middle">{value:g}</text>'
        for value, x in decades
    ]
    decades = [(10.0**k, y_of(10.0**k)) for k in range(y_low, y_high + 1)]
    marks += [
        f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}"/>'
        f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">{human(value)}</text>'
        for value, y in decades
    ]
    start = 10.0**x_low
    roof = [(start, 2 * bandwidth * start), (ridge, peak), (10.0**x_high, peak)]
    if 2 * bandwidth * start > peak:  # the whole range is past the ridge
        roof = [(start, peak), (10.0**x_high, peak)]
    path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in roof)
    marks.append(
        f'<polyline class="roof" points="{path}"><title>the roof: min(peak {human(peak)}FLOP/s, 2 x '
        f"intensity x {human(bandwidth)}B/s)</title></polyline>"
    )
    marks.append(
        f'<text x="{x_of(ridge) + 6:.1f}" y="{y_of(peak) - 6:.1f}" class="axis">ridge: {ridge:,.0f} MACs/byte</text>'
    )
    for phase, op in points:
        marks.append(_point(phase, op, x_of(op["macs_per_byte"]), y_of(2 * op["macs"] / op["time_s"]), hw, table))
    legend_y = _HEIGHT - 8
    legend = (
        f'<circle cx="{_LEFT + 5}" cy="{legend_y - 4}" r="5" class="legend-mark"/>'
        f'<text x="{_LEFT + 14}" y="{legend_y}" class="axis">the prefill\'s products</text>'
        f'<rect x="{_LEFT + 170}" y="{legend_y - 9}" width="10" height="10" class="legend-mark"/>'
        f'<text x="{_LEFT + 186}" y="{legend_y}" class="axis">a decode step\'s</text>'
        f'<text x="{_LEFT + plot_w}" y="{legend_y}" class="axis" text-anchor="end">arithmetic intensity, MACs '
        f"per byte moved (log)</text>"
    )
    return (
        f'<svg class="roofline-chart" viewBox="0 0 {WIDTH} {_HEIGHT}" width="{WIDTH}" height="{_HEIGHT}" '
        f'role="img" aria-label="roofline: each product at its arithmetic intensity">{"".join(marks)}{legend}'
        f'<text x="{_LEFT}" y="{_TOP - 4}" class="axis">FLOP/s at best (log)</text></svg>'
    )


def _point(phase: str, op: dict, x: float, y: float, hw: dict, table: StageTable) -> str:
    """A product at (x, y), in its kind's colour: a circle for the prefill's, a square for a decode step's."""
    tip = escape(_tip(phase, op, hw))
    attrs = f'class="point {phase}" fill="{colour(table, op["op"])}" data-tip="{tip}" data-op="{escape(op["op"])}"'
    if phase == "prefill":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" {attrs}><title>{tip}</title></circle>'
    return f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" {attrs}><title>{tip}</title></rect>'


def roofline_section(doc: dict) -> str:
    """The section, or "" where the count had no --hardware."""
    hw = doc.get("hardware")
    if not hw:
        return ""
    rows = []
    for phase, op in _points(hw):
        total = hw[phase]["time_s"]
        flops = 2 * op["macs"] / op["time_s"] if op["time_s"] else 0
        rows.append(
            f'<tr data-tip="{escape(_tip(phase, op, hw))}"><td>{phase}</td><td>{escape(op["op"])}</td>'
            f'<td class="num">{n(op["macs"])}</td><td class="num">{human(op["bytes"])}B</td>'
            f'<td class="num">{op["macs_per_byte"]:.3g}</td><td class="num">{human(flops)}FLOP/s</td>'
            f'<td class="num">{seconds(op["time_s"])}</td><td class="num">{percent(op["time_s"], total)}</td>'
            f'<td class="{op["bound"]}-bound">{op["bound"]}</td></tr>'
        )
    decode = hw.get("decode")
    totals = f"Prefill of {hw['prefill']['tokens']:,} tokens: at least {seconds(hw['prefill_s'])}."
    if decode:
        totals += (
            f" Decode at context {decode['context']:,}: at most {hw['decode_tokens_per_s']:,.1f} tokens/s"
            f" (a step at least {seconds(decode['time_s'])})."
        )
        batch = hw.get("compute_bound_batch")
        totals += (
            f" A decode step turns compute-bound at a batch of {batch:,}."
            if batch
            else " No batch turns a decode step compute-bound at this context."
        )
    headers = "".join(
        f"<th>{h}</th>"
        for h in ("pass", "op", "MACs", "bytes", "MACs/byte", "FLOP/s at best", "time at least", "share", "bound")
    )
    return (
        f'<section class="roofline"><h2>Roofline on {escape(hw["label"])} ({hw["dtype"]})</h2>'
        f'<p class="note">Roofline bounds, not measurements: each product takes at least max(2 MACs / peak, bytes '
        f"/ bandwidth) on this machine ({human(hw['peak_flops'])}FLOP/s, {human(hw['bandwidth_bytes_per_s'])}B/s: "
        f"{escape(hw['source'])}); a real run is slower. {escape(totals)}</p>"
        f'<div class="chart">{roofline_chart(hw, stage_table(doc["model"]))}</div>'
        f'<table class="roofline-table"><thead><tr>{headers}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>"
    )
