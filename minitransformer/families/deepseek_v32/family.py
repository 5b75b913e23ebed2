"""DeepSeek-V3.2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, DeepseekV32Config
from .formulas import FORMULAS
from .forward import deepseek_v32
from .layout import LAYOUT
from .stages import deepseek_v32_family, stages_of

ARCHITECTURE = Architecture(
    name="deepseek_v32", model_types=DeepseekV32Config.model_types, config=DeepseekV32Config, presets=PRESETS,
    forward=deepseek_v32, stage_table=stages_of, every_stage=deepseek_v32_family(), layout=LAYOUT, formulas=FORMULAS,
    label="DeepSeek-V3.2",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
