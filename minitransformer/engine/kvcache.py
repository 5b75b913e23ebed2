"""The KV cache: each layer's keys and values for every position so far, preallocated to the context size.

With it, a decode step computes K and V for the one new token only and attends over the stored
rows; without it, every step recomputes K and V for the whole sequence. The buffers are allocated
once, and new rows are written in place: nothing is concatenated per step.
"""

from __future__ import annotations

import numpy as np

from .shapes import ShapeOnly


def first_attended(past: int, window: int | None) -> int:
    """The earliest position that a query at `past` (or later) may see: 0, or where a sliding window begins."""
    return 0 if window is None else max(0, past - window + 1)


class KVCache:
    """`n_head` is the number of key/value heads (fewer than the query heads under grouped-query attention).

    With a sliding `window`, every position stays stored, but a pass reads back only the rows its
    queries can see: a view, so attention past the window costs window-sized products. `window` is one for
    every layer, or a tuple with each layer's.

    `d_index`: a sparse-attention indexer's keys, one of d_index numbers a position and layer (DeepSeek-V3.2's
    lightning indexer scores every earlier position with them), held beside K and V: `index_keys`.
    """

    def __init__(self, n_layer: int, n_head: int, d_head: int, capacity: int, batch: tuple[int, ...] = (),
                 shape_only: bool = False, window: int | tuple[int | None, ...] | None = None,
                 dtype=np.float32, d_value: int | None = None, d_index: int | None = None) -> None:  # fmt: skip
        self.window = window
        shape = (*batch, n_head, capacity, d_head)
        value_shape = shape[:-1] + (d_head if d_value is None else d_value,)  # values narrower than keys (MLA)
        index_shape = (*batch, capacity, d_index or 0)
        layers = range(n_layer) if d_index is not None else range(0)
        self.keys: list = []  # arrays, or shape-only stand-ins
        self.values: list = []
        self.index_keys: list = []  # [*batch, capacity, d_index] a layer, where the model has an indexer
        if shape_only:
            self.keys = [ShapeOnly(shape) for _ in range(n_layer)]
            self.values = [ShapeOnly(value_shape) for _ in range(n_layer)]
            self.index_keys = [ShapeOnly(index_shape) for _ in layers]
        else:
            self.keys = [np.empty(shape, dtype=dtype) for _ in range(n_layer)]  # the model's dtype (Model.new_cache)
            self.values = [np.empty(value_shape, dtype=dtype) for _ in range(n_layer)]
            self.index_keys = [np.empty(index_shape, dtype=dtype) for _ in layers]
        self.capacity = capacity
        self.length = 0  # positions stored, the same in every layer once a forward pass is complete

    @property
    def nbytes(self) -> int:
        return self.numbers * np.dtype(self.keys[0].dtype).itemsize if self.keys else 0

    @property
    def numbers(self) -> int:
        """The numbers the cache holds: K and V, and the indexer's keys where there are any."""
        return sum(k.size + v.size for k, v in zip(self.keys, self.values)) + sum(k.size for k in self.index_keys)

    def layer(self, i: int) -> LayerCache:
        return LayerCache(self, i)

    def advance(self, n: int) -> None:
        self.length += n


class LayerCache:
    """One layer's view of the cache during one forward pass."""

    def __init__(self, cache: KVCache, layer: int) -> None:
        self.cache, self.index = cache, layer

    def append(self, k, v):
        """Write this pass's rows [..., H, T, dh] after the stored ones; return the rows the pass attends to,
        [..., H, t, dh]: all of them, or those inside the sliding window of the earliest new query."""
        past, T = self.cache.length, k.shape[-2]
        if past + T > self.cache.capacity:
            raise ValueError(f"KV cache holds {self.cache.capacity} positions; {past + T} needed")
        keys, values = self.cache.keys[self.index], self.cache.values[self.index]
        keys[..., past : past + T, :] = k
        values[..., past : past + T, :] = v
        window = self.cache.window
        start = first_attended(past, window[self.index] if isinstance(window, tuple) else window)
        return keys[..., start : past + T, :], values[..., start : past + T, :]

    def append_index(self, k):
        """Write this pass's indexer keys [..., T, d_index] after the stored ones; return all t of them, [..., t,
        d_index]: the indexer scores every earlier position."""
        past, T = self.cache.length, k.shape[-2]
        if past + T > self.cache.capacity:
            raise ValueError(f"KV cache holds {self.cache.capacity} positions; {past + T} needed")
        keys = self.cache.index_keys[self.index]
        keys[..., past : past + T, :] = k
        return keys[..., : past + T, :]
