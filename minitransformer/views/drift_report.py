"""The drift ledger as text: the next token's drift, the worst stages, then a row per layer, then where the
precision left its format's range (verbs/drift.py measures; this only reads)."""

from __future__ import annotations

from ..text import count, plural, runs, table
from ..verbs.drift import Drift, SelectionDrift, StageDrift, placed, split_name

WORST = 5  # stages listed by their drift before the per-layer rows


def _rel(x: float) -> str:
    return f"{x:.2e}" if x == x and x != float("inf") else "inf" if x == float("inf") else "nan"


def _magnitude(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _range(s: StageDrift) -> str:
    marks = [m for m, on in (("overflow", s.overflow), ("underflow", s.underflow)) if on]
    if s.nonfinite and not s.overflow:
        marks.append(f"{count(s.nonfinite)} inf/nan")
    return ", ".join(marks)


def _layer_range(stages: list[StageDrift]) -> str:
    """Where a layer's stages left the range: overflow, underflow, and how many stages hold inf or NaN they did not
    overflow into (their counts, one a stage, were merged as a set of unnamed numbers)."""
    marks = [m for m in ("overflow", "underflow") if any(getattr(s, m) for s in stages)]
    nonfinite = [s.nonfinite for s in stages if s.nonfinite and not s.overflow]
    if nonfinite:
        marks.append(f"inf/nan in {plural(len(nonfinite), 'stage')} (up to {count(max(nonfinite))} values)")
    return ", ".join(marks)


def drift_report(d: Drift) -> str:
    positions = len(d.tokens)
    agree = round(d.top1_agreement * positions)
    kl = "inf (our logits are not all finite)" if d.kl == float("inf") else f"{d.kl:.2e}"
    lines = [
        f"Drift of {d.precision} against float64: the same {plural(positions, 'token')}, every position; each stage's "
        f"max rel = max |ours - truth| / max |truth|, rms rel = rms(ours - truth) / rms(truth)",
        f"  next token: KL(float64 || {d.precision}) {kl} on average over {plural(positions, 'position')}"
        + (f" (largest {d.kl_max:.2e})" if d.kl != float("inf") else "")
        + f", top-1 agreement {agree}/{positions} ({100 * d.top1_agreement:.0f}%)",
        "  " + range_line(d),
        *(["  " + choices_line(d)] if d.selections is not None else []),
        "",
        "Worst stages",
    ]
    worst = d.worst(WORST)
    lines.append(
        table(
            ["stage", "max rel", "rms rel", "max |x|", "range"],
            [[s.name, _rel(s.max_rel), _rel(s.rms_rel), _magnitude(s.max_abs), _range(s)] for s in worst],
            right={1, 2, 3},
        )
    )
    lines += ["", "Per layer: the block's worst stage, and its output (the residual stream it hands on)"]
    lines.append(_layers_table(d))
    events = d.overflows() + d.underflows()
    if events:
        lines += ["", "Where values left the range (the precision's own pass, as each rounding happened)"]
        lines.append(_events_table(events))
    if d.selections:
        lines += [
            "",
            f"Choices that differ from float64's (the experts or keys each pass chose; margin: {d.precision}'s "
            f"k-th score less its (k+1)-th, where it tied or near-tied)",
        ]
        rows = [[str(c.layer), c.stage, str(c.position), *_chosen(c), _margin(c.margin)] for c in d.selections]
        lines.append(table(["layer", "stage", "position", d.precision, "float64", "margin"], rows, right={2, 5}))
    return "\n".join(lines)


def _layers_table(d: Drift) -> str:
    """A row per layer (its worst stage, its output, its largest value, where it left the range), between the
    stages before the blocks and those after them."""
    first_block = next((i for i, s in enumerate(d.stages) if s.layer is not None), len(d.stages))
    outside = [(i, s) for i, s in enumerate(d.stages) if s.layer is None]
    rows = [_outside_row(s) for i, s in outside if i < first_block]
    for layer in d.layers:
        stages = [s for s in d.stages if s.layer == layer]
        worst = max(stages, key=lambda s: s.max_rel if s.max_rel == s.max_rel else float("inf"))
        largest = _magnitude(max(s.max_abs for s in stages))
        output = _rel(stages[-1].max_rel)  # the residual stream the block hands on
        rows.append(
            [str(layer), worst.stage, _rel(worst.max_rel), _rel(worst.rms_rel), output, largest, _layer_range(stages)]
        )
    rows += [_outside_row(s) for i, s in outside if i >= first_block]
    headers = ["layer", "worst stage", "max rel", "rms rel", "output max rel", "max |x|", "range"]
    return table(headers, rows, right={2, 3, 4, 5})


def _outside_row(s: StageDrift) -> list[str]:
    return [s.stage, "", _rel(s.max_rel), _rel(s.rms_rel), "", _magnitude(s.max_abs), _range(s)]


def _events_table(events: list) -> str:
    """Each value that left the format's range: where (layer, stage, which of its values), the format, what."""
    rows = []
    for e in events:
        at, stage, where = placed(e)
        what = (
            f"{plural(e.overflowed, 'value')} overflowed"
            if e.overflowed
            else f"{count(e.flushed)} of {count(e.size)} flushed to zero, {e.flushed_share:.1e} of the norm"
        )
        rows.append(["-" if at is None else str(at), stage, where, e.format, _magnitude(e.max_abs), what])
    return table(["layer", "stage", "where", "format", "max |x|", "what"], rows, right={4})


def _margin(margin: float | None) -> str:
    return "" if margin is None else "0 (exact)" if margin == 0 else f"{margin:.1e}"


SHOWN = 8  # chosen indices listed in full up to this many; beyond, only those the two passes do not share


def _chosen(c: SelectionDrift) -> list[str]:
    """What each pass chose, in full where few ("1 5"), else what only it chose ("... 17 40 (2,046 shared)")."""
    if len(c.chosen) <= SHOWN:
        return [" ".join(map(str, c.chosen)), " ".join(map(str, c.truth))]
    shared = set(c.chosen) & set(c.truth)
    only = [[i for i in mine if i not in shared] for mine in (c.chosen, c.truth)]
    return [f"... {' '.join(map(str, o))} ({count(len(shared))} shared)" for o in only]


def choices_line(d: Drift) -> str:
    """One line: how many of the model's choices (experts, keys) differ from float64's, and where."""
    compared = sum(d.chosen.values())
    if not d.selections:
        return f"choices (a position's experts or keys): all {count(compared)} as float64's"
    where: dict[tuple, list[int]] = {}
    for c in d.selections:
        where.setdefault((c.layer, c.stage), []).append(c.position)
    places = "; ".join(
        f"layer {layer} {stage} at {'position' if len(p) == 1 else 'positions'} {runs(p)}"
        for (layer, stage), p in where.items()
    )
    return (
        f"choices (a position's experts or keys): {count(len(d.selections))} of {count(compared)} differ from "
        f"float64's, {places}"
    )


def range_line(d: Drift) -> str:
    """One line: no value left the range, or where it first did."""
    overflows, underflows = d.overflows(), d.underflows()
    if not overflows and not underflows:
        return f"range: no value left {d.precision}'s range (overflow, or underflow of values that matter)"
    parts = []
    if overflows:
        first = overflows[0]
        layer, stage = split_name(first.name)
        at = (
            f"the weight {first.name}"
            if first.role == "weight"
            else stage
            if layer is None
            else f"layer {layer} {stage}"
        )
        parts.append(
            f"overflow first at {at} (|x| up to {_magnitude(first.max_abs)}, where {first.format} holds "
            f"{_magnitude(first.format_max)}), at {plural(len(overflows), 'stage')} in all"
        )
    if underflows:
        parts.append(f"values that matter flushed to zero at {plural(len(underflows), 'stage')}")
    return "range: " + "; ".join(parts)
