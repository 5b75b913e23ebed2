"""The tape of one forward pass: each stage goes through it, is shape-checked, recorded and shown to watchers.

`Tape.matmul` is the one door through which every matrix product of the model passes: it computes
the product and records its dot products in the ledger. Nothing else in the package multiplies
matrices (a test reads the source to hold us to that).

Shapes are written symbolically on each line of the forward pass ("H T dh") and checked here
against the concrete sizes of this pass, so a shape in the code cannot drift from the truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from .ledger import Phase, Record, dot_product_count
from .shapes import ShapeOnly
from .stages import STAGES

# A watcher sees every stage: (full name, tensor, record) -> the tensor to continue with.
Watcher = Callable[[str, object, Record], object]


@lru_cache(maxsize=None)
def _symbols(spec: str) -> tuple[str, ...]:
    return tuple(spec.split())


@lru_cache(maxsize=None)
def _matmul_spec(spec: str) -> tuple[str, str, str]:
    operands, out = spec.split("->")
    a, b = operands.split(",")
    return a.strip(), b.strip(), out.strip()


@dataclass
class Dims:
    """The concrete size of each dimension symbol during one forward pass (see stages.py)."""

    T: int
    t: int
    D: int
    H: int
    F: int
    V: int
    R: int
    batch: tuple[int, ...] = ()
    _shapes: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def past(self) -> int:
        return self.t - self.T

    def size(self, symbol: str) -> int:
        if symbol.isdigit():
            return int(symbol)
        if symbol == "dh":
            return self.D // self.H
        if symbol[0].isdigit():  # "3D"
            return int(symbol[:-1]) * self.size(symbol[-1])
        return getattr(self, symbol)

    def shape(self, spec: str, batched: bool = True) -> tuple[int, ...]:
        key = (spec, batched)
        if key not in self._shapes:  # every block asks the same questions: answer each once per pass
            sizes = tuple(self.size(s) for s in _symbols(spec))
            self._shapes[key] = self.batch + sizes if batched else sizes
        return self._shapes[key]

    def symbolic(self, spec: str) -> str:
        return "[" + ", ".join(("B",) * len(self.batch) + tuple(spec.split())) + "]"


@dataclass
class Tape:
    dims: Dims
    phase: Phase | None = None  # None: ledger off
    watcher: Watcher | None = None
    layer_index: int | None = None
    prefix: str = ""

    def layer(self, i: int) -> "Tape":
        """The tape as seen from inside block i: stage names get the prefix "blocks.{i}."."""
        return Tape(self.dims, self.phase, self.watcher, i, f"blocks.{i}.")

    def scratch(self, x):
        """x itself when nobody watches this pass, so that the next stage may write its result over x;
        else None (a watcher may hold x, so it must stay as it was). A ledger holds no tensors."""
        return x if self.watcher is None else None

    def _check(self, what: str, value, spec: str, batched: bool = True) -> None:
        want = self.dims.shape(spec, batched)
        if value.shape != want:
            raise AssertionError(
                f"{self.prefix}{what}: shape {list(value.shape)} but the equations say "
                f"{self.dims.symbolic(spec)} = {list(want)}"
            )

    def _record(self, op: str, out_shape, spec: str, a_shape=None, b_shape=None) -> Record:
        record = Record(op, self.layer_index, tuple(out_shape), spec, a_shape, b_shape)
        if self.phase is not None:
            self.phase.records.append(record)
        return record

    def _watch(self, op: str, value, record: Record):
        if self.watcher is None:
            return value
        names = STAGES[op].names
        if isinstance(value, tuple):
            return tuple(self.watcher(self.prefix + n, v, record) for n, v in zip(names, value))
        return self.watcher(self.prefix + names[0], value, record)

    @property
    def unobserved(self) -> bool:
        """Nobody keeps a ledger of this pass or watches it: the bookkeeping can be skipped."""
        return self.phase is None and self.watcher is None

    def stage(self, op: str, value, spec: str):
        """A stage that is not a matrix product: check its shape(s), record it with zero dot products."""
        for v in value if isinstance(value, tuple) else (value,):
            self._check(op, v, spec)
        if self.unobserved:
            return value
        first = value[0] if isinstance(value, tuple) else value
        record = self._record(op, first.shape, spec)
        return self._watch(op, value, record)

    def matmul(self, op: str, a, b, spec: str, bias=None):
        """out = a @ b (+ bias), counted: spec reads "T D, D 3D -> T 3D" (a, b -> out, symbolically)."""
        a_spec, b_spec, out_spec = _matmul_spec(spec)
        self._check(f"{op} (A)", a, a_spec)
        self._check(f"{op} (B)", b, b_spec, batched=b.ndim > 2)  # a weight matrix is shared by the batch
        if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
            out = ShapeOnly(dot_product_count(a.shape, b.shape)[0])
        else:
            out = np.matmul(a, b)
            if bias is not None:
                out += bias  # out is fresh: adding in place saves a [T, out] temporary
        self._check(op, out, out_spec)
        if self.unobserved:
            return out
        record = self._record(op, out.shape, out_spec, tuple(a.shape), tuple(b.shape))
        return self._watch(op, out, record)
