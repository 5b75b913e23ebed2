"""Where a Qwen3 model keeps its numbers: the Llama family's checkpoint (families/llama/layout.py), plus each layer's
q_norm and k_norm gains [dh]."""

from __future__ import annotations

import re

from ..llama.layout import EMBEDDING, IGNORED, KINDS, LAYERS, PREFIX, llama_shapes
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from .config import Qwen3Config

__all__ = ["EMBEDDING", "IGNORED", "KINDS", "KIND_OF", "LAYERS", "PREFIX", "qwen3_shapes"]


def qwen3_shapes(config: Qwen3Config) -> dict[str, tuple[int, ...]]:
    """Llama's tensors, with self_attn.q_norm.weight and self_attn.k_norm.weight [dh] after each layer's o_proj."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in llama_shapes(config).items():
        shapes[name] = shape
        layer = re.match(r"layers\.\d+", name)
        if layer and name == f"{layer[0]}.self_attn.o_proj.{'bias' if config.o_bias else 'weight'}":
            shapes[f"{layer[0]}.self_attn.q_norm.weight"] = (config.d_head,)
            shapes[f"{layer[0]}.self_attn.k_norm.weight"] = (config.d_head,)
    return shapes


KIND_OF = (*LLAMA_KIND_OF, (re.compile(r"^layers\.\d+\.self_attn\.[qk]_norm\.weight$"), "norms"))
