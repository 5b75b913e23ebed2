"""DeepSeek-V3 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, DeepseekConfig
from .formulas import FORMULAS
from .forward import deepseek
from .layout import LAYOUT
from .stages import deepseek_family, stages_of

ARCHITECTURE = Architecture(
    name="deepseek_v3", model_types=DeepseekConfig.model_types, config=DeepseekConfig, presets=PRESETS, forward=deepseek,
    stage_table=stages_of, every_stage=deepseek_family(None), layout=LAYOUT, formulas=FORMULAS,
    label="DeepSeek-V3",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
