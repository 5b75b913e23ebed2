"""Mamba-2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, Mamba2Config
from .formulas import FORMULAS
from .forward import mamba2
from .layout import LAYOUT
from .stages import mamba2_family, stages_of

ARCHITECTURE = Architecture(
    name="mamba2", model_types=Mamba2Config.model_types, config=Mamba2Config, presets=PRESETS, forward=mamba2,
    stage_table=stages_of, every_stage=mamba2_family(), layout=LAYOUT, formulas=FORMULAS,
    label="Mamba-2",
    heads_in_headers=False,  # its heads are the mixer's (the header says them as state-space heads)
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
