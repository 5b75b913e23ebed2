"""Token ids as the model and the tokenizer take them: one check that every entry point goes through.

Taken: a list (or tuple, range, iterator) of integers for one sequence, a list of equal-length
lists for a batch, or a NumPy integer array of either shape. Integers are Python or NumPy ints;
bools and floats are refused even when they hold a whole number (1.0, True), because an id that
arrives as one is almost always a bug upstream (a float array, a mask) rather than an id. Anything
else ends in a one-line UserError that says what was wrong, never in a NumPy or Python exception.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import UserError

ANY_ID = 2**63 - 1  # as vocab_size: ids of any size an int64 holds (a tokenizer's, whose file bounds none)


def is_whole(value, least: int) -> bool:
    """An integer (not a bool, not a float such as 2.0) of at least `least`: the API's counts, block numbers and sizes."""
    return bool(not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= least)


def _is_row(x) -> bool:
    return isinstance(x, (list, tuple, range, Iterator)) or (isinstance(x, np.ndarray) and x.ndim > 0)


def as_token_ids(token_ids, vocab_size: int, *, batch: bool = True, vocabulary: str = "the vocabulary") -> np.ndarray:
    """Token ids as an int64 array [T] (or [B, T] if `batch`), each in 0..vocab_size-1; may be empty."""
    shape = "a list of integers" + (" (or a [batch, tokens] list or array)" if batch else "")
    if isinstance(token_ids, np.ndarray):
        ids = token_ids
        if ids.dtype.kind not in "iu":
            raise UserError(f"token ids must be integers, not an array of {ids.dtype}")
    elif isinstance(token_ids, (list, tuple, range, Iterator)):
        ids = _from_python(list(token_ids), vocab_size, vocabulary)
    else:
        hint = "; encode text with the tokenizer first" if isinstance(token_ids, (str, bytes, bytearray)) else ""
        raise UserError(f"token ids must be {shape}, not {type(token_ids).__name__}{hint}")
    if ids.ndim not in ((1, 2) if batch else (1,)):
        raise UserError(f"token ids must be {shape}, not {ids.ndim}-dimensional (shape {list(ids.shape)})")
    distinct = ids[:1] if ids.ndim == 2 and ids.strides[0] == 0 else ids  # a broadcast batch repeats one row
    if distinct.size and (distinct.min() < 0 or distinct.max() >= vocab_size):
        raise UserError(
            _outside(int(distinct.min()) if distinct.min() < 0 else int(distinct.max()), vocab_size, vocabulary)
        )
    return ids.astype(np.int64, copy=False)


def _from_python(items: list, vocab_size: int, vocabulary: str) -> np.ndarray:
    """A list of ints, or of equal-length rows of ints, checked in Python (so 2**70 is an id out of
    range, not an overflow) and only then made into an array."""
    rows = [item for item in items if _is_row(item)]
    if not rows:
        return np.array([_token_id(x, vocab_size, vocabulary) for x in items], dtype=np.int64)
    if len(rows) < len(items):
        raise UserError("token ids mix numbers and lists; give one list of integers or a list of rows of integers")
    table = []
    for row in rows:
        row = list(row)
        if any(_is_row(x) for x in row):
            raise UserError("token ids nest at most two deep: a list of integers or a [batch, tokens] list of rows")
        table.append([_token_id(x, vocab_size, vocabulary) for x in row])
    lengths = sorted({len(row) for row in table})
    if len(lengths) > 1:
        raise UserError(
            f"the rows of a [batch, tokens] list must have the same length, not {lengths[0]} and {lengths[-1]}"
        )
    return np.array(table, dtype=np.int64).reshape(len(table), len(table[0]))


def _token_id(x, vocab_size: int, vocabulary: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise UserError(f"token ids must be integers, not {type(x).__name__} ({x!r:.40})")
    if not 0 <= x < vocab_size:
        raise UserError(_outside(int(x), vocab_size, vocabulary))
    return int(x)


def _outside(bad: int, vocab_size: int, vocabulary: str) -> str:
    """An id out of range, said with the range it must be in (ids of no bound: 0 or more, not 0..2**63 - 2)."""
    if vocab_size == ANY_ID:
        return f"token id {bad} is " + (
            "negative: token ids are 0 or more" if bad < 0 else "larger than token ids can be"
        )
    return f"token id {bad} is outside {vocabulary} (0..{vocab_size - 1})"
