"""Qwen3-MoE's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against Qwen3 (the Llama family's products: q_norm and k_norm are norms, no dot products): a sparse layer's MLP is a
router, D x E, and k experts' three D x F products per token (F = moe_intermediate_size): T k x 3 D F MACs whichever
experts the router chose; a dense layer's is the gated MLP of width Fd = intermediate_size, 3 D Fd a position. The
layers differ in their products, so the per-position forms are given per layer (layer_weight_macs_per_position).
"""

from __future__ import annotations

from ..mixtral import formulas as mixtral
from .config import Qwen3MoeConfig


def products(config: Qwen3MoeConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops): Mixtral's
    (attention, the router and k experts' products per token; F = moe_intermediate_size), and where some layers are
    dense, their gated MLP of width Fd."""
    ops = mixtral.products(config, T, t, R, B)  # type: ignore[arg-type]  # the fields it reads, by their names
    if config.dense_layers:
        D, Fd = config.n_embd, config.dense_inner
        ops |= {"mlp.gate": (B * T * Fd, D), "mlp.up": (B * T * Fd, D), "mlp.down": (B * T * D, Fd)}
    return ops


def _attention_macs(config: Qwen3MoeConfig) -> int:
    D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return D * (q + 2 * kv) + q * D


def layer_weight_macs_per_position(config: Qwen3MoeConfig, layer: int) -> int:
    """MACs of the products with weights, per position, in layer `layer`: D (H dh + 2 Hkv dh) + H dh D (attention),
    then D E + k 3 D F (the router and k experts) in a sparse layer, 3 D Fd (the dense MLP) in a dense one."""
    D = config.n_embd
    if layer in config.dense_layers:
        return _attention_macs(config) + 3 * D * config.dense_inner
    return _attention_macs(config) + D * config.n_experts + config.top_k * 3 * D * config.d_ff


def layer_weight_dot_products_per_position(config: Qwen3MoeConfig, layer: int) -> int:
    """Dot products of the products with weights, per position, in layer `layer`: H dh + 2 Hkv dh + D (attention),
    then E + k (2 F + D) in a sparse layer, 2 Fd + D in a dense one."""
    D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
    if layer in config.dense_layers:
        return q + 2 * kv + D + 2 * config.dense_inner + D
    return q + 2 * kv + D + config.n_experts + config.top_k * (2 * config.d_ff + D)


def weight_macs_per_position(config: Qwen3MoeConfig) -> int:
    """The first layer's (layer_weight_macs_per_position says each layer's)."""
    return layer_weight_macs_per_position(config, 0)


def weight_dot_products_per_position(config: Qwen3MoeConfig) -> int:
    """The first layer's (layer_weight_dot_products_per_position says each layer's)."""
    return layer_weight_dot_products_per_position(config, 0)


def _parameters(config: Qwen3MoeConfig, experts: int) -> int:
    L, D, F, V, E = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.n_experts
    Ld = len(config.dense_layers)
    q, kv, dh = config.n_head * config.d_head, config.n_kv_head * config.d_head, config.d_head
    attention = 2 * D * q + 2 * D * kv + (q + 2 * kv + D if config.qkv_bias else 0) + 2 * dh
    head = 0 if config.tie_word_embeddings else V * D
    sparse = E * D + experts * 3 * D * F
    dense = 3 * D * config.dense_inner
    return V * D + L * (attention + 2 * D) + (L - Ld) * sparse + Ld * dense + D + head


def parameters(config: Qwen3MoeConfig) -> int:
    """V D + L (2 D H dh + 2 D Hkv dh [+ H dh + 2 Hkv dh + D biases] + 2 dh + 2 D) + Ls (E D + 3 E D F) + Ld 3 D Fd
    + D [+ V D untied]: Qwen3's attention with its q and k norms' gains, two RMSNorms a layer; Ls sparse layers of a
    router and E experts, Ld dense layers of a gated MLP of width Fd; the final norm."""
    return _parameters(config, config.n_experts)


def active_parameters(config: Qwen3MoeConfig) -> int:
    """The parameters one token's pass reads: k experts of E in each sparse layer, everything else whole (embedding and
    head in full, as the model cards count): parameters() with 3 k D F in place of 3 E D F."""
    return _parameters(config, config.top_k)


def attention_vs_weights(c: Qwen3MoeConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs: those of
    the first layer, a sparse or a dense one (as count compares its first layer)."""
    sizes = f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}"
    if 0 in c.dense_layers:
        return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D Fd for the weights (layer 0: a dense MLP of Fd)",
                "H dh t / (D (H dh + Hkv dh) + 1.5 D Fd)", f"{sizes}, Fd = {c.dense_inner:,}")  # fmt: skip
    return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 2 D E + 6 k D F for the weights (a sparse layer: k experts "
            "of E)", "H dh t / (D (H dh + Hkv dh) + D E / 2 + 1.5 k D F)",
            f"{sizes}, E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}")  # fmt: skip
