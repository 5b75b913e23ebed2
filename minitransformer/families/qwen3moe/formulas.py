"""Qwen3-MoE's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against Qwen3 (the Llama family's products: q_norm and k_norm are norms, no dot products): a sparse layer's MLP is a
router, D x E, and k experts' three D x F products per token (F = moe_intermediate_size): T k x 3 D F MACs whichever
experts the router chose; a dense layer's is the gated MLP of width Fd = intermediate_size, 3 D Fd a position. The
layers differ in their products, so the per-position forms are given per layer (weight_macs_per_position(config,
layer)).
"""

from __future__ import annotations

from ..mixtral.formulas import MixtralFormulas
from ..qwen3.attention import Qwen3Formulas
from .config import Qwen3MoeConfig


class Qwen3MoeFormulas(Qwen3Formulas, MixtralFormulas):
    """Qwen3's attention (its parameters: q and k norms' gains) and Mixtral's experts, a dense MLP in dense layers."""

    def products(self, config: Qwen3MoeConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops):
        Mixtral's (attention, the router and k experts' products per token; F = moe_intermediate_size), and where
        some layers are dense, their gated MLP of width Fd."""
        ops = super().products(config, T, t, R, B)
        if config.dense_layers:
            D, Fd = config.n_embd, config.dense_inner
            ops |= {"mlp.gate": (B * T * Fd, D), "mlp.up": (B * T * Fd, D), "mlp.down": (B * T * D, Fd)}
        return ops

    def mlp_weight_macs(self, config: Qwen3MoeConfig, layer: int = 0) -> int:
        """D E + k 3 D F (the router and k experts) in a sparse layer, 3 D Fd (the dense MLP) in a dense one."""
        if layer in config.dense_layers:
            return 3 * config.n_embd * config.dense_inner
        return super().mlp_weight_macs(config, layer)

    def mlp_weight_dot_products(self, config: Qwen3MoeConfig, layer: int = 0) -> int:
        """E + k (2 F + D) in a sparse layer, 2 Fd + D in a dense one."""
        if layer in config.dense_layers:
            return 2 * config.dense_inner + config.n_embd
        return super().mlp_weight_dot_products(config, layer)

    def mlp_parameters(self, config: Qwen3MoeConfig, layer: int = 0, active: bool = False) -> int:
        """A sparse layer's router and E experts (k of them active); a dense layer's gated MLP, 3 D Fd."""
        if layer in config.dense_layers:
            return 3 * config.n_embd * config.dense_inner
        return super().mlp_parameters(config, layer, active)

    def attention_vs_weights(self, c: Qwen3MoeConfig) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs: those
        of the first layer, a sparse or a dense one (as count compares its first layer)."""
        sizes = f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}"
        if 0 in c.dense_layers:
            return (
                "4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D Fd for the weights (layer 0: a dense MLP of Fd)",
                "H dh t / (D (H dh + Hkv dh) + 1.5 D Fd)",
                f"{sizes}, Fd = {c.dense_inner:,}",
            )
        return (
            "4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 2 D E + 6 k D F for the weights (a sparse layer: k "
            "experts of E)",
            "H dh t / (D (H dh + Hkv dh) + D E / 2 + 1.5 k D F)",
            f"{sizes}, E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}",
        )


FORMULAS = Qwen3MoeFormulas()
