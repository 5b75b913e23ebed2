"""Attention weights of a whole generation, kept for pictures: every head of chosen layers as one [H, N, N].

A generation computes attention in pieces: the prefill makes the rows of the prompt, [H, T, t], and
each cached decode step one more row, [H, 1, t] (without the cache every step recomputes all the
rows). `AttentionRecorder` hooks `blocks.{L}.attn.weights` (hooks.py) for the chosen layers while
the generation runs, and puts each piece where it belongs: the pass's queries are positions
past .. past + T - 1 and its keys the t positions that end with them (t is past + T, or less where a
sliding window cut the oldest). The result, `AttentionMaps`, holds for each layer the [H, N, N]
matrix of query position x key position over the N positions that were fed to the model, with NaN
where the layer's mask hid the key from the query (its score -inf: its future, a window, a chunk, keys an indexer did
not choose).

It only watches: the hooks return nothing, so the forward pass continues with its own tensors. A watched pass
computes every T x t score (engine/row_chunks.py), so a recorded generation's ledger is not the one the same
generation unwatched counts: `attention_of` gives a generation's maps from one pass of their own over the positions it
fed (the same weights: the prefill's rows and each decode step's are a pass over the whole sequence's), the
generation itself unwatched; `AttentionRecorder` keeps a watched run's (a trace's) pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.hooks import selector
from ..errors import UserError
from ..text import runs
from .choices import chosen_layers


@dataclass
class AttentionMaps:
    """layer -> [H, N, N] float32: query position x key position, NaN where the mask hides the key."""

    weights: dict[int, np.ndarray]
    window: int | None = None  # the sliding window, if the model has one
    recorded: bool = False  # kept from the run's own passes (AttentionRecorder), not from a pass of their own

    @property
    def positions(self) -> int:
        return next(iter(self.weights.values())).shape[-1] if self.weights else 0

    @property
    def layers(self) -> list[int]:
        return sorted(self.weights)


def attention_layers_of(model, layers) -> list[int]:
    """The layers asked for (a layer or a list), each refused before any pass where the model has none or it computes
    no attention weights (a recurrent layer's)."""
    layers = chosen_layers(layers, model.config.n_layer, what="attention layers")
    names = set(model.stage_names)
    attending = [i for i in range(model.config.n_layer) if f"blocks.{i}.attn.weights" in names]
    stateful = [i for i in layers if i not in attending]
    if stateful:  # the stage selector's "no stage is named ..." did not say why
        where = f"the layers that do: {runs(attending)}" if attending else f"none of {model.name}'s layers does"
        raise UserError(f"layer {stateful[0]} computes no attention weights (it keeps a state instead); {where}")
    selector(_names(layers), model.stage_names, "attention=")
    return layers


def _names(layers: list[int]) -> list[str]:
    return [f"blocks.{layer}.attn.{stage}" for layer in layers for stage in ("weights", "scores")]


def attention_of(model, ids: list[int], layers: list[int]) -> AttentionMaps:
    """The layers' weights [H, N, N] (attention_layers_of) over the N positions `ids` (a generation's prompt and every
    new token but the last, which is never fed back), from one pass of their own, outside any ledger; NaN where the
    layer's mask hid the key (its scores -inf there: the future, a window, a chunk, keys an indexer did not choose)."""
    _, cache = model.run_with_cache(ids, _names(layers), all_positions=False)
    weights = {}
    for layer in layers:
        kept = np.array(cache[f"blocks.{layer}.attn.weights"], dtype=np.float32)  # a copy: NaN written in
        if kept.ndim != 3:
            raise ValueError(f"layer {layer}: maps are kept for one sequence, [H, T, t], not {list(kept.shape)}")
        masked = np.isneginf(cache[f"blocks.{layer}.attn.scores"])[..., : kept.shape[-1]]  # DeepSeek-V4's: the window
        kept[np.broadcast_to(masked, kept.shape)] = np.nan
        weights[layer] = kept
    return AttentionMaps(weights, model.config.sliding_window)


class AttentionRecorder:
    """A context manager: while it is open, the chosen layers' attention weights are kept, pass by pass.

    `use_cache` says how the passes are made: with the cache each pass's queries follow the previous
    ones (past = positions fed so far); without it every pass recomputes the sequence from position 0.
    """

    def __init__(self, model, layers, use_cache: bool = True) -> None:
        self.model = model
        self.layers = chosen_layers(layers, model.config.n_layer, what="attention layers")
        self.use_cache = use_cache
        # layer -> each pass's (past, weights [H, T, t], where its scores were -inf: the mask hid the key)
        self._pieces: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {i: [] for i in self.layers}
        self._masked: dict[int, np.ndarray] = {}  # the pass's scores come before its weights
        self._fed: dict[int, int] = dict.fromkeys(self.layers, 0)
        self._handles: list = []

    def __enter__(self) -> AttentionRecorder:
        for layer in self.layers:
            self._handles.append(self.model.add_hook(f"blocks.{layer}.attn.scores", self._mask_keeper(layer)))
            self._handles.append(self.model.add_hook(f"blocks.{layer}.attn.weights", self._keeper(layer)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _mask_keeper(self, layer: int):
        def keep(tensor, name):
            self._masked[layer] = np.isneginf(tensor)
            return None

        return keep

    def _keeper(self, layer: int):
        def keep(tensor, name):
            if tensor.ndim != 3:
                raise ValueError(f"{name}: maps are kept for one sequence, [H, T, t], not {list(tensor.shape)}")
            T = tensor.shape[-2]
            past = self._fed[layer] if self.use_cache else 0
            masked = self._masked.pop(layer)[..., : tensor.shape[-1]]  # DeepSeek-V4's scores go on past its window
            piece = np.array(tensor, dtype=np.float32)  # a copy: later passes may reuse theirs
            self._pieces[layer].append((past, piece, np.broadcast_to(masked, piece.shape)))
            self._fed[layer] = past + T
            return None

        return keep

    def maps(self) -> AttentionMaps:
        """The assembled matrices (see the module docstring)."""
        weights = {}
        for layer, pieces in self._pieces.items():
            if not pieces:
                continue
            n = max(past + piece.shape[-2] for past, piece, _ in pieces)
            heads = pieces[0][1].shape[0]
            full = np.full((heads, n, n), np.nan, dtype=np.float32)
            for past, piece, masked in pieces:
                T, t = piece.shape[-2:]
                end = past + T
                # [H, T, t] -> queries past.., keys ending at end; what the mask hid reads as hidden, not as a 0
                full[:, past:end, end - t : end] = np.where(masked, np.nan, piece)
            weights[layer] = full
        window = self.model.config.sliding_window
        return AttentionMaps(weights, window, recorded=True)
