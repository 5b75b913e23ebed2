"""A mixture of experts' products, counted as computed and recorded as one layer's: a speed-neutral bookkeeping
beside the tape, which stays the one counting door.

Each expert computes only the rows of the tokens its router sent it (Te of them), through Tape.matmul like any
product. The ledger gets one record per op and layer, with the shapes of what the experts computed between them
(each token's rows in its k experts: "T D, D k*F -> T k*F"), its counts summed over the experts, and its
`breakdown`: which expert computed how many tokens, dot products and MACs (ledger.Part). Watchers (captures,
hooks, trace) see each op once, after the last expert, as a [T, k*width] tensor: each token's rows in its k
experts, in the order the router chose them. (A hook may read these, not replace them: the experts have run, and a
replacement is refused.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ledger import Part
from .shapes import ShapeOnly


@dataclass
class ExpertParts:
    """What a layer's experts computed, op by op (Tape.experts makes one; each expert's tape adds to it)."""

    tokens: int  # the batch's tokens, flattened: n
    k: int  # experts per token
    counting: bool  # a ledger is kept: count each expert's products
    watched: bool  # somebody watches: keep each op's values, [n, k, width]
    ops: dict = field(default_factory=dict)  # op -> [{expert: (tokens, dot products, MACs)} or None, values]

    def add(self, op: str, value, expert, counted: tuple[int, int] | None) -> None:
        """Expert `expert` (its .expert, .tokens, .rows and .slots: families/moe.Routed) made `value` [Te, width]
        at `op`, with `counted` = (dot products, MACs) for a product, None for any other stage."""
        entry = self.ops.setdefault(op, [None if counted is None else {}, None])
        if self.counting and counted is not None:
            entry[0][expert.expert] = (expert.tokens, *counted)
        if self.watched and expert.rows is not None and not isinstance(value, ShapeOnly):
            if entry[1] is None:
                entry[1] = np.zeros((self.tokens, self.k, value.shape[-1]), value.dtype)
            entry[1][expert.rows, expert.slots] = value

    def breakdown(self, op: str, n_experts: int) -> tuple[Part, ...] | None:
        counted = self.ops[op][0]
        if counted is None or not self.counting:
            return None
        return tuple(Part(e, *counted.get(e, (0, 0, 0))) for e in range(n_experts))

    def values(self, op: str, shape: tuple[int, ...]):
        """The op's values as one [.., T, k*width] tensor (`shape`), or None (not watched, or shape-only)."""
        values = self.ops[op][1]
        return None if values is None else values.reshape(shape)
