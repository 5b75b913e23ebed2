"""Mixtral's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against the Llama family (families/llama/formulas.py): the MLP's three D x F products become a router, D x E, and
k experts' three D x F products per token. Every token's rows are computed by exactly k experts, so the experts'
MACs are T k x 3 D F whichever experts the router chose (and however a count assumes it chose).
"""

from __future__ import annotations

from .config import MixtralConfig


def products(config: MixtralConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh, Hkv, W, E, k = config.d_head, config.n_kv_head, config.sliding_window, config.n_experts, config.top_k
    ta = t if W is None else min(t, W + T - 1)
    return {
        "q": (B * T * H * dh, D),
        "k": (B * T * Hkv * dh, D),
        "v": (B * T * Hkv * dh, D),
        "scores": (B * H * T * ta, dh),
        "mix": (B * H * T * dh, ta),
        "out": (B * T * D, H * dh),
        "router": (B * T * E, D),  # h [T, D] x W_router [D, E]
        "expert.gate": (B * T * k * F, D),  # each token's h [D] x W1_e [D, F] in each of its k experts
        "expert.up": (B * T * k * F, D),  # ... x W3_e [D, F]
        "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W2_e [F, D] in each of its k experts
        "logits": (B * R * V, D),
    }


def weight_macs_per_position(config: MixtralConfig) -> int:
    """MACs of the products with weights, per position and layer: D (H dh + 2 Hkv dh) + H dh D (attention),
    D E (the router) and k x 3 D F (k experts' gated MLPs)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return D * (q + 2 * kv) + q * D + D * config.n_experts + config.top_k * 3 * D * F


def weight_dot_products_per_position(config: MixtralConfig) -> int:
    """Dot products of the products with weights, per position and layer: H dh + 2 Hkv dh + D (attention), E (the
    router), k (2 F + D) (k experts' gate, up and down)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return q + 2 * kv + D + config.n_experts + config.top_k * (2 * F + D)


def _parameters(config: MixtralConfig, experts: int) -> int:
    L, D, F, V, E = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.n_experts
    head = 0 if config.tie_word_embeddings else V * D
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    return V * D + L * (2 * D * q + 2 * D * kv + E * D + experts * 3 * D * F + 2 * D) + D + head


def parameters(config: MixtralConfig) -> int:
    """V D + L (2 D H dh + 2 D Hkv dh + E D + 3 E D F + 2 D) + D [+ V D untied]: attention as a Llama's, the router
    E x D, E experts of three D x F matrices, two RMSNorm gains a layer and one at the end."""
    return _parameters(config, config.n_experts)


def active_parameters(config: MixtralConfig) -> int:
    """The parameters one token's pass reads: everything but the experts the router did not choose, so k experts of
    E a layer: V D + L (2 D H dh + 2 D Hkv dh + E D + 3 k D F + 2 D) + D [+ V D untied]. The embedding and the head
    count whole, as Mistral's "12.9B active" for Mixtral 8x7B counts them (a token reads one row of the embedding,
    but every row of the head)."""
    return _parameters(config, config.top_k)


def attention_vs_weights(c: MixtralConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
    return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 2 D E + 6 k D F for the weights (k experts of E)",
            "H dh t / (D (H dh + Hkv dh) + D E / 2 + 1.5 k D F)",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, "
            f"E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}")  # fmt: skip
