"""Mixtral in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import MIXTRAL_MODEL_TYPES, PRESETS, MixtralConfig
from .forward import mixtral
from .stages import mixtral_family, stages_of

ARCHITECTURE = Architecture(
    name="mixtral",
    model_types=MIXTRAL_MODEL_TYPES,
    config=MixtralConfig,
    presets=PRESETS,
    forward=mixtral,
    stages=stages_of,
    every_stage=mixtral_family(),
    weight_shapes=layout.mixtral_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"mixtral": "MixtralForCausalLM"},
    label="Mixtral",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=layout.ROUTED_KINDS,
)
