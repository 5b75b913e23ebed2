"""Work done in parts and recorded as one record per op: a speed-neutral bookkeeping beside the tape, which stays the
one counting door.

Three computations run the same lines of a forward pass on parts of their rows, each part through Tape.matmul and
Tape.stage like any other, with the sizes of that part:
- a long prompt's attention, in chunks of query rows, each against the keys it can see (row_chunks.py);
- a mixture of experts, each expert on the rows of the tokens its router sent it (Te of them; families' parts);
- a scan over chunks (a linear-attention layer's delta rule, a state-space layer's SSD), or a triangular solve row by
  row, each piece needing what the last one left.
Each part's tape adds what it computed to one `Gathered` (Tape.gathering): per op, the dot products and MACs summed,
the shortest and longest dot product, each expert's share, and, where somebody watches, the values. After the last
part, Tape.record_gathered writes one record per op with the shapes of the whole computation (the whole pass's rows;
each token's rows in its k experts, "T D, D k*F -> T k*F"; the chunks side by side, "Hv N C dk, Hv N dk dv -> Hv N
C dv"), its counts the parts' sums (Record.computed where fewer than that shape's dense product, Record.breakdown for
the experts), and shows the watchers each op's value once: a hook may read it, not replace it (the parts have run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ledger import Part
from .shapes import ShapeOnly
from .stages import Stage

CHUNKS, EXPERTS, PIECES = "chunks of query rows", "experts", "pieces"


@dataclass
class Entry:
    """What the parts computed at one stage."""

    stage: Stage
    spec: str  # the spec the parts ran (row chunks: the whole pass's is the same in symbols)
    product: bool  # a matrix product, counted; else a stage (no dot products)
    b_batched: bool = False
    dots: int = 0
    macs: int = 0
    shortest: int = 0  # the shortest and longest dot product any part computed
    longest: int = 0
    experts: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # expert -> (tokens, dots, MACs)
    values: list = field(default_factory=list)  # each part's value, where watched (experts: one [n, k, w] array)


@dataclass
class Gathered:
    """What the parts of one computation did, stage by stage, in the order they were first met."""

    how: str  # CHUNKS, EXPERTS or PIECES: how the parts' rows make the whole
    counting: bool  # a ledger is kept: count each part's products
    watched: bool  # somebody watches: keep each part's values
    tokens: int = 0  # EXPERTS: the batch's tokens, flattened (n), and the experts a token runs (k)
    k: int = 0
    rows: int = 0  # CHUNKS: the query rows of a chunk
    entries: dict[str, Entry] = field(default_factory=dict)

    def add(
        self,
        stage: Stage,
        spec: str,
        value,
        counted: tuple[int, int] | None = None,
        b_batched: bool = False,
        routed=None,
    ) -> None:
        """A part made `value` at `stage`: for a product `counted` = (dot products, their length); `routed` (EXPERTS):
        the expert whose rows these are (its .expert, .tokens, .rows and .slots: families' Routed)."""
        entry = self.entries.get(stage.op)
        if entry is None:
            length = counted[1] if counted else 0
            entry = self.entries[stage.op] = Entry(stage, spec, counted is not None, b_batched, 0, 0, length, length)
        if self.counting and counted is not None:
            dots, length = counted
            entry.dots += dots
            entry.macs += dots * length
            entry.shortest, entry.longest = min(entry.shortest, length), max(entry.longest, length)
            if routed is not None:
                entry.experts[routed.expert] = (routed.tokens, dots, dots * length)
        if not self.watched or isinstance(value, ShapeOnly):
            return
        if routed is None:
            entry.values.append(value)
        elif routed.rows is not None:  # each token's rows in its k experts, in the order its router chose them
            if not entry.values:
                entry.values.append(np.zeros((self.tokens, self.k, value.shape[-1]), value.dtype))
            entry.values[0][routed.rows, routed.slots] = value

    def repeat(self, first: int, expert: int) -> None:
        """`expert` computed what expert `first` did (Tape.repeats): first's counts at each product, again."""
        if not self.counting:
            return
        for entry in self.entries.values():
            if first in entry.experts:
                tokens, dots, macs = entry.experts[expert] = entry.experts[first]
                entry.dots, entry.macs = entry.dots + dots, entry.macs + macs

    def breakdown(self, entry: Entry, n_experts: int) -> tuple[Part, ...] | None:
        """Every expert's tokens, dot products and MACs at a product (EXPERTS), None where nothing was counted."""
        if not entry.product or not self.counting:
            return None
        return tuple(Part(e, *entry.experts.get(e, (0, 0, 0))) for e in range(n_experts))
