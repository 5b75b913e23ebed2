"""A family's record from its parts: `composed(...)` makes the Architecture whose stage table, checkpoint layout and
closed forms are the decoder's (parts/decoder.py), so that a family states its config, its presets, its decoder and
what is truly its own, and nothing a part declares again."""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import Any

from ...engine.stages import ATTENTION_ROLES
from ..architecture import Architecture, Formulas, Layout
from .decoder import Decoder
from .part import held_parts


class DecoderFormulas(Formulas):
    """A family's closed forms as its decoder's parts write them: each layer's products (its block's), the logits';
    the products with weights of a position (every product of a layer but those over the keys, `activations`); the
    parameters, every tensor the parts declare but buffers (`buffer_kinds`); the active ones, with k of each layer's E
    routed experts (`routed_kinds`); its attention's own lines in count's report, and its cost of choosing keys."""

    activations: tuple[str, ...] = ATTENTION_ROLES  # the products of a layer whose B is not a weight

    def __init__(
        self, decoder: Decoder, routed_kinds: tuple[str, ...] = (), buffer_kinds: tuple[str, ...] = ()
    ) -> None:
        self.decoder = decoder
        self.routed_kinds = routed_kinds
        self.buffer_kinds = buffer_kinds

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """A layer's products (the first whose window is the config's sliding window: where layers alternate, a
        windowed one) and the logits'."""
        windows = [config.layer_window(i) for i in range(config.n_layer)]
        layer = windows.index(config.sliding_window) if config.sliding_window in windows else 0
        return self.decoder.products(config, T, t, B, layer, R)

    def _weights(self, config: Any, layer: int) -> list[tuple[int, int]]:
        ops = self.decoder.block.products(config, 1, 1, 1, layer)
        return [counted for op, counted in ops.items() if op not in self.activations]

    def weight_macs_per_position(self, config: Any, layer: int = 0) -> int:
        return sum(dots * length for dots, length in self._weights(config, layer))

    def weight_dot_products_per_position(self, config: Any, layer: int = 0) -> int:
        return sum(dots for dots, _ in self._weights(config, layer))

    def parameters(self, config: Any) -> int:
        return sum(n for kind, n in _numbers_by_kind(self.decoder, config).items() if kind not in self.buffer_kinds)

    def active_parameters(self, config: Any) -> int:
        routed = sum(n for kind, n in _numbers_by_kind(self.decoder, config).items() if kind in self.routed_kinds)
        if not routed:
            return self.parameters(config)
        return self.parameters(config) - routed + routed * config.top_k // config.n_experts

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        return self.decoder.block.mixer.attention_vs_weights(config, self.decoder.block.mlp)

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        """Its attention's own lines in count's report, where it has some (DeepSeek-V3's latent cache)."""
        notes = getattr(self.decoder.block.mixer, "count_notes", None)
        return notes(config, n_prompt, n_new) if notes is not None else []

    def selection_per_pair(self, config: Any, layer: int = 0) -> tuple[int, int]:
        """What its attention spends in a layer on each key in reach to choose those it attends to (an indexer's),
        else (0, 0)."""
        selection = getattr(self.decoder.block.mixer, "selection_per_pair", None)
        return selection(config, layer) if selection is not None else (0, 0)


@lru_cache(maxsize=64)
def _tensors(decoder: Decoder, config: Any) -> dict:
    return decoder.tensors(config)


@lru_cache(maxsize=64)
def _numbers_by_kind(decoder: Decoder, config: Any) -> dict[str, int]:
    """The numbers a config's tensors hold, kind by kind: its tensors listed and summed once (Qwen3.5-397B's 90,000),
    where the parameters and the active ones each summed them (config --list, every preset's two: 1.8 s against 2.0)."""
    numbers: dict[str, int] = {}
    for tensor in _tensors(decoder, config).values():
        numbers[tensor.kind] = numbers.get(tensor.kind, 0) + prod(tensor.shape)
    return numbers


def composed(
    name: str,
    decoder: Decoder,
    formulas: Formulas | type[DecoderFormulas] | None = None,
    reference: Any = None,
    **record: Any,
) -> Architecture:
    """The record of a family built from parts: its decoder's stage table, layout and closed forms (`formulas`, where
    the family's own override some: a DecoderFormulas subclass, made here with the kinds), and `record`, the rest of
    Architecture's fields (config, presets, label...); the model types it reads are its config's. The kinds of its
    routed experts (a mixture's `routed`, parts/moe.py), of which a token reads k of E, and those that are buffers, no
    parameters (a part's `buffers`), are its parts' own. `reference`: the module of its float64 reference for validate,
    whose float64_throughout and NOTE are its record's float64_reference and float64_note."""
    if reference is not None:
        record |= {"float64_reference": reference.float64_throughout, "float64_note": reference.NOTE}
    parts = list(held_parts(decoder))
    routed_kinds = tuple(dict.fromkeys(kind for part in parts for kind in getattr(part, "routed", ())))
    buffer_kinds = tuple(dict.fromkeys(kind for part in parts for kind in getattr(part, "buffers", ())))
    if formulas is None or isinstance(formulas, type):
        formulas = (formulas or DecoderFormulas)(decoder, routed_kinds, buffer_kinds)
    layout = Layout(
        prefix=decoder.prefix,
        layers=decoder.layers,
        embedding=f"{decoder.embedding}.weight",
        ignored=decoder.ignored,
        shapes=lambda config: {n: t.shape for n, t in _tensors(decoder, config).items()},
        kinds=decoder.kinds,
        prefixes=decoder.prefixes,
        renamed=decoder.renamed,
        tensors=lambda config: _tensors(decoder, config),
        routed_kinds=routed_kinds,
        buffer_kinds=buffer_kinds,
    )
    return Architecture(
        name=name,
        model_types=record.pop("model_types", record["config"].model_types),
        forward=decoder,
        stage_table=lambda config: decoder.stage_table(name, config),
        # derived from the presets on first use (Architecture.all_stages), unless the record gives it
        every_stage=record.pop("every_stage", None),
        layout=layout,
        formulas=formulas,
        **record,
    )
