"""Mixtral in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, MixtralConfig
from .formulas import FORMULAS
from .forward import mixtral
from .layout import LAYOUT
from .stages import mixtral_family, stages_of

ARCHITECTURE = Architecture(
    name="mixtral", model_types=MixtralConfig.model_types, config=MixtralConfig, presets=PRESETS, forward=mixtral,
    stage_table=stages_of, every_stage=mixtral_family(), layout=LAYOUT, formulas=FORMULAS,
    label="Mixtral",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
