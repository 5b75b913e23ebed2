"""The Qwen3 family in the table of families: the Llama block whose attention RMS-normalises each head's q and k over
its dh numbers, with gains of dh shared by every head, between the split into heads and the rotation (transformers'
Qwen3Attention); the norms are no products, so its products are the Llama family's, its parameters Llama's + 2 dh a
layer."""

from __future__ import annotations

from functools import partial

from ..llama.family import SYMBOLS
from ..llama.reference import float64_throughout
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from .config import PRESETS, Qwen3Config

NOTE = ("  (transformers' float64 Qwen3 computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)")  # fmt: skip

ARCHITECTURE = composed(
    "qwen3", Decoder(PreNorm(GroupedQueryAttention(qk_norm=PER_HEAD), GatedMLP()), symbols=SYMBOLS),
    config=Qwen3Config, presets=PRESETS, label="Qwen3 family",
    float64_note=NOTE,
    float64_reference=partial(float64_throughout, norms_per_layer=4),  # q_norm and k_norm beside the block's two
)  # fmt: skip
