"""Nemotron-H in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, NemotronHConfig
from .formulas import FORMULAS
from .forward import nemotron_h
from .layout import LAYOUT
from .stages import nemotron_h_family, stages_of

ARCHITECTURE = Architecture(
    name="nemotron_h", model_types=NemotronHConfig.model_types, config=NemotronHConfig, presets=PRESETS,
    forward=nemotron_h, stage_table=stages_of, every_stage=nemotron_h_family(True), layout=LAYOUT, formulas=FORMULAS,
    label="Nemotron-H",
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
