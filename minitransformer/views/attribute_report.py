"""Direct logit attribution as text: a row per part of the stream, its share of the logit difference (a split part's
pieces indented below it: its heads, its experts), and the bill."""

from __future__ import annotations

from ..verbs.attribute import Attribution


def attribute_report(attribution: Attribution, decode) -> str:
    word = lambda i: repr(decode([i]))  # noqa: E731 - a name for the one way tokens are shown here
    width = max(len(what) for what, _ in attribution.parts)
    pieces = lambda part: [f"    {what:<{width - 2}}  {value:>9.4f}" for of, what, value in attribution.pieces  # noqa: E731
                           if of == part]  # fmt: skip
    total = sum(value for _, value in attribution.parts)
    shown = [
        f"direct logit attribution of logit({word(attribution.target)}) - logit({word(attribution.versus)}) at the "
        f"last of {len(attribution.prompt)} tokens: {attribution.difference:.4f}",
        attribution.conventions,
        *(line for what, value in attribution.parts for line in [f"  {what:<{width}}  {value:>9.4f}", *pieces(what)]),
        f"  {'sum of the parts':<{width}}  {total:>9.4f}",
    ]
    return "\n".join([*shown, *attribution.bill.lines()])
