"""What the rest of the code asks of a family, in one record: `Architecture`.

A family is its difference: its forward pass (forward.py), its config mapping and presets (config.py), its
stage table (stages.py), where its checkpoint keeps each tensor (layout.py) and its closed forms (formulas.py).
Its family.py gathers them here, and families/table.py registers it. The engine, the ledger, count, trace,
the reports, batches and float64 read a family only through these fields (docs/adding-a-family.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..engine.stages import Family
from .config import ModelConfig


@dataclass(frozen=True)
class Architecture:
    name: str  # the config's `family`, and the JSON's "family"
    model_types: tuple[str, ...]  # the config.json model_type values the family reads
    config: type[ModelConfig]  # its dataclass; config.from_hf_dict(hf, name) reads a config.json
    presets: dict  # name -> config of a well-known model, for counting without weights
    # forward(ids, params, config, cache, tape, all_positions, pads) -> logits: one named stage per line
    forward: Callable
    stages: Callable[[Any], Family]  # config -> its stage table
    every_stage: Family  # the table with every stage the family can have (the views' op -> group)
    weight_shapes: Callable[[Any], dict]  # config -> {tensor name without the prefix: shape}, in order
    prefix: str  # the base model's prefix of the checkpoint's names ("transformer.", "model.")
    layers: str  # the checkpoint's name for the list of blocks ("h", "layers")
    embedding: str  # the token embedding's tensor name ("wte.weight")
    ignored: str  # a regex of buffers checkpoints carry that the model computes itself
    kinds: dict[str, str]  # parameter kind -> what it is, in the order a pass meets them
    kind_of: tuple  # (compiled regex, kind) for each tensor name
    formulas: ModuleType  # closed forms: products, weight_macs_per_position, weight_dot_products_per_position,
    #                       parameters, attention_vs_weights (families/gpt2/formulas.py says what each is)
    reference_classes: dict[str, str]  # model_type -> the transformers class validate compares with
    label: str = ""  # how a model's header names the family after its model_type ("Llama family"), if at all
    own_tokenizer: bool = True  # reads the model directory's tokenizer.json (GPT-2s share the shipped one)
    heads_in_headers: bool = True  # `params` names the heads in its header (GPT-2's predates it)
    # validate in float64: fn(reference, model, torch) makes transformers' model compute in float64 where it
    # would not (None: nothing to do), and the note validate prints about it
    float64_reference: Callable | None = None
    float64_note: str = ""
    # A mixture of experts: the parameter kinds of its routed experts, of which one token's pass reads k of E (the
    # rest of the model it reads whole): what `params` counts as active. Empty for a dense family.
    routed_kinds: tuple[str, ...] = ()
    # Kinds a checkpoint holds that are buffers, not parameters (DeepSeek-V3's router correction bias): loaded and
    # checked, but left out of `params`' count, as transformers' count of model.parameters() leaves them.
    buffer_kinds: tuple[str, ...] = ()
    # Other prefixes under which a checkpoint may keep the same base model (a multimodal checkpoint's text model,
    # "model.language_model."); the loader takes off the longest that a name has, `prefix` included.
    prefixes: tuple[str, ...] = ()
    ignored_pattern: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ignored_pattern", re.compile(rf"^({self.ignored})$"))

    def kind(self, name: str) -> str | None:
        """The parameter kind of a tensor name of this family's checkpoint, or None."""
        return next((kind for pattern, kind in self.kind_of if pattern.match(name)), None)
