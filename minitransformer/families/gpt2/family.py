"""GPT-2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from .config import PRESETS, GPT2Config
from .formulas import FORMULAS
from .forward import gpt2
from .layout import LAYOUT
from .stages import GPT2, stages_of

ARCHITECTURE = Architecture(
    name="gpt2", model_types=GPT2Config.model_types, config=GPT2Config, presets=PRESETS, forward=gpt2, stage_table=stages_of,
    every_stage=GPT2, layout=LAYOUT, formulas=FORMULAS, own_tokenizer=False, heads_in_headers=False,
)  # fmt: skip
