"""Products computed piece by piece, recorded as one record per op: a speed-neutral bookkeeping beside the tape, which
stays the one counting door.

Some computations cannot be one product: a scan over chunks (a linear-attention layer's delta rule, a state-space
layer's SSD) computes the same products once per chunk, each needing the state the last chunk left; a triangular
solve computes one row at a time, each from the rows before it. Each piece goes through Tape.matmul like any
product, on the tape `Tape.in_pieces()` gives, with the sizes of that piece. The ledger then gets one record per op
(Tape.record_pieces) with the shape of all the pieces together: the chunks' products side by side along the chunk
axis ("Hv N C dk, Hv N dk dv -> Hv N C dv" for N chunks), or the whole triangular product; its dot products and
MACs are the pieces' sums (Record.computed where they are fewer than that shape's dense product: a triangular solve
skips the upper triangle). Watchers (captures, hooks, trace) see each op once, after the last piece, as the pieces'
values put side by side (or a value the caller names, such as the solution of the solve); a hook may read them, not
replace them: the pieces have run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .shapes import ShapeOnly


@dataclass
class Pieces:
    """What the pieces of a computation did, op by op (Tape.in_pieces makes one; each piece's stages add to it)."""

    counting: bool  # a ledger is kept: count each piece's products
    watched: bool  # somebody watches: keep each piece's values
    # op -> [[dot products, MACs, B batched, shortest, longest dot product] or None (a stage), values]
    ops: dict = field(default_factory=dict)

    def add(self, op: str, value, counted: tuple[int, int] | None, b_batched: bool = False, length: int = 0) -> None:
        """A piece made `value` at `op`, with `counted` = (dot products, MACs) for a product of dot products of
        `length`, None for a stage."""
        entry = self.ops.setdefault(op, [None if counted is None else [0, 0, b_batched, length, length], []])
        if self.counting and counted is not None:
            sums = entry[0]
            sums[0] += counted[0]
            sums[1] += counted[1]
            sums[3], sums[4] = min(sums[3], length), max(sums[4], length)
        if self.watched and not isinstance(value, ShapeOnly):
            entry[1].append(value)

    def counted(self, op: str) -> tuple[int, int, bool, tuple[int, int]] | None:
        """(dot products, MACs, whether B has the batch axis, (shortest, longest) dot product) of a product's pieces;
        None for a stage."""
        sums = self.ops[op][0]
        return None if sums is None else (sums[0], sums[1], sums[2], (sums[3], sums[4]))

    def values(self, op: str) -> list:
        return self.ops[op][1]
