"""The Qwen3 family in the table of families: the Llama block whose attention RMS-normalises each head's q and k over
its dh numbers, with gains of dh shared by every head, between the split into heads and the rotation (transformers'
Qwen3Attention); the norms are no products, so its products are the Llama family's, its parameters Llama's + 2 dh a
layer."""

from __future__ import annotations

from ..llama.family import SYMBOLS
from ..llama.reference import llama_like, qk_note
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from .config import PRESETS, Qwen3Config

QWEN3 = Decoder(PreNorm(GroupedQueryAttention(qk_norm=PER_HEAD), GatedMLP()), symbols=SYMBOLS)
REFERENCE = llama_like(qk_note("Qwen3"), 4)  # q_norm and k_norm beside the block's two
ARCHITECTURE = composed("qwen3", QWEN3, reference=REFERENCE, config=Qwen3Config, presets=PRESETS, label="Qwen3 family")
