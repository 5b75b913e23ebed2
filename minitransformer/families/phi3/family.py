"""The Phi-3 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import PHI3_MODEL_TYPES, PRESETS, Phi3Config
from .forward import phi3
from .stages import phi3_family, stages_of

ARCHITECTURE = Architecture(
    name="phi3",
    model_types=PHI3_MODEL_TYPES,
    config=Phi3Config,
    presets=PRESETS,
    forward=phi3,
    stages=stages_of,
    every_stage=phi3_family(window=True, partial=True, longrope=True),
    weight_shapes=layout.phi3_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"phi3": "Phi3ForCausalLM"},
    label="Phi-3 family",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
)
