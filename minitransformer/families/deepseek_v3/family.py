"""DeepSeek-V3 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import DEEPSEEK_MODEL_TYPES, PRESETS, DeepseekConfig
from .forward import deepseek
from .stages import deepseek_family, stages_of

ARCHITECTURE = Architecture(
    name="deepseek_v3",
    model_types=DEEPSEEK_MODEL_TYPES,
    config=DeepseekConfig,
    presets=PRESETS,
    forward=deepseek,
    stages=stages_of,
    every_stage=deepseek_family(None),
    weight_shapes=layout.deepseek_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"deepseek_v3": "DeepseekV3ForCausalLM"},
    label="DeepSeek-V3",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=layout.ROUTED_KINDS,
    buffer_kinds=layout.BUFFER_KINDS,
)
