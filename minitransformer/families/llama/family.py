"""The Llama family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout, reference
from .config import LLAMA_MODEL_TYPES, PRESETS, LlamaConfig
from .forward import llama
from .stages import llama_family, stages_of

ARCHITECTURE = Architecture(
    name="llama",
    model_types=LLAMA_MODEL_TYPES,
    config=LlamaConfig,
    presets=PRESETS,
    forward=llama,
    stages=stages_of,
    every_stage=llama_family(),
    weight_shapes=layout.llama_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"},
    label="Llama family",
    float64_reference=reference.float64_throughout,
    float64_note=reference.NOTE,
)
