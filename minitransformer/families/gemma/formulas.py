"""The Gemma family's arithmetic in closed form, written from its equations alone (nothing here runs the model), held
by the tests to the ledger of real and shape-only runs.

Its products are the Llama block's (q, k, v, out, a gated MLP, the logits): the scale, the soft-caps, the extra norms
and the embedding's scale are elementwise, with no dot products. What differs: a sliding layer attends to at most
W + T - 1 keys and a full layer to all t, and the parameters hold four norms a block (and Gemma 3's q and k norms).
"""

from __future__ import annotations

from ..llama.formulas import attention_vs_weights, weight_dot_products_per_position, weight_macs_per_position
from .config import GemmaConfig

__all__ = ["attention_vs_weights", "parameters", "products", "weight_dot_products_per_position",
           "weight_macs_per_position"]  # fmt: skip

_SLIDING = object()


def products(
    config: GemmaConfig, T: int, t: int, R: int = 1, B: int = 1, window=_SLIDING
) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass, per layer for the block ops: of a
    layer with this window (by default a sliding layer's, config.sliding_window; None: a full layer's)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh, Hkv = config.d_head, config.n_kv_head
    W = config.sliding_window if window is _SLIDING else window
    ta = t if W is None else min(t, W + T - 1)  # keys attended: a sliding window cuts the oldest
    return {
        "q": (B * T * H * dh, D),  # h [T, D] x W_q [D, H dh]
        "k": (B * T * Hkv * dh, D),  # h [T, D] x W_k [D, Hkv dh]
        "v": (B * T * Hkv * dh, D),  # h [T, D] x W_v [D, Hkv dh]
        "scores": (B * H * T * ta, dh),  # per query head Q [T, dh] x K^T [dh, t]
        "mix": (B * H * T * dh, ta),  # per query head A [T, t] x V [t, dh]
        "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        "mlp.gate": (B * T * F, D),  # h [T, D] x W_gate [D, F]
        "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
        "mlp.down": (B * T * D, F),  # a [T, F] x W_down [F, D]
        "logits": (B * R * V, D),  # h [R, D] x W_U^T [D, V]
    }


def parameters(config: GemmaConfig) -> int:
    """V D + L (2 D H dh + 2 D Hkv dh + 3 D F + 4 D [+ 2 dh] [+ biases]) + D [+ V D untied]: q and o are D x H dh,
    k and v D x Hkv dh, the MLP three D x F, four RMSNorm gains of D a layer (and Gemma 3's two of dh, on q and k),
    one at the end; attention_bias adds H dh + 2 Hkv dh + D."""
    L, D, F, V, dh = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.d_head
    q, kv = config.n_head * dh, config.n_kv_head * dh
    head = 0 if config.tie_word_embeddings else V * D
    biases = config.qkv_bias * (q + 2 * kv + D)
    return V * D + L * (2 * D * q + 2 * D * kv + 3 * D * F + 4 * D + config.qk_norm * 2 * dh + biases) + D + head
