"""The GPT-NeoX family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, NeoXConfig
from .formulas import FORMULAS
from .forward import neox
from .layout import LAYOUT
from .stages import neox_family, stages_of

ARCHITECTURE = Architecture(
    name="neox", model_types=NeoXConfig.model_types, config=NeoXConfig, presets=PRESETS, forward=neox, stage_table=stages_of,
    every_stage=neox_family(parallel=False),  # the serial table has every op (resid_mid too)
    layout=LAYOUT, formulas=FORMULAS, label="GPT-NeoX family",
    float64_reference=reference.float64_rotary_tables, float64_note=reference.NOTE,
)  # fmt: skip
