"""Nemotron-H in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import NEMOTRON_H_MODEL_TYPES, PRESETS, NemotronHConfig
from .forward import nemotron_h
from .stages import nemotron_h_family, stages_of

ARCHITECTURE = Architecture(
    name="nemotron_h",
    model_types=NEMOTRON_H_MODEL_TYPES,
    config=NemotronHConfig,
    presets=PRESETS,
    forward=nemotron_h,
    stages=stages_of,
    every_stage=nemotron_h_family(True),
    weight_shapes=layout.nemotron_h_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"nemotron_h": "NemotronHForCausalLM"},
    label="Nemotron-H",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=layout.ROUTED_KINDS,
    buffer_kinds=layout.BUFFER_KINDS,
)
