"""Where a Phi-3 model keeps its numbers in a Hugging Face checkpoint: the Llama layout with q, k and v in one tensor
(qkv_proj) and the MLP's gate and up in another (gate_up_proj); nn.Linear weights are [out, in], no biases."""

from __future__ import annotations

import re

from ..llama.layout import EMBEDDING, IGNORED, LAYERS, PREFIX
from .config import Phi3Config

__all__ = ["EMBEDDING", "IGNORED", "KINDS", "KIND_OF", "LAYERS", "PREFIX", "phi3_shapes"]


def phi3_shapes(config: Phi3Config) -> dict[str, tuple[int, ...]]:
    """A Phi-3 checkpoint: qkv_proj [H dh + 2 Hkv dh, D] (q rows first, then k, then v), gate_up_proj [2F, D]
    (gate rows first), no biases."""
    D, F, V = config.n_embd, config.d_ff, config.vocab_size
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        shapes[f"{a}.qkv_proj.weight"] = (q + 2 * kv, D)
        shapes[f"{a}.o_proj.weight"] = (D, q)
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        shapes[f"{m}.gate_up_proj.weight"] = (2 * F, D)
        shapes[f"{m}.down_proj.weight"] = (D, F)
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


# kind -> what it is, in the order a forward pass meets them.
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_qkv": "attention query, key and value weights in one, W_qkv [H*dh + 2*Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp_gate_up": "MLP gate and up weights in one, W_gate_up [2F, D]",
    "mlp_down": "MLP down weights W_down [D, F]",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(r"^layers\.\d+\.self_attn\.qkv_proj\.weight$"), "attention_qkv"),
    (re.compile(r"^layers\.\d+\.self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(r"^layers\.\d+\.mlp\.gate_up_proj\.weight$"), "mlp_gate_up"),
    (re.compile(r"^layers\.\d+\.mlp\.down_proj\.weight$"), "mlp_down"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention)_layernorm|norm)\.weight$"), "norms"),
)
