"""The Qwen3-MoE family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import PRESETS, QWEN3_MOE_MODEL_TYPES, Qwen3MoeConfig
from .forward import qwen3_moe
from .stages import qwen3_moe_family, stages_of

ARCHITECTURE = Architecture(
    name="qwen3_moe",
    model_types=QWEN3_MOE_MODEL_TYPES,
    config=Qwen3MoeConfig,
    presets=PRESETS,
    forward=qwen3_moe,
    stages=stages_of,
    every_stage=qwen3_moe_family(True, True, True, True),
    weight_shapes=layout.qwen3_moe_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"qwen3_moe": "Qwen3MoeForCausalLM"},
    label="Qwen3-MoE",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=layout.ROUTED_KINDS,
)
