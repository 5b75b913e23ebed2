"""GPT-2 in the table of families: where the rest of the code finds each of its pieces."""

from __future__ import annotations

from ..architecture import Architecture
from . import formulas, layout
from .config import PRESETS, GPT2Config
from .forward import gpt2
from .stages import GPT2, stages_of

ARCHITECTURE = Architecture(
    name="gpt2",
    model_types=("gpt2",),
    config=GPT2Config,
    presets=PRESETS,
    forward=gpt2,
    stages=stages_of,
    every_stage=GPT2,
    weight_shapes=layout.gpt2_shapes,
    prefix=layout.PREFIX,
    layers=layout.LAYERS,
    embedding=layout.EMBEDDING,
    ignored=layout.IGNORED,
    kinds=layout.KINDS,
    kind_of=layout.KIND_OF,
    formulas=formulas,
    reference_classes={"gpt2": "GPT2LMHeadModel"},
    own_tokenizer=False,
    heads_in_headers=False,
)
