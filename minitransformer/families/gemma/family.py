"""The Gemma family in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import reference
from .config import PRESETS, GemmaConfig
from .formulas import FORMULAS
from .forward import gemma
from .layout import LAYOUT
from .stages import gemma_family, stages_of

# gemma3 (Gemma3ForConditionalGeneration) is read as its text model, as transformers' Gemma3ForCausalLM reads a gemma3
# config.json; the whole model's checkpoint keeps it under other names, which the loader refuses by name (an
# unexpected tensor for a "gemma3 model ... read as its text model")
ARCHITECTURE = Architecture(
    name="gemma", model_types=GemmaConfig.model_types, config=GemmaConfig, presets=PRESETS, forward=gemma,
    stage_table=stages_of, every_stage=gemma_family(), layout=LAYOUT, formulas=FORMULAS,
    label="Gemma family", float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
