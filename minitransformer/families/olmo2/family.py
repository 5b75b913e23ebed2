"""The OLMo 2 family in the table of families (transformers' Olmo2ForCausalLM): the Llama family's parts in a block
without pre-norms, each branch reading the stream x itself and its output RMS-normed before its add (x + norm(attn(x)),
then x + norm(mlp(x))), and q and k RMS-normed over their whole projections (H dh and Hkv dh numbers) before they are
split into heads and rotated."""

from __future__ import annotations

from functools import partial

from ..llama.family import SYMBOLS
from ..llama.reference import float64_throughout
from ..parts.attention import WHOLE, GroupedQueryAttention
from ..parts.blocks import PostNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from .config import PRESETS, Olmo2Config

NOTE = ("  (transformers' float64 OLMo 2 computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)")  # fmt: skip

OLMO2 = Decoder(PostNorm(GroupedQueryAttention(qk_norm=WHOLE, reads="x"), GatedMLP(reads="x")), symbols=SYMBOLS)

ARCHITECTURE = composed(
    "olmo2", OLMO2, config=Olmo2Config, presets=PRESETS, label="OLMo 2 family",
    float64_note=NOTE,
    float64_reference=partial(float64_throughout, norms_per_layer=4),  # q_norm, k_norm, and after each branch
)  # fmt: skip
