"""What the rest of the code asks of a family, in one record, `Architecture`, and the two values it is made of: the
checkpoint's `Layout` and the closed forms' interface, `Formulas`.

A family is its difference: its config mapping and presets (config.py) and its family.py, which composes parts
(families/parts/: each owns its tensors, its stages and its closed forms) into a decoder, from which its stage table,
checkpoint layout and closed forms are derived (parts/family.py: composed), and families/table.py registers it. The
engine, the ledger, count, trace, the reports, batches and float64 read a family only through these fields
(docs/adding-a-family.md).

Three words, three things: `config.family` is a family's name, `Architecture` its record, and
`engine.stages.StageTable` the table of its stages (a model's `stage_table`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Protocol

import numpy as np

from ..engine.kvcache import KVCache
from ..engine.stages import StageTable, merged
from ..engine.tape import Tape
from .config import ModelConfig


class Forward(Protocol):
    """A family's forward pass: token ids [T] (or [B, T]) -> logits [R, V], for every position or the last one only.

    `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token."""

    @property
    def embed(self) -> Any:
        """The part that starts the residual stream (its stream_shape, where it has one: a position's numbers)."""
        ...

    def __call__(
        self,
        ids: np.ndarray,
        p: SimpleNamespace,
        config: Any,
        cache: KVCache | None,
        tape: Tape,
        all_positions: bool,
        pads: np.ndarray | None = None,
        choices: dict | None = None,
    ) -> np.ndarray: ...

    def resume(
        self, x, start: int, p: SimpleNamespace, config: Any, tape: Tape, all_positions: bool, choices: dict | None,
        ids=None,
    ) -> np.ndarray:  # fmt: skip
        """The pass from block `start` on, on the stream x [T, D] it reads (activation patching's runs); `ids`, the
        positions' tokens, where a layer routes by them."""
        ...

    def readout(self, x, p: SimpleNamespace, config: Any, tape: Tape, all_positions: bool = True) -> np.ndarray:
        """The residual stream x [T, D] -> logits: the final norm and the unembedding (the logit lens reads by it)."""
        ...


# Parameter kinds a checkpoint holds as integers, tables of indices rather than weights (DeepSeek-V4's hash routing:
# each token id's experts, tid2eid [V, k]): loaded as they are, never rounded, multiplied or counted as parameters.
INDEX_KINDS = ("router_table",)
# Parameter kinds that element-wise stages read, however many axes they have (a scan's decays: Mamba's A_log [I, N],
# Kimi's KDA A_log [1, 1, H, 1]): held in float32 as norms' gains are, never kept in a 2-byte checkpoint's bytes for
# products to widen as they read them (no product reads them: NumPy would compute their exp in 2 bytes)
ELEMENTWISE_KINDS = ("ssm_channels", "linear_decay")


@dataclass(frozen=True)
class Layout:
    """Where a family's checkpoint keeps each tensor, and what kind of parameter each is."""

    prefix: str  # the base model's prefix of the checkpoint's names ("transformer.", "model.")
    layers: str  # the checkpoint's name for the list of blocks ("h", "layers")
    embedding: str  # the token embedding's tensor name ("wte.weight")
    ignored: str  # a regex of buffers checkpoints carry that the model computes itself
    shapes: Callable[[Any], dict[str, tuple[int, ...]]]  # config -> {name without the prefix: shape}, in order
    kinds: dict[str, str]  # parameter kind -> what it is, in the order a pass meets them
    # config -> its tensors with their shapes and kinds (families/parts/decoder.py), from which `shapes` and each
    # tensor's kind are read
    tensors: Callable[[Any], dict]
    # A mixture of experts: the parameter kinds of its routed experts, of which one token's pass reads k of E (the
    # rest of the model it reads whole): what `params` counts as active. Empty for a dense family.
    routed_kinds: tuple[str, ...] = ()
    # Kinds a checkpoint holds that are buffers, not parameters (DeepSeek-V3's router correction bias): loaded and
    # checked, but left out of `params`' count, as transformers' count of model.parameters() leaves them.
    buffer_kinds: tuple[str, ...] = ()
    # Other prefixes under which a checkpoint may keep the same base model (a multimodal checkpoint's text model,
    # "model.language_model."); the loader takes off the longest that a name has, `prefix` included.
    prefixes: tuple[str, ...] = ()
    # (pattern, replacement): a name (without its prefix) that a checkpoint may spell otherwise, read as ours
    renamed: tuple[tuple[str, str], ...] = ()
    ignored_pattern: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ignored_pattern", re.compile(rf"^({self.ignored})$"))

    def kind(self, name: str, config: Any) -> str | None:
        """The parameter kind of a tensor name of this config's checkpoint, or None."""
        tensor = self.tensors(config).get(name)
        return tensor.kind if tensor is not None else None


class Formulas:
    """A family's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by
    the tests to the ledger of real and shape-only runs (verbs/formulas.py sums them over layers and passes).

    Symbols (engine/stages.py): D d_model, H query heads of dh, Hkv key/value heads, F the MLP width, V the
    vocabulary, L layers, T positions computed in a pass, t positions attended, R rows of logits, B the batch."""

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
        raise NotImplementedError

    def weight_macs_per_position(self, config: Any, layer: int = 0) -> int:
        """MACs of the products with weights, per position, in a layer (its attention's projections and its MLP)."""
        raise NotImplementedError

    def weight_dot_products_per_position(self, config: Any, layer: int = 0) -> int:
        """Dot products of the products with weights, per position, in a layer."""
        raise NotImplementedError

    def parameters(self, config: Any) -> int:
        """Every parameter of the model (transformers' count of the same config)."""
        raise NotImplementedError

    def active_parameters(self, config: Any) -> int:
        """The parameters one token's pass reads: all of them in a dense model."""
        return self.parameters(config)

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
        raise NotImplementedError

    def decode_attention(self, config: Any, t: int) -> tuple[Fraction, str] | None:
        """Where a decode step's attention against its products with weights is not t / X in the first layer that
        attends (DeepSeek-V4's: a window that caps, entries that grow t / m), that layer's ratio at context t in
        closed form and the line that says it; None: the law (verbs/formulas.py's attention_to_weights)."""
        return None

    def selection_per_pair(self, config: Any, layer: int = 0) -> tuple[int, int]:
        """(MACs, dot products) a query spends in a layer on each key in reach to choose the keys it attends to (a
        sparse attention's indexer: DeepSeek-V3.2's; none in a GLM-5 layer that reads another's choice); (0, 0) where
        every query attends to every key it can see."""
        return 0, 0

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        """A family's own lines in count's report (DeepSeek-V3's latent cache), for a count of n_prompt + n_new."""
        return []

    # A hybrid's layers that keep a state instead of attending (linear attention, state-space layers): which they are,
    # and the cost of their scan over a pass of T positions, one sequence (T = 1: a decode step). Every layer attends
    # and none scans in a family of attention alone.
    def attends(self, config: Any, layer: int) -> bool:
        """Whether a layer attends to the earlier positions (False: it keeps a state, or nothing, instead)."""
        return True

    def scan_macs(self, config: Any, layer: int, T: int) -> int:
        """MACs of a layer's scan over a pass of T positions (recurrent for one position, in chunks for more)."""
        return 0

    def scan_dot_products(self, config: Any, layer: int, T: int) -> int:
        return 0

    def scan_recurrent_macs(self, config: Any, layer: int, T: int) -> int:
        """The same scan in the recurrent form, position by position (what a decode step computes): scan_macs where
        the family has no other form."""
        return self.scan_macs(config, layer, T)

    def generation_macs(
        self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
    ) -> int | None:
        """A generation's MACs where the family sums them itself (a model of state-space layers); None: the shared
        sum over the layers and passes (verbs/formulas.py)."""
        return None


@dataclass(frozen=True)
class Architecture:
    name: str  # the config's `family`, and the JSON's "family"
    model_types: tuple[str, ...]  # the config.json model_type values the family reads
    config: type[ModelConfig]  # its dataclass; config.from_hf_dict(hf, name) reads a config.json
    presets: dict[str, Any]  # name -> config of a well-known model, for counting without weights
    forward: Forward  # one named stage per line (families/*/forward.py)
    stage_table: Callable[[Any], StageTable]  # config -> its stage table
    # The table with every stage the family can have (the views' op -> kind of product); None: every stage its presets'
    # tables have (all_stages), for a family built from parts
    every_stage: StageTable | None
    layout: Layout  # where its checkpoint keeps each tensor
    formulas: Formulas  # its closed forms
    label: str = ""  # how a model's header names the family after its model_type ("Llama family"), if at all
    own_tokenizer: bool = True  # its directory's tokenizer.json (a GPT-2's: tokenizer.gpt2_tokenizer_of)
    heads_in_headers: bool = True  # `params` names the heads in its header (GPT-2's predates it)
    # validate in float64: fn(reference, model, torch) makes transformers' model compute in float64 where it
    # would not (None: nothing to do), and the note validate prints about it
    float64_reference: Callable | None = None
    float64_note: str = ""
    # Configs beyond the presets whose stages a family built from parts can also have (a dense layer, q in one product,
    # where no preset has them): all_stages merges their tables too
    variants: tuple = ()

    def all_stages(self) -> StageTable:
        """Every stage the family can have: every_stage, or the stages of its presets' and variants' tables, merged."""
        if self.every_stage is not None:
            return self.every_stage
        if self.name not in _ALL_STAGES:
            tables = [self.stage_table(config) for config in (*self.presets.values(), *self.variants)]
            first = tables[0]
            _ALL_STAGES[self.name] = StageTable(
                first.name,
                merged(t.embed for t in tables),
                merged(t.block for t in tables),
                merged(t.final for t in tables),
                first.symbols,
            )
        return _ALL_STAGES[self.name]

    @property
    def reference_classes(self) -> dict[str, str]:
        """model_type -> the transformers class validate compares with: the one its config names (config.classes; a
        multimodal checkpoint's, its text model's)."""
        config = self.config
        read_as = {t: config.multimodal.get(t, t) for t in self.model_types}
        return {t: config.classes[text] for t, text in read_as.items() if text in config.classes}


_ALL_STAGES: dict[str, StageTable] = {}  # a family built from parts: every stage of its presets' tables
