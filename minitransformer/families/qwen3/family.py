"""The Qwen3 family in the table of families: its config, its attention and its presets, in the Llama family's
record (families/llama/family.py's llama_like)."""

from __future__ import annotations

from ..llama.family import llama_like
from .attention import QK_NORMED, Qwen3Formulas
from .config import PRESETS, Qwen3Config

NOTE = ("  (transformers' float64 Qwen3 computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)")  # fmt: skip

ARCHITECTURE = llama_like(
    "qwen3",
    Qwen3Config.model_types,
    Qwen3Config,
    PRESETS,
    QK_NORMED,
    Qwen3Formulas(),
    label="Qwen3 family",
    float64_note=NOTE,
)
