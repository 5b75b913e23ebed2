"""The Qwen3 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from functools import partial

from ..architecture import Architecture
from ..llama.reference import float64_throughout
from . import formulas, layout
from .config import PRESETS, QWEN3_MODEL_TYPES, Qwen3Config
from .forward import qwen3
from .stages import qwen3_family, stages_of

NOTE = ("  (transformers' float64 Qwen3 computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)")  # fmt: skip

ARCHITECTURE = Architecture(
    name="qwen3",
    model_types=QWEN3_MODEL_TYPES,
    config=Qwen3Config,
    presets=PRESETS,
    forward=qwen3,
    stages=stages_of,
    every_stage=qwen3_family(True, True, True),
    weight_shapes=layout.qwen3_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"qwen3": "Qwen3ForCausalLM"},
    label="Qwen3 family",
    float64_reference=partial(float64_throughout, norms_per_layer=4),  # ln_1, ln_2, q_norm, k_norm
    float64_note=NOTE,
)
