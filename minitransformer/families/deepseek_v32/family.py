"""DeepSeek-V3.2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from ..deepseek_v3 import layout as v3_layout
from . import formulas, layout, reference
from .config import DEEPSEEK_V32_MODEL_TYPES, PRESETS, DeepseekV32Config
from .forward import deepseek_v32
from .stages import deepseek_v32_family, stages_of

ARCHITECTURE = Architecture(
    name="deepseek_v32",
    model_types=DEEPSEEK_V32_MODEL_TYPES,
    config=DeepseekV32Config,
    presets=PRESETS,
    forward=deepseek_v32,
    stages=stages_of,
    every_stage=deepseek_v32_family(),
    weight_shapes=layout.deepseek_v32_shapes,
    prefix=v3_layout.PREFIX,
    layers=v3_layout.LAYERS,
    embedding=v3_layout.EMBEDDING,
    ignored=v3_layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"deepseek_v32": "DeepseekV32ForCausalLM"},
    label="DeepSeek-V3.2",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=v3_layout.ROUTED_KINDS,
    buffer_kinds=v3_layout.BUFFER_KINDS,
)
