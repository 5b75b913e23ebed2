"""The Llama family (Llama 2 and 3, Mistral, Qwen2) in the table of families: the pre-norm block of grouped-query
attention and the gated MLP (families/parts/), with RMSNorms, in the decoder."""

from __future__ import annotations

from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from . import reference
from .config import PRESETS, LlamaConfig

SYMBOLS = (
    "T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
    "F MLP width, V vocabulary, R logit rows"
)
LLAMA = Decoder(PreNorm(GroupedQueryAttention(), GatedMLP()), symbols=SYMBOLS)

ARCHITECTURE = composed("llama", LLAMA, reference=reference, config=LlamaConfig, presets=PRESETS, label="Llama family")
