"""The Qwen3-MoE family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, Qwen3MoeConfig
from .formulas import FORMULAS
from .forward import qwen3_moe
from .layout import LAYOUT
from .stages import qwen3_moe_family, stages_of

ARCHITECTURE = Architecture(
    name="qwen3_moe", model_types=Qwen3MoeConfig.model_types, config=Qwen3MoeConfig, presets=PRESETS, forward=qwen3_moe,
    stage_table=stages_of, every_stage=qwen3_moe_family(True, True, True, True), layout=LAYOUT, formulas=FORMULAS,
    label="Qwen3-MoE",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
