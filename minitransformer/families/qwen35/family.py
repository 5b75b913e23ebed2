"""The Qwen3.5 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, Qwen35Config
from .formulas import FORMULAS
from .forward import qwen3_5
from .layout import LAYOUT
from .stages import qwen35_family, stages_of

ARCHITECTURE = Architecture(
    name="qwen3_5", model_types=Qwen35Config.model_types, config=Qwen35Config, presets=PRESETS, forward=qwen3_5,
    stage_table=stages_of, every_stage=qwen35_family(None, True), layout=LAYOUT, formulas=FORMULAS,
    label="Qwen3.5 family", float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
