"""The GPT-NeoX family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against GPT-2 (families/gpt2/formulas.py): the same products (one fused qkv of 3D, out, a two-matrix MLP, per head
scores and mix), no position table, an untied unembedding by default, attention biases only where attention_bias
says. Partial rotary and the parallel residual change no product: they are stages with no dot products.
"""

from __future__ import annotations

from .config import NeoXConfig


def products(config: NeoXConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
    D, H, F, V, dh = config.n_embd, config.n_head, config.d_ff, config.vocab_size, config.d_head
    return {
        "qkv": (B * T * 3 * D, D),  # h [T, D] x W_qkv [D, 3D]: every head's q, k and v in one product
        "scores": (B * H * T * t, dh),  # per head Q [T, dh] x K^T [dh, t]
        "mix": (B * H * T * dh, t),  # per head A [T, t] x V [t, dh]
        "out": (B * T * D, D),  # Z [T, D] x W_o [D, D]
        "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
        "mlp.down": (B * T * D, F),  # g [T, F] x W_down [F, D]
        "logits": (B * R * V, D),  # h [R, D] x W_out^T [D, V]
    }


def weight_macs_per_position(config: NeoXConfig) -> int:
    """MACs of the products with weights, per position and layer: 3 D^2 (qkv) + D^2 (out) + 2 D F (the MLP)."""
    D, F = config.n_embd, config.d_ff
    return 4 * D * D + 2 * D * F


def weight_dot_products_per_position(config: NeoXConfig) -> int:
    """Dot products of the products with weights, per position and layer: 3 D (qkv) + D (out) + F + D (the MLP)."""
    D, F = config.n_embd, config.d_ff
    return 5 * D + F


def parameters(config: NeoXConfig) -> int:
    """V D (embed_in) + L (4 D^2 + 2 D F + F + 5 D + attention biases 4 D) + 2 D (final norm) [+ V D embed_out].

    Per layer: W_qkv 3 D^2 (+ 3 D), W_o D^2 (+ D), W_up D F + F, W_down F D + D, two LayerNorms 2 x 2 D.
    """
    L, D, F, V = config.n_layer, config.n_embd, config.d_ff, config.vocab_size
    head = 0 if config.tie_word_embeddings else V * D
    attention_biases = 4 * D if config.attention_bias else 0
    return V * D + L * (4 * D * D + 2 * D * F + F + 5 * D + attention_biases) + 2 * D + head


def attention_vs_weights(c: NeoXConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
    D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
    six = " = t / 6D" if c.d_ff == 4 * c.n_embd else ""
    return "4 D t FLOPs against 8 D^2 + 4 D F for the weights", f"t / (2D + F){six}", f"{D}, {F}"
