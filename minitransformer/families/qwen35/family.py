"""The Qwen3.5 family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, QWEN35_MODEL_TYPES, Qwen35Config
from .formulas import FORMULAS
from .forward import qwen3_5
from .layout import LAYOUT
from .stages import qwen35_family, stages_of

ARCHITECTURE = Architecture(
    name="qwen3_5", model_types=QWEN35_MODEL_TYPES, config=Qwen35Config, presets=PRESETS, forward=qwen3_5,
    stage_table=stages_of, every_stage=qwen35_family(None, True), layout=LAYOUT, formulas=FORMULAS,
    # the multimodal checkpoints (qwen3_5, qwen3_5_moe) are read as their text model, as AutoModelForCausalLM reads them
    reference_classes={"qwen3_5_text": "Qwen3_5ForCausalLM", "qwen3_5": "Qwen3_5ForCausalLM",
                       "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM"},
    label="Qwen3.5 family", float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
