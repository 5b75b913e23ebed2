"""gpt-oss's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against Mixtral (families/mixtral/formulas.py): each expert's gate and up are one product of width 2F (the same
2F dot products of length D per token), the sinks and the biases are additions (no dot products), and the window
is each layer's own (sliding layers alternate with full ones). Parameters: biases on q, k, v, o, the router and
the experts, and H sink logits a layer.
"""

from __future__ import annotations

from .config import GptOssConfig


def products(
    config: GptOssConfig, T: int, t: int, R: int = 1, B: int = 1, layer: int = 0
) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops: those of
    layer `layer`, whose window they read)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh, Hkv, W, E, k = config.d_head, config.n_kv_head, config.layer_window(layer), config.n_experts, config.top_k
    ta = t if W is None else min(t, W + T - 1)
    return {
        "q": (B * T * H * dh, D),
        "k": (B * T * Hkv * dh, D),
        "v": (B * T * Hkv * dh, D),
        "scores": (B * H * T * ta, dh),  # the sink is a column added after: no dot product
        "mix": (B * H * T * dh, ta),
        "out": (B * T * D, H * dh),
        "router": (B * T * E, D),  # h [T, D] x W_router [D, E]
        "expert.gate_up": (B * T * k * 2 * F, D),  # each token's h [D] x W_gu_e [D, 2F] in each of its k experts
        "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W_down_e [F, D] in each of its k experts
        "logits": (B * R * V, D),
    }


def weight_macs_per_position(config: GptOssConfig) -> int:
    """MACs of the products with weights, per position and layer: D (H dh + 2 Hkv dh) + H dh D (attention),
    D E (the router) and k (2 D F + F D) (k experts' fused gate and up, and down)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return D * (q + 2 * kv) + q * D + D * config.n_experts + config.top_k * 3 * D * F


def weight_dot_products_per_position(config: GptOssConfig) -> int:
    """Dot products of the products with weights, per position and layer: H dh + 2 Hkv dh + D (attention), E (the
    router), k (2 F + D) (k experts' gate and up, and down)."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head
    return q + 2 * kv + D + config.n_experts + config.top_k * (2 * F + D)


def _parameters(config: GptOssConfig, experts: int) -> int:
    L, D, F, V, E, H = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.n_experts, config.n_head
    head = 0 if config.tie_word_embeddings else V * D
    q, kv = H * config.d_head, config.n_kv_head * config.d_head
    attention = 2 * D * q + 2 * D * kv + config.qkv_bias * (q + 2 * kv + D) + H  # weights, biases, sinks
    router = E * D + E
    expert = 3 * D * F + 2 * F + D  # W_gu [D, 2F], W_down [F, D], their biases
    return V * D + L * (attention + router + experts * expert + 2 * D) + D + head


def parameters(config: GptOssConfig) -> int:
    """V D + L (2 D H dh + 2 D Hkv dh + [H dh + 2 Hkv dh + D] + H + E D + E + E (3 D F + 2 F + D) + 2 D) + D
    [+ V D untied]: attention as a Llama's with biases (attention_bias) and H sinks, the router E x D and its E
    biases, E experts of W_gu [D, 2F], W_down [F, D] and their biases, two RMSNorm gains a layer and one at the end."""
    return _parameters(config, config.n_experts)


def active_parameters(config: GptOssConfig) -> int:
    """The parameters one token's pass reads: everything but the experts the router did not choose, so k experts of
    E a layer (their biases too); the embedding and the head whole, as for Mixtral."""
    return _parameters(config, config.top_k)


def attention_vs_weights(c: GptOssConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
    return ("4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 2 D E + 6 k D F for the weights (k experts of E)",
            "H dh t / (D (H dh + Hkv dh) + D E / 2 + 1.5 k D F)",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, "
            f"E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}")  # fmt: skip
