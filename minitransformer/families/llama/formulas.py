"""The Llama family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against GPT-2: q is H dh wide, k and v Hkv dh wide each (grouped-query attention),
the MLP has three matrices (gated), and a sliding window W caps the keys a pass attends to at W + T - 1.
"""

from __future__ import annotations

from typing import Any

from ..architecture import Formulas


class LlamaFormulas(Formulas):
    """The Llama block's closed forms as its parts': the attention's and the MLP's products, weights and parameters,
    each a method that a family whose block has another part overrides (Mixtral its experts, Phi-3 its fused
    products, Gemma its four norms). `config` is any config of such a family (its fields' names are the Llama
    family's)."""

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
        logits = {"logits": (B * R * config.vocab_size, config.n_embd)}  # h [R, D] x W_U^T [D, V]
        return (
            self.attention_products(config, T, t, B, config.sliding_window) | self.mlp_products(config, T, B) | logits
        )

    def attention_products(self, config: Any, T: int, t: int, B: int, window: int | None) -> dict[str, tuple[int, int]]:
        """Grouped-query attention's products in a layer with this sliding window (None: none)."""
        D, H, dh, Hkv = config.n_embd, config.n_head, config.d_head, config.n_kv_head
        ta = t if window is None else min(t, window + T - 1)  # keys attended: the window cuts the oldest
        return {
            "q": (B * T * H * dh, D),  # h [T, D] x W_q [D, H dh]
            "k": (B * T * Hkv * dh, D),  # h [T, D] x W_k [D, Hkv dh]
            "v": (B * T * Hkv * dh, D),  # h [T, D] x W_v [D, Hkv dh]
            "scores": (B * H * T * ta, dh),  # per query head Q [T, dh] x K^T [dh, t]: its group's K, not a copy
            "mix": (B * H * T * dh, ta),  # per query head A [T, t] x V [t, dh]
            "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        }

    def mlp_products(self, config: Any, T: int, B: int, layer: int = 0) -> dict[str, tuple[int, int]]:
        """The gated MLP's three products."""
        D, F = config.n_embd, config.d_ff
        return {
            "mlp.gate": (B * T * F, D),  # h [T, D] x W_gate [D, F]
            "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
            "mlp.down": (B * T * D, F),  # a [T, F] x W_down [F, D]
        }

    def weight_macs_per_position(self, config: Any, layer: int = 0) -> int:
        """MACs of the products with weights, per position, in a layer: D (H dh + 2 Hkv dh) (q, k, v) + H dh D
        (out) + 3 D F (the gated MLP); 4 D^2 + 3 D F without grouping (H dh = D, Hkv = H)."""
        D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
        return D * (q + 2 * kv) + q * D + self.mlp_weight_macs(config, layer)

    def mlp_weight_macs(self, config: Any, layer: int = 0) -> int:
        return 3 * config.n_embd * config.d_ff

    def weight_dot_products_per_position(self, config: Any, layer: int = 0) -> int:
        """Dot products of the products with weights, per position, in a layer: H dh + 2 Hkv dh (q, k, v) + D
        (out) + 2 F + D (the gated MLP)."""
        D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
        return q + 2 * kv + D + self.mlp_weight_dot_products(config, layer)

    def mlp_weight_dot_products(self, config: Any, layer: int = 0) -> int:
        return 2 * config.d_ff + config.n_embd

    def parameters(self, config: Any) -> int:
        """V D + L (2 D H dh + 2 D Hkv dh + 3 D F + 2 D + biases) + D [+ V D untied]: q and o are D x H dh, k and v
        D x Hkv dh, the MLP three D x F, two RMSNorm gains of D a layer and one at the end; biases only where the
        config has them (q, k, v: H dh + 2 Hkv dh; o: D; MLP: 2 F + D)."""
        return self.counted(config, active=False)

    def counted(self, config: Any, active: bool) -> int:
        """The parameters, layer by layer (each its attention, MLP and norms), with the embedding, the final norm
        and an untied head; `active`: a mixture of experts' k experts of E in each layer (mlp_parameters)."""
        D, V = config.n_embd, config.vocab_size
        head = 0 if config.tie_word_embeddings else V * D
        layers = sum(
            self.attention_parameters(config) + self.mlp_parameters(config, i, active) + self.norm_parameters(config)
            for i in range(config.n_layer)
        )
        return V * D + layers + D + head

    def attention_parameters(self, config: Any) -> int:
        """A layer's q, k, v and o: 2 D H dh + 2 D Hkv dh, and their biases where the config has them."""
        D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
        return 2 * D * q + 2 * D * kv + config.qkv_bias * (q + 2 * kv) + config.o_bias * D

    def mlp_parameters(self, config: Any, layer: int = 0, active: bool = False) -> int:
        """A layer's gated MLP: 3 D F, and its biases (2 F + D) where mlp_bias."""
        D, F = config.n_embd, config.d_ff
        return 3 * D * F + getattr(config, "mlp_bias", False) * (2 * F + D)

    def norm_parameters(self, config: Any) -> int:
        """A layer's norms: two RMSNorm gains of D."""
        return 2 * config.n_embd

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
        D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
        if c.n_kv_head == c.n_head and c.n_head * c.d_head == c.n_embd:
            return "4 D t FLOPs against 8 D^2 + 6 D F for the weights", "t / (2D + 1.5F)", f"{D}, {F}"
        return (
            "4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D F for the weights",
            "H dh t / (D (H dh + Hkv dh) + 1.5 D F)",
            f"{D}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, {F}",
        )


FORMULAS = LlamaFormulas()
