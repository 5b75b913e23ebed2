"""The OLMo 2 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from functools import partial

from ..architecture import Architecture
from ..llama.reference import float64_throughout
from .config import PRESETS, Olmo2Config
from .formulas import FORMULAS
from .forward import olmo2
from .layout import LAYOUT
from .stages import olmo2_family, stages_of

NOTE = ("  (transformers' float64 OLMo 2 computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)")  # fmt: skip

ARCHITECTURE = Architecture(
    name="olmo2", model_types=Olmo2Config.model_types, config=Olmo2Config, presets=PRESETS, forward=olmo2,
    stage_table=stages_of, every_stage=olmo2_family(True), layout=LAYOUT, formulas=FORMULAS,
    label="OLMo 2 family", float64_note=NOTE,
    float64_reference=partial(float64_throughout, norms_per_layer=4),  # q_norm, k_norm, and after each branch
)  # fmt: skip
