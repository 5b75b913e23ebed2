"""The model's cache, layer by layer: what each layer keeps from one forward pass for the next.

An attention layer keeps the keys and values of every position so far, preallocated to the context size: with
them, a decode step computes K and V for the one new token only and attends over the stored rows; without them,
every step recomputes K and V for the whole sequence. New rows are written in place: nothing is concatenated per
step. A recurrent layer (linear attention, a state-space layer) keeps a few named arrays of a fixed size instead
(a convolution's last inputs, a recurrent state), which its forward pass reads and overwrites in place: their
size does not depend on the context. A layer may keep nothing.

What each layer keeps is declared by the model's config (`config.layer_cache(i)`: `KeysValues` or `State`), so
that this module, memory accounting and the reports never need to know which family they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ..errors import UserError
from .shapes import ShapeOnly


def first_attended(past: int, window: int | None) -> int:
    """The earliest position that a query at `past` (or later) may see: 0, or where a sliding window begins."""
    return 0 if window is None else max(0, past - window + 1)


@dataclass(frozen=True)
class KeysValues:
    """What an attention layer keeps a position: `heads` key/value heads of keys d_key wide and values d_value wide
    (d_key where None), read back from the first position its queries can see (`window`: the last `window` ones, or
    all). `rows`: other arrays the layer keeps a position beside them, (name, shape of one position's numbers), as a
    sparse-attention indexer keeps its own keys; each is held [..., capacity, *shape] and extended by the layer.
    `state`: named arrays of fixed shapes it keeps beside them whatever the context, as a State's (a layer that also
    runs a recurrent mixer: Falcon-H1's conv and scan states beside its attention's keys and values).
    `shared`: the values are the keys (DeepSeek-V4's one key-value head, K = V): one array, kept once.
    `compressed`: streams of rows the layer keeps one for every `ratio` positions, (name, ratio, shape of a row), as
    DeepSeek-V4's compressors keep an entry for each window of ratio positions; each held [..., capacity // ratio,
    *shape] and extended by the layer (LayerCache.compress).
    `reads`: the layer whose keys and values this one attends to (Gemma 4's key-value sharing): kept there, none
    here, so that a shared pair is counted once; its handle holds no rows."""

    heads: int
    d_key: int
    d_value: int | None = None
    window: int | None = None
    rows: tuple[tuple[str, tuple[int, ...]], ...] = ()
    state: tuple[tuple[str, tuple[int, ...]], ...] = ()
    shared: bool = False
    compressed: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    reads: int | None = None

    @property
    def kind(self) -> str:
        if self.reads is not None:
            return f"none: reads layer {self.reads}'s keys and values"
        return "keys and values and a state" if self.state else "keys and values"

    @property
    def state_numbers(self) -> int:
        """The numbers of its state, the same at any context."""
        return sum(prod(shape) for _, shape in self.state)

    @property
    def numbers_per_position(self) -> int:
        """The numbers one position costs this layer: K and V of every head (K alone where they are one), and its
        other rows."""
        if self.reads is not None:  # another layer's, counted there
            return 0
        values = 0 if self.shared else (self.d_key if self.d_value is None else self.d_value)
        return self.heads * (self.d_key + values) + sum(prod(shape) for _, shape in self.rows)

    def positions_held(self, positions: int) -> int:
        """The positions this layer must hold after `positions` tokens: all, or at most its window; none where it reads
        another layer's keys and values."""
        if self.reads is not None:
            return 0
        return positions if self.window is None else min(positions, self.window)

    def compressed_numbers(self, positions: int) -> dict[str, int]:
        """Each compressed stream's numbers after `positions` tokens: an entry of its shape for every `ratio`."""
        return {name: positions // ratio * prod(shape) for name, ratio, shape in self.compressed}

    def numbers_held(self, positions: int) -> int:
        """The numbers this layer's keys and values hold after `positions` tokens (its state apart): its window's
        positions (or all) of every row, and its compressed streams' entries."""
        streams = sum(self.compressed_numbers(positions).values())
        return self.positions_held(positions) * self.numbers_per_position + streams


@dataclass(frozen=True)
class State:
    """What a recurrent layer keeps: named arrays of fixed shapes (one sequence's; the batch axis comes first),
    whatever the context: a Gated DeltaNet layer's conv inputs and [H, dk, dv] delta-rule state, a Mamba-2 layer's
    conv inputs and [H, P, N] SSM state. No arrays: a layer that keeps nothing (an MLP-only layer)."""

    arrays: tuple[tuple[str, tuple[int, ...]], ...] = ()

    kind = "state"

    @property
    def numbers(self) -> int:
        return sum(prod(shape) for _, shape in self.arrays)


NOTHING = State()  # what a layer without attention or recurrence keeps


class KVCache:
    """The whole model's cache: one handle per layer (`layer(i)`), as `layers` declares each (`KeysValues` or
    `State`), for `capacity` positions of a batch of shape `batch` (() for one sequence), in `dtype`; shape-only
    stand-ins where the model has no weights (counting).

    Built from a config by Model.new_cache. The older signature, n_layer attention layers of `n_head` key/value heads
    of d_head (d_value for the values, where narrower) with one sliding `window` for all or a tuple of each layer's,
    still builds a cache of attention layers alone.
    """

    def __init__(
        self,
        n_layer: int = 0,
        n_head: int = 0,
        d_head: int = 0,
        capacity: int = 0,
        batch: tuple[int, ...] = (),
        shape_only: bool = False,
        window: int | tuple[int | None, ...] | None = None,
        dtype=np.float32,
        d_value: int | None = None,
        layers: Sequence[KeysValues | State] | None = None,
    ) -> None:
        if layers is None:
            windows = window if isinstance(window, tuple) else (window,) * n_layer
            layers = [KeysValues(n_head, d_head, d_value, w) for w in windows]
        self.specs = tuple(layers)
        self.capacity = capacity
        self.batch, self.shape_only, self.dtype = tuple(batch), shape_only, np.dtype(dtype)  # what it was made for
        self.length = 0  # positions seen, the same in every layer once a forward pass is complete
        self.spoilt = False  # a pass that stopped part way left some layers' states ahead of `length` (Model.run)

        def array(shape: tuple[int, ...], zeros: bool = False):
            if shape_only:
                return ShapeOnly(shape, dtype)
            return np.zeros(shape, dtype) if zeros else np.empty(shape, dtype)  # the model's dtype (Model.new_cache)

        self.layers: list[LayerCache | LayerState] = []
        for i, spec in enumerate(self.specs):
            if isinstance(spec, KeysValues):
                d_value = spec.d_key if spec.d_value is None else spec.d_value
                heads = 0 if spec.reads is not None else spec.heads  # a layer that reads another's keeps none
                keys = array((*batch, heads, capacity, spec.d_key))
                values = keys if spec.shared else array((*batch, heads, capacity, d_value))
                rows = {name: array((*batch, capacity, *shape)) for name, shape in spec.rows}
                rows |= {name: array((*batch, capacity // ratio, *shape)) for name, ratio, shape in spec.compressed}
                state = {name: array((*batch, *shape), zeros=True) for name, shape in spec.state}
                self.layers.append(LayerCache(self, i, keys, values, rows, state))
            else:  # a recurrent state starts at zero, as a fresh sequence's
                self.layers.append(
                    LayerState(self, i, {name: array((*batch, *shape), zeros=True) for name, shape in spec.arrays})
                )

    @property
    def keys(self) -> list:
        """The attention layers' key arrays [..., Hkv, capacity, dh], in layer order."""
        return [h.keys for h in self.layers if isinstance(h, LayerCache)]

    @property
    def values(self) -> list:
        return [h.values for h in self.layers if isinstance(h, LayerCache)]

    @property
    def window(self) -> tuple[int | None, ...]:
        """Each layer's sliding window (None for every layer that is not an attention layer with one)."""
        return tuple(s.window if isinstance(s, KeysValues) else None for s in self.specs)

    @property
    def nbytes(self) -> int:
        return sum(h.nbytes for h in self.layers)

    def layer(self, i: int) -> Any:
        """Layer i's handle: a LayerCache (keys and values: append) for an attention layer, a LayerState (named
        arrays: state[name]) for one that keeps a state; each family's layer knows which it asked for."""
        n = len(self.layers)
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not -n <= i < n:
            raise UserError(f"the cache's layers are 0 to {n - 1} (or -{n} to -1 from the last), not {i!r:.40}")
        return self.layers[i]

    @property
    def overwrites(self) -> bool:
        """Whether a pass overwrites what earlier positions left (a recurrent state, a compressor's state or
        compressed stream) rather than only writing rows after them: such a cache cannot be rewound, and a pass that
        stops part way leaves it wrong."""
        return any(s.arrays if isinstance(s, State) else s.state or s.compressed for s in self.specs)

    def room(self, T: int) -> int:
        """The positions stored before a pass of T more, after checking that they fit and that the cache is whole."""
        if self.spoilt:
            raise UserError(
                "this cache was left half-written by a pass that stopped part way (an error or an interrupt): its "
                "layers' states no longer match the positions it holds; make a new one (model.new_cache())"
            )
        if self.length + T > self.capacity:
            raise UserError(
                f"this cache holds {self.capacity} positions and {self.length + T} are needed: make one with room for "
                f"them (model.new_cache(capacity=...))"
            )
        return self.length

    def advance(self, n: int) -> None:
        self.length += n

    def rewind(self, n: int) -> None:
        """Forget the last n positions (a speculative step's rejected draft): the next pass writes over their rows.
        Only a cache whose every layer keeps rows a position can: a state or a compressed stream has no past to go
        back to."""
        if not 0 <= n <= self.length:
            raise ValueError(f"cannot rewind {n} of {self.length} positions")
        if self.overwrites:
            raise ValueError("a cache with a recurrent state or a compressed stream cannot be rewound")
        self.length -= n


class LayerCache:
    """One attention layer's keys and values (and any other rows it keeps a position), written by each pass; and
    where it keeps a state beside them, its arrays (`arrays`, state[name], read and overwritten in place as a
    LayerState's: a hybrid layer's mixer reads them from the same handle)."""

    def __init__(self, cache: KVCache, layer: int, keys, values, rows: dict, arrays: dict | None = None) -> None:
        self.cache, self.index = cache, layer
        self.keys, self.values, self.rows = keys, values, rows
        self.arrays: dict = arrays or {}
        self.spec: KeysValues = cache.specs[layer]  # type: ignore[assignment]  # an attention layer's

    def __getitem__(self, name: str):
        return self.arrays[name]

    @property
    def nbytes(self) -> int:
        values = 0 if self.spec.shared else self.values.nbytes  # K = V: one array
        return self.keys.nbytes + values + sum(r.nbytes for r in self.rows.values()) + self.state_nbytes

    @property
    def state_nbytes(self) -> int:
        """The bytes of its state (none but a hybrid layer's), the same at any capacity."""
        return sum(a.nbytes for a in self.arrays.values())

    def append(self, k, v):
        """Write this pass's rows [..., H, T, dh] after the stored ones; return the rows the pass attends to,
        [..., H, t, dh]: all of them, or those inside the sliding window of the earliest new query."""
        T = k.shape[-2]
        past = self.cache.room(T)
        self.keys[..., past : past + T, :] = k
        if not self.spec.shared:  # K = V: the keys are the values
            self.values[..., past : past + T, :] = v
        start = first_attended(past, self.spec.window)
        return self.keys[..., start : past + T, :], self.values[..., start : past + T, :]

    def extend(self, name: str, new):
        """Write this pass's rows [..., T, *shape] of the array `name` (KeysValues.rows) after the stored ones; return
        the rows the pass reads, [..., t, *shape], from the first position append's keys start at."""
        held, trailing = self.rows[name], len(dict(self.spec.rows)[name])
        T = new.shape[new.ndim - 1 - trailing]
        past = self.cache.room(T)
        lead = (slice(None),) * (held.ndim - 1 - trailing)  # the batch axes before the positions
        held[lead + (slice(past, past + T),)] = new
        return held[lead + (slice(first_attended(past, self.spec.window), past + T),)]

    def compress(self, name: str, new, T: int):
        """Write the entries [..., n, *shape] of the compressed stream `name` (KeysValues.compressed) that this pass of
        T positions made (one for each window of `ratio` positions it closed) after the stored ones; return every entry
        so far [..., (past + T) // ratio, *shape]."""
        held, ratio, shape = self.rows[name], *next((r, s) for n, r, s in self.spec.compressed if n == name)
        past = self.cache.room(T)
        before, after = past // ratio, (past + T) // ratio
        lead = (slice(None),) * (held.ndim - 1 - len(shape))
        if new.shape[new.ndim - 1 - len(shape)] != after - before:
            raise ValueError(f"{name}: {after - before} entries close in this pass, not {new.shape}")
        held[lead + (slice(before, after),)] = new
        return held[lead + (slice(0, after),)]


class LayerState:
    """One recurrent layer's state: its named arrays (State.arrays, the batch axis first), which its forward pass
    reads with state[name] and overwrites in place (state[name][...] = new). They start at zero."""

    def __init__(self, cache: KVCache, layer: int, arrays: dict) -> None:
        self.cache, self.index, self.arrays = cache, layer, arrays

    def __getitem__(self, name: str):
        if name not in self.arrays:
            held = ", ".join(map(repr, self.arrays)) or "nothing"
            raise KeyError(f"layer {self.index}'s state has no {name!r}: it holds {held}")
        return self.arrays[name]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())
