"""gpt-oss in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, GptOssConfig
from .formulas import FORMULAS
from .forward import gpt_oss
from .layout import LAYOUT
from .stages import gpt_oss_family, stages_of

ARCHITECTURE = Architecture(
    name="gpt_oss", model_types=GptOssConfig.model_types, config=GptOssConfig, presets=PRESETS, forward=gpt_oss,
    stage_table=stages_of, every_stage=gpt_oss_family(), layout=LAYOUT, formulas=FORMULAS,
    label="gpt-oss",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
