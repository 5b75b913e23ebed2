"""The Llama family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against GPT-2 (families/gpt2/formulas.py): q is H dh wide, k and v Hkv dh wide each (grouped-query attention),
the MLP has three matrices (gated), and a sliding window W caps the keys a pass attends to at W + T - 1.
"""

from __future__ import annotations

from .config import LlamaConfig


def products(config: LlamaConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh, Hkv, W = config.d_head, config.n_kv_head, config.sliding_window
    ta = t if W is None else min(t, W + T - 1)  # keys attended: the window cuts the oldest
    return {
        "q": (B * T * H * dh, D),  # h [T, D] x W_q [D, H dh]
        "k": (B * T * Hkv * dh, D),  # h [T, D] x W_k [D, Hkv dh]
        "v": (B * T * Hkv * dh, D),  # h [T, D] x W_v [D, Hkv dh]
        "scores": (B * H * T * ta, dh),  # per query head Q [T, dh] x K^T [dh, t]: its group's K, not a copy
        "mix": (B * H * T * dh, ta),  # per query head A [T, t] x V [t, dh]
        "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        "mlp.gate": (B * T * F, D),  # h [T, D] x W_gate [D, F]
        "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
        "mlp.down": (B * T * D, F),  # a [T, F] x W_down [F, D]
        "logits": (B * R * V, D),  # h [R, D] x W_U^T [D, V]
    }


def weight_macs_per_position(config: LlamaConfig) -> int:
    """MACs of the products with weights, per position and layer: D (H dh + 2 Hkv dh) (q, k, v) + H dh D (out)
    + 3 D F (the gated MLP); 4 D^2 + 3 D F without grouping (H dh = D, Hkv = H)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return D * (q + 2 * kv) + q * D + 3 * D * F


def weight_dot_products_per_position(config: LlamaConfig) -> int:
    """Dot products of the products with weights, per position and layer: H dh + 2 Hkv dh (q, k, v) + D (out)
    + 2 F + D (the gated MLP)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return q + 2 * kv + D + 2 * F + D


def parameters(config: LlamaConfig) -> int:
    """V D + L (2 D H dh + 2 D Hkv dh + 3 D F + 2 D + biases) + D [+ V D untied]: q and o are D x H dh, k and v
    D x Hkv dh, the MLP three D x F, two RMSNorm gains of D a layer and one at the end; biases only where the
    config has them (q, k, v: H dh + 2 Hkv dh; o: D; MLP: 2 F + D)."""
    L, D, F, V = config.n_layer, config.n_embd, config.d_ff, config.vocab_size
    head = 0 if config.tie_word_embeddings else V * D
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    biases = config.qkv_bias * (q + 2 * kv) + config.o_bias * D + config.mlp_bias * (2 * F + D)
    return V * D + L * (2 * D * q + 2 * D * kv + 3 * D * F + 2 * D + biases) + D + head


def attention_vs_weights(c: LlamaConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
    D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
    if c.n_kv_head == c.n_head and c.n_head * c.d_head == c.n_embd:
        return "4 D t FLOPs against 8 D^2 + 6 D F for the weights", "t / (2D + 1.5F)", f"{D}, {F}"
    return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D F for the weights",
            "H dh t / (D (H dh + Hkv dh) + 1.5 D F)",
            f"{D}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, {F}")  # fmt: skip
