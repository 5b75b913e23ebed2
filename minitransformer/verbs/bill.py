"""What an analysis costs: the passes it ran, their dot products and MACs read from the ledger, and what it saved.

An analysis (the logit lens, activation patching, attribution) runs forward passes and products of its own (the lens's
readout of every layer through the unembedding); each goes through the counting door into a Phase of the ledger, and
the bill reads them. Counted from shapes alone (`--count-only`), the same passes run on a shape-only model. Where an
analysis reuses what an earlier pass computed (a patched run starting from the clean run's cached stream), the bill
says what that saved: the products a run from the first layer would have computed beyond those really computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.ledger import Phase, totals_of
from ..text import human


@dataclass(frozen=True)
class Item:
    """One line of a bill: `passes` forward passes (or readouts) of one kind, their products in total."""

    what: str
    passes: int
    dot_products: int
    macs: int

    def to_dict(self) -> dict:
        return {"what": self.what, "passes": self.passes, "dot_products": self.dot_products, "macs": self.macs}


@dataclass
class Bill:
    """The items of an analysis's cost and what reusing cached work saved (dot products, MACs)."""

    items: list[Item] = field(default_factory=list)
    saved: Item | None = None

    def add(self, what: str, phases: list[Phase], times: int = 1) -> None:
        """The passes `phases` (each as the ledger recorded it), `times` over: a sweep's identical passes counted once
        and multiplied, as their shapes are the same."""
        counted = totals_of(phases)
        self.items.append(Item(what, len(phases) * times, counted.dot_products * times, counted.macs * times))

    def add_item(self, item: Item) -> None:
        self.items.append(item)

    @property
    def total(self) -> Item:
        """The bill's total line: each of an item's counts summed over the items."""
        counts = ("passes", "dot_products", "macs")
        return Item("total", **{count: sum(getattr(i, count) for i in self.items) for count in counts})

    def to_dict(self) -> dict:
        total = self.total
        return {
            "items": [i.to_dict() for i in self.items],
            "passes": total.passes,
            "dot_products": total.dot_products,
            "macs": total.macs,
            **({"saved": self.saved.to_dict()} if self.saved is not None else {}),
        }

    def lines(self) -> list[str]:
        """The bill as the terminal shows it."""
        width = max(len(i.what) for i in self.items)  # the saving's line is a sentence of its own
        rows = [
            f"  {i.what:<{width}}  {i.passes:>6,} x  {human(i.dot_products):>9} dot products  {human(i.macs):>9} MACs"
            for i in self.items
        ]
        total = self.total
        rows.append(
            f"  {total.what:<{width}}  {total.passes:>6,} x  {human(total.dot_products):>9} dot products  "
            f"{human(total.macs):>9} MACs ({total.macs:,})"
        )
        if self.saved is not None:
            s = self.saved
            rows.append(f"  {s.what}: {human(s.dot_products)} dot products, {human(s.macs)} MACs ({s.macs:,})")
        return ["bill (every product through the counting door):", *rows]
