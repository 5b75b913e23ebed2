"""The shape language of the forward pass: each line states its shapes in symbols, "T D, D 3D -> T 3D" for a
product (a, b -> out) and "H T dh; Hkv T dh" for a stage with several outputs. Tape (tape.py) reads them
here and checks them against the concrete sizes of the pass (Dims); the symbols are listed in stages.py."""

from __future__ import annotations

from functools import cache


@cache
def symbols(spec: str) -> tuple[str, ...]:
    return tuple(spec.split())


@cache
def specs(spec: str, n: int) -> tuple[str, ...]:
    specs = tuple(s.strip() for s in spec.split(";"))
    return specs * n if len(specs) == 1 else specs


@cache
def matmul_spec(spec: str) -> tuple[str, str, str]:
    operands, out = spec.split("->")
    a, b = operands.split(",")
    return a.strip(), b.strip(), out.strip()
