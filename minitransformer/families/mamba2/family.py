"""Mamba-2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import MAMBA2_MODEL_TYPES, PRESETS, Mamba2Config
from .forward import mamba2
from .stages import mamba2_family, stages_of

ARCHITECTURE = Architecture(
    name="mamba2",
    model_types=MAMBA2_MODEL_TYPES,
    config=Mamba2Config,
    presets=PRESETS,
    forward=mamba2,
    stages=stages_of,
    every_stage=mamba2_family(),
    weight_shapes=layout.mamba2_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"mamba2": "Mamba2ForCausalLM"},
    label="Mamba-2",
    heads_in_headers=False,  # its heads are the mixer's (the header says them as state-space heads)
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
)
