"""gpt-oss in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import GPT_OSS_MODEL_TYPES, PRESETS, GptOssConfig
from .forward import gpt_oss
from .stages import gpt_oss_family, stages_of

ARCHITECTURE = Architecture(
    name="gpt_oss",
    model_types=GPT_OSS_MODEL_TYPES,
    config=GptOssConfig,
    presets=PRESETS,
    forward=gpt_oss,
    stages=stages_of,
    every_stage=gpt_oss_family(),
    weight_shapes=layout.gpt_oss_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"gpt_oss": "GptOssForCausalLM"},
    label="gpt-oss",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
    routed_kinds=layout.ROUTED_KINDS,
)
