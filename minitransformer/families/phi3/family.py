"""The Phi-3 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from ..llama.reference import float64_throughout
from .config import PRESETS, Phi3Config
from .formulas import FORMULAS
from .forward import phi3
from .layout import LAYOUT
from .stages import phi3_family, stages_of

# validate's float64 truth: the Llama family's (families/llama/reference.py), at Phi-3's frequencies (the first rd
# numbers of each head; LongRoPE's short or long factors, picked per call by the largest position).
NOTE = ("  (transformers' float64 Phi-3 computes RMSNorm and the rotary tables in float32; its reference here\n"
        "  has them in float64, as families/llama/reference.py explains)")  # fmt: skip

ARCHITECTURE = Architecture(
    name="phi3", model_types=Phi3Config.model_types, config=Phi3Config, presets=PRESETS, forward=phi3,
    stage_table=stages_of, every_stage=phi3_family(window=True, partial=True, longrope=True), layout=LAYOUT,
    formulas=FORMULAS, label="Phi-3 family",
    float64_reference=float64_throughout, float64_note=NOTE,
)  # fmt: skip
