"""The closed forms of a decoder whose layers are not all attention (a hybrid's: Mamba-2's, Nemotron-H's, Qwen3.5's):
the layers of each kind (a block by kind, ByKind, or one block) counted by their own parts, a recurrent layer's scan
apart from its products with weights.

A recurrent mixer (parts/mamba2.py's, parts/deltanet.py's) says what its scan computes: `scan(config, T, t, B)`, the
(dot products, MACs) of each of its scan's products in a pass of T positions at context t, as computed (in chunks
over a prompt, in the recurrent form in a decode step), and `scan_recurrent_macs(config, T)`, the same positions in
the recurrent form. A layer attends where its cache keeps keys and values (as the decoder gives it a mask).
"""

from __future__ import annotations

from typing import Any

from ...engine.kvcache import KeysValues
from ...engine.row_chunks import ROW_CHUNK
from ...engine.stages import ATTENTION_ROLES
from .blocks import ByKind
from .family import DecoderFormulas
from .part import Products


class HybridFormulas(DecoderFormulas):
    """A hybrid's closed forms: a pass's products, one layer of each kind's (in the order the kinds first appear) and
    the logits'; a layer's products with weights, every product of its parts but the attention's over the keys and
    its scan's; a recurrent layer's scan. `sums_generation`: a generation's MACs summed here, pass by pass as each computes (every
    Mamba-2 layer's prefill in chunks, even of one position), where verbs/formulas.py's sum would not."""

    sums_generation = False

    def first_layers(self, config: Any) -> dict[str, int]:
        """Each kind of layer's first layer, in the order the kinds first appear."""
        first: dict[str, int] = {}
        for layer, kind in enumerate(config.layer_types):
            first.setdefault(kind, layer)
        return first

    def mixer(self, config: Any, layer: int) -> Any:
        """A layer's mixer: its block's (its kind's block, in a block by kind)."""
        block = self.decoder.block
        return (block.blocks[config.layer_types[layer]] if isinstance(block, ByKind) else block).mixer

    def scan(self, config: Any, layer: int, T: int, t: int) -> dict[str, tuple[int, int]]:
        """(dot products, MACs) of each of a layer's scan's products in a pass of T positions at context t (none in a
        layer that does not scan)."""
        mixer = self.mixer(config, layer)
        return mixer.scan(config, T, t) if hasattr(mixer, "scan") else {}

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> Products:
        ops: Products = {}
        for layer in self.first_layers(config).values():
            ops |= self.decoder.block.products(config, T, t, B, layer)
        return ops | {"logits": (B * R * config.vocab_size, config.n_embd)}

    def _weights(self, config: Any, layer: int) -> list[tuple[int, int]]:
        scan = self.scan(config, layer, 1, 1)
        ops = self.decoder.block.products(config, 1, 1, 1, layer)
        return [counted for op, counted in ops.items() if op not in ATTENTION_ROLES and op not in scan]

    # A hybrid's layers are of several kinds: its notes are its family's, and its attention chooses no keys.
    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        return []

    def selection_per_pair(self, config: Any, layer: int = 0) -> tuple[int, int]:
        return 0, 0

    def attends(self, config: Any, layer: int) -> bool:
        return isinstance(config.layer_cache(layer), KeysValues)

    # A layer's scan over a pass of T positions, one sequence: from position 0 (in chunks), or (T = 1) a decode step.
    def scan_macs(self, config: Any, layer: int, T: int) -> int:
        return sum(macs for _, macs in self.scan(config, layer, T, T + (T == 1)).values())

    def scan_dot_products(self, config: Any, layer: int, T: int) -> int:
        return sum(dots for dots, _ in self.scan(config, layer, T, T + (T == 1)).values())

    def scan_recurrent_macs(self, config: Any, layer: int, T: int) -> int:
        mixer = self.mixer(config, layer)
        return mixer.scan_recurrent_macs(config, T) if hasattr(mixer, "scan_recurrent_macs") else 0

    def pass_macs(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> int:
        """A pass's MACs as computed: each layer's products with weights, its scan in the form it runs at (T, t), and
        its attention over the (query, key) pairs its chunks of query rows compute (a hybrid's attention has no
        window); the logits."""
        total = B * R * config.n_embd * config.vocab_size
        for kind, layer in self.first_layers(config).items():
            scan = sum(macs for _, macs in self.scan(config, layer, T, t).values())
            pairs = computed_pairs(T, t) if self.attends(config, layer) else 0
            attention = config.n_head * (config.d_head + config.d_value) * pairs
            per_layer = T * self.weight_macs_per_position(config, layer) + scan + attention
            total += B * config.layer_types.count(kind) * per_layer
        return total

    def generation_macs(
        self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
    ) -> int | None:
        """1 prefill and n_new - 1 decode steps: with the cache, each step one position (a scan's recurrent form, an
        attention layer over every cached key); without it, every step recomputes all its t positions."""
        if not self.sums_generation:
            return None
        if use_cache:
            steps = sum(self.pass_macs(config, 1, t, 1, B) for t in range(n_prompt + 1, n_prompt + n_new))
            return self.pass_macs(config, n_prompt, n_prompt, 1, B) + steps
        return sum(self.pass_macs(config, t, t, 1, B) for t in range(n_prompt, n_prompt + n_new))


def computed_pairs(T: int, t: int) -> int:
    """(query, key) pairs per head whose scores a pass computes without a window: all T t up to C = ROW_CHUNK new
    positions; beyond, in chunks of C query rows, each against the keys up to its last row: p T + C² m (m + 1) / 2 +
    (T - m C) T with m = T // C full chunks after p = t - T earlier positions."""
    C, past = ROW_CHUNK, t - T
    if T <= C:
        return T * t
    m = T // C
    return past * T + C * C * m * (m + 1) // 2 + (T - m * C) * T
