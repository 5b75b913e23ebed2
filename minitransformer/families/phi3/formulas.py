"""The Phi-3 family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against the Llama family (families/llama/formulas.py): the same multiply-accumulates, in fewer products. q, k and v
are one product of H dh + 2 Hkv dh columns, the MLP's gate and up one of 2F columns; attention is the same, a
sliding window W capping the keys a pass attends to at W + T - 1; there are no biases.
"""

from __future__ import annotations

from .config import Phi3Config


def products(config: Phi3Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh, Hkv, W = config.d_head, config.n_kv_head, config.sliding_window
    ta = t if W is None else min(t, W + T - 1)  # keys attended: the window cuts the oldest
    return {
        "qkv": (B * T * (H + 2 * Hkv) * dh, D),  # h [T, D] x W_qkv [D, (H + 2 Hkv) dh]
        "scores": (B * H * T * ta, dh),  # per query head Q [T, dh] x K^T [dh, t]: its group's K
        "mix": (B * H * T * dh, ta),  # per query head A [T, t] x V [t, dh]
        "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        "mlp.gate_up": (B * T * 2 * F, D),  # h [T, D] x W_gate_up [D, 2F]
        "mlp.down": (B * T * D, F),  # a [T, F] x W_down [F, D]
        "logits": (B * R * V, D),  # h [R, D] x W_U^T [D, V]
    }


def weight_macs_per_position(config: Phi3Config) -> int:
    """MACs of the products with weights, per position and layer: D (H dh + 2 Hkv dh) (qkv) + H dh D (out)
    + 2 D F (gate_up) + F D (down)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return D * (q + 2 * kv) + q * D + 2 * D * F + F * D


def weight_dot_products_per_position(config: Phi3Config) -> int:
    """Dot products of the products with weights, per position and layer: H dh + 2 Hkv dh (qkv) + D (out)
    + 2F (gate_up) + D (down)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return (q + 2 * kv) + D + 2 * F + D


def parameters(config: Phi3Config) -> int:
    """V D + L ((H dh + 2 Hkv dh) D + D H dh + 2F D + D F + 2 D) + D [+ V D untied]: W_qkv, W_o, W_gate_up, W_down
    and two RMSNorm gains a layer, one at the end."""
    L, D, F, V = config.n_layer, config.n_embd, config.d_ff, config.vocab_size
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    head = 0 if config.tie_word_embeddings else V * D
    return V * D + L * ((q + 2 * kv) * D + D * q + 2 * F * D + D * F + 2 * D) + D + head


def attention_vs_weights(c: Phi3Config) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
    D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
    if c.n_kv_head == c.n_head:
        return "4 D t FLOPs against 8 D^2 + 6 D F for the weights", "t / (2D + 1.5F)", f"{D}, {F}"
    return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D F for the weights",
            "H dh t / (D (H dh + Hkv dh) + 1.5 D F)",
            f"{D}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, {F}")  # fmt: skip
