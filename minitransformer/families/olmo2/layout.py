"""Where an OLMo 2 model keeps its numbers: the Llama family's checkpoint (families/llama/layout.py) without
input_layernorm, with each layer's q_norm [H*dh], k_norm [Hkv*dh] and post_feedforward_layernorm [D]."""

from __future__ import annotations

import re

from ..llama.layout import EMBEDDING, IGNORED, KINDS, LAYERS, PREFIX, llama_shapes
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from .config import Olmo2Config

__all__ = ["EMBEDDING", "IGNORED", "KINDS", "KIND_OF", "LAYERS", "PREFIX", "olmo2_shapes"]


def olmo2_shapes(config: Olmo2Config) -> dict[str, tuple[int, ...]]:
    """Llama's tensors less input_layernorm, with q_norm and k_norm after o_proj and post_feedforward_layernorm
    after the MLP, in the order transformers' Olmo2DecoderLayer holds them."""
    D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in llama_shapes(config).items():
        if name.endswith(".input_layernorm.weight") or name.endswith(".post_attention_layernorm.weight"):
            continue
        shapes[name] = shape
        layer = re.match(r"layers\.\d+", name)
        if layer and name == f"{layer[0]}.self_attn.o_proj.{'bias' if config.o_bias else 'weight'}":
            shapes[f"{layer[0]}.self_attn.q_norm.weight"] = (q,)
            shapes[f"{layer[0]}.self_attn.k_norm.weight"] = (kv,)
        if layer and name == f"{layer[0]}.mlp.down_proj.weight":
            shapes[f"{layer[0]}.post_attention_layernorm.weight"] = (D,)
            shapes[f"{layer[0]}.post_feedforward_layernorm.weight"] = (D,)
    return shapes


KIND_OF = (
    *LLAMA_KIND_OF,
    (re.compile(r"^layers\.\d+\.(self_attn\.[qk]_norm|post_feedforward_layernorm)\.weight$"), "norms"),
)
