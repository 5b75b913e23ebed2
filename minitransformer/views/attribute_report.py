"""Direct logit attribution as text: a row per part of the stream, its share of the logit difference (a split part's
pieces indented below it: its heads, its experts), and the bill."""

from __future__ import annotations

from ..verbs.attribute import Attribution


def attribute_report(attribution: Attribution, decode) -> str:
    word = lambda i: repr(decode([i]))  # noqa: E731 - a name for the one way tokens are shown here
    width = max(len(what) for what, _ in attribution.parts)
    line = lambda indent, what, value: f"{indent + what:<{width + 2}}  {value:>9.4f}"  # noqa: E731 - a part, a piece
    pieces = lambda part: [line("    ", w, v) for of, w, v in attribution.pieces if of == part]  # noqa: E731
    total = sum(value for _, value in attribution.parts)
    shown = [
        f"direct logit attribution of logit({word(attribution.target)}) - logit({word(attribution.versus)}) at the "
        f"last of {len(attribution.prompt)} tokens: {attribution.difference:.4f}",
        attribution.conventions,
        *(row for what, value in attribution.parts for row in [line("  ", what, value), *pieces(what)]),
        line("  ", "sum of the parts", total),
    ]
    return "\n".join([*shown, *attribution.bill.lines()])
