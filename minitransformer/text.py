"""The small text formatters every layer may use: 1.23 M, 1,234, [5, 768], 12.5%, 1.23 MB, 12.3 ms, a padded table, a
short path. Every view writes a number through these, so that one kind of number reads the same on every page.

Pure functions of their arguments, below every layer (beside errors.py), so that the engine, the models and
the verbs can write a number the way the views do without importing the views.
"""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Callable
from typing import Any

_UNITS = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K"))


def human(n: float) -> str:
    """1234567 -> '1.23 M': three significant digits and a unit, for numbers people compare by eye."""
    for size, unit in _UNITS:
        value = n / size
        if abs(float(f"{value:.3g}")) >= 1:  # 999,885,952 rounds up to 1 G, not to "1e+03 M"
            return f"{value:.3g} {unit}" if abs(value) < 999.5 else f"{value:,.0f} {unit}"
    return f"{n:g}"


def count(n: int) -> str:
    return f"{n:,}"


def plural(n: int, word: str, shown: str | None = None) -> str:
    """ "1 layer", "12 layers": a number and its noun, agreeing; `shown` is the number as written ("1,000")."""
    return f"{n if shown is None else shown} {word}{s_for(n)}"


def s_for(n: int) -> str:
    """The plural ending for n things: "" for one, "s" for any other number."""
    return "" if n == 1 else "s"


def runs(numbers) -> str:
    """Whole numbers, increasing, with their consecutive runs joined: [3, 4, 5, 9] -> "3-5, 9"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][-1] + 1:
            spans[-1].append(n)
        else:
            spans.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in spans)


def count_range(shortest: int, longest: int) -> str:
    """(128, 1000) -> '128-1,000', (64, 64) -> '64': a range of whole numbers (dot products' lengths), one where it
    holds one."""
    return count(longest) if shortest == longest else f"{count(shortest)}-{count(longest)}"


def operand_shapes(a_shape, b_shape, chunks: int | None = None) -> str:
    """ "[5, 768] x [768, 2304]": a product's operands; one computed in chunks of query rows says so after its dense
    shapes: "[4, 1000, 64] x [4, 64, 1000] in 8 row chunks"."""
    return f"{shape(a_shape)} x {shape(b_shape)}" + (f" in {plural(chunks, 'row chunk')}" if chunks is not None else "")


def elided(numbers: list[int]) -> str:
    """[0, 2, 4, 6] -> "0, 2, 4, 6"; a long list (layers) shows its first three and its last: "0, 2, 4, ..., 10"."""
    shown = [str(i) for i in numbers] if len(numbers) <= 5 else [*map(str, numbers[:3]), "...", str(numbers[-1])]
    return ", ".join(shown)


def byte_size(b: float) -> str:
    """1234567 -> '1.23 MB', 512 -> '512 B'."""
    return f"{human(b)}B" if b >= 1000 else f"{b:g} B"


def seconds(s: float) -> str:
    """0.0123 -> '12.3 ms': three significant digits in the unit that keeps them above 1."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale or unit == "ns":
            return f"{s / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def intensity(macs_per_byte: float) -> str:
    """Arithmetic intensity, MACs per byte: 1,234 from 100 up, three significant digits below (12.3, 0.25)."""
    return f"{macs_per_byte:,.0f}" if macs_per_byte >= 100 else f"{macs_per_byte:.3g}"


def pass_name(step: int) -> str:
    """A forward pass of a generation by its step: "prefill" (step 0), "decode step 3"."""
    return "prefill" if step == 0 else f"decode step {step}"


def shape(s) -> str:
    return "" if s is None else "[" + ", ".join(str(n) for n in s) + "]"


def percent(part: float, whole: float) -> str:
    if not whole:
        return ""
    share = 100 * part / whole
    return f"{share:.1f}%" if share >= 0.05 or share == 0 else "<0.1%"


def display_width(text: str) -> int:
    """Columns a terminal gives the text: two for a wide (CJK) character, none for a combining mark, one else."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "  ") -> str:
    """Columns padded to their widest cell, by the columns a terminal shows (a CJK character takes two); `right`
    holds the indexes of right-aligned (numeric) columns."""
    right = right or set()
    widths = [max(display_width(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells):
        parts = []
        for i, (cell, width) in enumerate(zip(cells, widths)):
            text = str(cell)
            pad = " " * (width - display_width(text))
            parts.append(pad + text if i in right else text + pad)
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def short_path(path: str) -> str:
    """A path relative to the working directory when it lies below it (headers stay readable)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return relative if not relative.startswith("..") else path


def nonfinite_replaced(value, by: Callable[[float], Any]):
    """A document with each float JSON cannot hold (NaN, an infinity) replaced by by(it), lists and dicts walked."""
    if isinstance(value, float) and not math.isfinite(value):
        return by(value)
    if isinstance(value, dict):
        return {key: nonfinite_replaced(v, by) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nonfinite_replaced(v, by) for v in value]
    return value


def json_ready(document: Any) -> Any:
    """A to_dict()'s document as JSON holds it: a NaN or an infinity (a float16 pass that overflowed) as None, which
    json.dumps writes null (docs/json-and-csv.md), not Python's NaN, which strict parsers refuse."""
    return nonfinite_replaced(document, lambda number: None)
