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


class DecoderFormulas(Formulas):
    """A family's closed forms as its decoder's parts write them: each layer's products (its block's), the logits';
    the products with weights of a position (every product of a layer but the attention's over the keys); the
    parameters, every tensor the parts declare; the active ones, with k of each layer's E routed experts."""

    def __init__(self, decoder: Decoder, routed_kinds: tuple[str, ...] = ()) -> None:
        self.decoder = decoder
        self.routed_kinds = routed_kinds

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """A layer's products (the first whose window is the config's sliding window: where layers alternate, a
        windowed one) and the logits'."""
        windows = [config.layer_window(i) for i in range(config.n_layer)]
        layer = windows.index(config.sliding_window) if config.sliding_window in windows else 0
        return self.decoder.products(config, T, t, B, layer, R)

    def _weights(self, config: Any, layer: int) -> list[tuple[int, int]]:
        ops = self.decoder.block.products(config, 1, 1, 1, layer)
        return [counted for op, counted in ops.items() if op not in ATTENTION_ROLES]

    def weight_macs_per_position(self, config: Any, layer: int = 0) -> int:
        return sum(dots * length for dots, length in self._weights(config, layer))

    def weight_dot_products_per_position(self, config: Any, layer: int = 0) -> int:
        return sum(dots for dots, _ in self._weights(config, layer))

    def parameters(self, config: Any) -> int:
        return sum(prod(t.shape) for t in _tensors(self.decoder, config).values())

    def active_parameters(self, config: Any) -> int:
        routed = sum(prod(t.shape) for t in _tensors(self.decoder, config).values() if t.kind in self.routed_kinds)
        if not routed:
            return self.parameters(config)
        return self.parameters(config) - routed + routed * config.top_k // config.n_experts

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        return self.decoder.block.mixer.attention_vs_weights(config, self.decoder.block.mlp)


@lru_cache(maxsize=64)
def _tensors(decoder: Decoder, config: Any) -> dict:
    return decoder.tensors(config)


def composed(name: str, decoder: Decoder, formulas: Formulas | None = None, **record: Any) -> Architecture:
    """The record of a family built from parts: its decoder's stage table, layout and closed forms (`formulas`, where
    the family's own override some), and `record`, the rest of Architecture's fields (model_types, config, presets,
    reference_classes, label...)."""
    layout = Layout(
        prefix=decoder.prefix,
        layers=decoder.layers,
        embedding=f"{decoder.embedding}.weight",
        ignored=decoder.ignored,
        shapes=lambda config: {n: t.shape for n, t in _tensors(decoder, config).items()},
        kinds=decoder.kinds,
        kind_of=(),
        prefixes=decoder.prefixes,
        tensors=lambda config: _tensors(decoder, config),
    )
    return Architecture(
        name=name,
        forward=decoder,
        stage_table=lambda config: decoder.stage_table(name, config),
        # derived from the presets on first use (Architecture.all_stages), unless the record gives it
        every_stage=record.pop("every_stage", None),
        layout=layout,
        formulas=formulas or DecoderFormulas(decoder),
        **record,
    )
