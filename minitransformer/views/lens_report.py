"""The logit lens as text: a row per entry (and position), the target's rank and probability, the top tokens; the bill."""

from __future__ import annotations

from ..verbs.lens import CONVENTIONS, Lens


def lens_report(lens: Lens, decode) -> str:
    word = lambda i: repr(decode([i]))  # noqa: E731 - a name for the one way tokens are shown here
    shown = [
        f"logit lens of {len(lens.prompt)} tokens for {word(lens.target)} (id {lens.target}): {CONVENTIONS}",
        f"{'entry':<16}{'pos':>4}  {'rank':>6}  {'p':>8}  top tokens",
    ]
    for e in lens.entries:
        tops = ", ".join(f"{word(i)} {p:.3f}" for i, p in e.top)
        shown.append(f"{e.label:<16}{e.position:>4}  {e.rank:>6,}  {e.probability:>8.4f}  {tops}")
    first = lens.first_top()
    shown.append(f"{word(lens.target)} first ranks 1 {'at ' + first if first else 'at no entry'} (last position)")
    return "\n".join([*shown, *lens.bill.lines()])


def bill_report(bill, what: str) -> str:
    return "\n".join([f"{what}, counted from shapes alone (no weights):", *bill.lines()])
