"""The OLMo 2 family in the table of families (transformers' Olmo2ForCausalLM): the Llama family's parts in a block
without pre-norms, each branch reading the stream x itself and its output RMS-normed before its add (x + norm(attn(x)),
then x + norm(mlp(x))), and q and k RMS-normed over their whole projections (H dh and Hkv dh numbers) before they are
split into heads and rotated."""

from __future__ import annotations

from ..llama.family import SYMBOLS
from ..llama.reference import llama_like, qk_note
from ..parts.attention import WHOLE, GroupedQueryAttention
from ..parts.blocks import PostNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from .config import PRESETS, Olmo2Config

OLMO2 = Decoder(PostNorm(GroupedQueryAttention(qk_norm=WHOLE, reads="x"), GatedMLP(reads="x")), symbols=SYMBOLS)
REFERENCE = llama_like(qk_note("OLMo 2"), 4)  # q_norm, k_norm, and after each branch
ARCHITECTURE = composed("olmo2", OLMO2, reference=REFERENCE, config=Olmo2Config, presets=PRESETS, label="OLMo 2 family")
