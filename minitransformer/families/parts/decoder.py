"""The decoder around the blocks, one for every family: embed the tokens, run each layer's block on its own tape with
what its layer needs (its cache's handle, the mask of its window, the rotary tables of its rope), the final norm, the
logits. A family hands it its block and says where its checkpoint keeps the rest; a `Decoder` is its forward pass.

Everything else the code asks of a family's model is derived from the decoder's parts, so that no fact of a part is
written twice:
- its stage table (`stage_table`): the stages a dry run meets, on shape-only weights of one layer of each kind, a
  padded batch's prompt past every chunk and then a decode step, in one order (engine.stages.merged);
- its checkpoint's tensors with their shapes and kinds (`tensors`): the embedding's, each layer's block's under the
  layer's name, the final norm's, the unembedding's where it is not the embedding;
- its closed forms (`products`): each layer's block's, and the logits.

Each layer's tape carries its window (tape.layer(i)), and the decoder makes each window's mask (for the layers that
attend: those that keep keys and values, config.layer_cache(i)) and each rope's tables (config.rope(i)) once a pass.
Counting without weights (shape-only stand-ins) makes no masks and tables of the right shape, no values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.kvcache import KeysValues, KVCache
from ...engine.ledger import Phase
from ...engine.ops import attention_bias, constant, slot_positions
from ...engine.shapes import ShapeOnly
from ...engine.stages import LAST, LOGITS, Stage, StageTable, by_op, merged
from ...engine.tape import Dims, Tape
from ...errors import UserError
from .. import rotary
from ..rotary import Rope
from .blocks import LayerInputs, under
from .norms import RMSNorm
from .part import Part, Products, Tensor, Tensors


@dataclass(frozen=True)
class TokenEmbedding(Part):
    """x = W_te[ids], a lookup: positions enter later, by rotating q and k. `module`: where the checkpoint keeps it;
    `equation`: how the stage says it; `description`: what params calls it; `multiplier`: the config's field the
    embeddings are multiplied by (µP's embedding_multiplier: Falcon-H1's, Granite's). An embedding part reads the
    whole tree (GPT-2's reads its position table too)."""

    module: str = "embed_tokens"
    equation: str = "x = W_te[ids]  (positions enter later, by rotating q and k)"
    description: str = "token embedding W_te [V, D]"
    multiplier: str = ""

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {"token_embedding": self.description}

    def stages(self, config: Any) -> dict[str, Stage]:
        scaled = Stage("embed_scale", ("embed_scale",), "scale", f"x = {self.multiplier} x", "x [T, D]")
        return by_op(
            Stage("embed", ("embed",), "lookup", self.equation, "ids [T]"), *((scaled,) if self.multiplier else ())
        )

    def __call__(self, ids, p: SimpleNamespace, config: Any, tape: Tape, pads=None):
        tape = tape.declaring(self.declared(config))
        x = tape.stage("embed", getattr(p, self.module).weight[ids], "T D")
        if not self.multiplier:
            return x
        return tape.stage("embed_scale", np.multiply(x, constant(x, getattr(config, self.multiplier))), "T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {f"{self.module}.weight": Tensor((config.vocab_size, config.n_embd), "token_embedding")}


@dataclass(frozen=True)
class LogitsScale:
    """A decoder's step after the logits (`after_logits`): the logits times the config's `field` (Falcon-H1's
    lm_head_multiplier), or divided by it (`divide`: Granite's logits_scaling, as transformers divides)."""

    field: str
    divide: bool = False

    def __call__(self, logits, config: Any, tape: Tape):
        scale = constant(logits, getattr(config, self.field))
        equation = f"logits = logits / {self.field}" if self.divide else f"logits = {self.field} logits"
        stage = Stage("logits_scale", ("final_scale",), "scale", equation, "logits [R, V]")
        return tape.stage(stage, np.divide(logits, scale) if self.divide else np.multiply(logits, scale), "R V")


NORM_KINDS = ("norms", "layer_norms", "qk_norms")  # the kinds params lists after the biases, in the order met


@dataclass(frozen=True, eq=False)  # a model's decoder is itself: compared and hashed by identity
class Decoder(Part):
    """A decoder-only model: the embedding, then `block` on each layer, the final norm `norm`, the logits h W_U^T
    (W_U the token embedding when the config ties them), and `after_logits` where the family has a step there
    (Gemma's soft-cap). The names are the checkpoint's, without its `prefix`; `ignored`, a regex of buffers
    checkpoints carry that the model computes itself; `prefixes`, other prefixes under which a checkpoint may keep the
    same base model (a multimodal checkpoint's text model); `renamed`, names a checkpoint may spell otherwise."""

    block: Any
    norm: Any = RMSNorm()
    embed: Any = TokenEmbedding()
    embedding: str = "embed_tokens"  # the token embedding's module (tied: the unembedding too), the embed part's
    layers: str = "layers"
    final_norm: str = "norm"
    unembedding: str = "lm_head"  # untied
    prefix: str = "model."
    ignored: str = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq"  # the rotary frequencies older checkpoints carry
    prefixes: tuple[str, ...] = ()
    # (pattern, replacement): names a checkpoint may spell otherwise than transformers' save_pretrained writes them,
    # read as ours (re.sub on each name without its prefix); Kimi Linear's published dense MLP, mlp. for
    # block_sparse_moe.
    renamed: tuple[tuple[str, str], ...] = ()
    biases: str = "biases of the linear layers that have them"  # how params describes the biases' kind ("": none)
    untied: str = "unembedding W_U [V, D] (untied)"  # how params describes an untied unembedding
    after_logits: Callable[[Any, Any, Tape], Any] | None = None
    # the config field that says the logits have a bias b_U [V] (ERNIE 4.5 MoE's use_bias: lm_head.bias, there even
    # where the weights are tied); None: none
    logits_bias: str | None = None
    symbols: str = field(default="", compare=False)  # the dimension symbols its shapes use, for traces
    # The kinds of layer (config.layer_types) whose stages come first where kinds have different stages in one place
    # (a dense MLP's before the experts', a Gated DeltaNet's before the attention's): the dry run meets their layers
    # first (derived_table)
    kind_order: tuple[str, ...] = ()
    # The config whose dry run gives a config's stage table (None: the config itself; Nemotron-H's table lists every
    # kind's stages, whatever its pattern), and whether the dry run's decode step is merged before its prompt (a
    # scan's recurrent form then listed after its chunked form: Mamba-2's table)
    dry_run: Callable[[Any], Any] | None = None
    decode_first: bool = False
    # A part on the stream between the last block and the final norm, its tensors at the model's top under its
    # `module` (DeepSeek-V4's hyper-connections' head, which mixes its streams back into one); None: none
    head: Any = None
    # Its multi-token-prediction layers (families/parts/mtp.py), which draft beside the main pass where asked; not
    # among its tensors or its parameters (transformers' model has none of them); None: the family has none
    mtp: Any = None
    # A part computed once a pass from the ids and the embedding, whose output every layer reads (Gemma 4's per-layer
    # inputs: parts/per_layer.py), left for them in LayerInputs.choices under its `key`, its tensors at the model's
    # top; None: none
    per_layer: Any = None

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
    ) -> np.ndarray:
        """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only.

        `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token; each row's
        positions start at its first real token, and pad keys are masked (ops.attention_bias). `choices`: the dict
        the layers leave their choices in for later ones (LayerInputs.choices), to keep it past the pass."""
        # the embedding passed on, not kept here: blocks lets it go after the first block (the activation peak)
        choices = {} if choices is None else choices
        x = self.blocks(
            self.embedded(ids, p, config, tape, pads, choices), p, config, cache, tape, pads, choices=choices, ids=ids
        )
        logits = self.readout(x, p, config, tape, all_positions)
        if cache is not None:  # the pass is done: a stop in the readout leaves the positions unwritten
            cache.advance(tape.dims.T)
        return logits

    def embedded(self, ids, p: SimpleNamespace, config: Any, tape: Tape, pads, choices: dict):
        """The embedding of the ids, and where the decoder has a per-layer part, its output left in `choices` for the
        layers (Gemma 4's per-layer inputs, made from the ids and the embedding)."""
        x = self.embed(ids, p, config, tape, pads)
        if self.per_layer is not None:
            choices[self.per_layer.key] = self.per_layer(ids, x, p, config, tape)
            x = self.per_layer.stream(x, config, tape)
        return x

    def resume(
        self, x, start: int, p: SimpleNamespace, config: Any, tape: Tape, all_positions: bool, choices: dict | None,
        ids=None,
    ) -> np.ndarray:  # fmt: skip
        """The pass from block `start` on, no cache: x [T, D] (or [B, T, D]) the stream block `start` reads -> logits
        [R, V]. The blocks before `start` are not run: activation patching's runs begin at the layer they patch, on
        the stream an earlier pass kept, with `choices` that pass's (the choices of layers before `start`), copied: the
        layers from `start` on leave theirs in the copy, so that the next run from a later block reads that pass's."""
        resumed = EarlierChoices(choices or {}, start)
        x = self.blocks(x, p, config, None, tape, None, start, resumed, ids)  # ids: where a layer routes by them
        return self.readout(x, p, config, tape, all_positions)

    def blocks(self, x, p: SimpleNamespace, config: Any, cache: KVCache | None, tape: Tape, pads, start: int = 0,
               choices: dict | None = None, ids=None):  # fmt: skip
        """The stream block `start` reads -> the stream the final norm reads: each block from `start` on, with what
        its layer needs (its cache's handle, its window's mask, its rope's tables, the choices of earlier layers)."""
        d = tape.dims
        shape_only = isinstance(x, ShapeOnly)
        tables: dict[Rope, tuple] = {}  # each rope's cos and sin, made once a pass
        masks: dict[tuple, np.ndarray | None] = {}  # each window's (and chunk's) attention bias, for every head
        choices = {} if choices is None else choices  # what a layer leaves for later ones this pass
        layers = getattr(p, self.layers)
        for i in range(start, len(layers)):
            at = tape.layer(i)  # its dims carry its window
            e, rope = at.dims, config.rope(i)
            if rope is not None and rope not in tables:
                tables[rope] = rotary_tables(rope, d, x, pads)
            attends = isinstance(config.layer_cache(i), KeysValues)  # a hybrid's recurrent layers read no mask
            window, chunk = e.window, config.layer_chunk(i)  # a chunked layer's mask cuts each row's chunks
            if attends and (window, chunk) not in masks:
                masks[window, chunk] = (
                    None if shape_only else attention_bias(e.past, e.start, e.T, e.t, window, x.dtype, pads, chunk)
                )
            kv = cache.layer(i) if cache is not None else None
            rotary = () if rope is None else tables[rope]
            inputs = LayerInputs(kv, masks[window, chunk] if attends else None, rotary, pads, choices, ids)
            x = self.block(x, layers[i], config, at, inputs)
        return x

    def readout(self, x, p: SimpleNamespace, config: Any, tape: Tape, all_positions: bool = True):
        """The residual stream x [T, D] (any batch axes in front; DeepSeek-V4's streams before its head) -> logits
        [R, V]: the head where there is one, the final norm, the last position where not all_positions, the
        unembedding (and what follows it). The logit lens reads each layer's stream through it."""
        if self.head is not None:
            x = self.head(x, getattr(p, self.head.module), config, tape)
        tape = tape.declaring(self.declared(config))
        h = tape.stage("ln_f", self.norm(x, getattr(p, self.final_norm), config), "T D")
        if not all_positions:
            h = tape.stage("last", h[..., -1:, :], "R D")
        unembedding = getattr(p, self.embedding if config.tie_word_embeddings else self.unembedding).weight
        bias = getattr(p, self.unembedding).bias if self.biased(config) else None
        logits = tape.matmul("logits", h, unembedding.T, "R D, D V -> R V", bias=bias)  # .T is a view: no copy of W_U
        return logits if self.after_logits is None else self.after_logits(logits, config, tape)

    def stages(self, config: Any) -> dict[str, Stage]:
        """Its stages after the blocks: the final norm, the last position, the logits."""
        ln_f = Stage("ln_f", ("ln_f",), "norm", f"h = {self.norm.label}_f(x){self.norm.note}", "x [T, D]")
        logits = (
            replace(LOGITS, equation=LOGITS.equation.replace("W_U^T", "W_U^T + b_U")) if self.biased(config) else LOGITS
        )
        return by_op(ln_f, LAST, logits)

    def steps_after_logits(self, config: Any) -> bool:
        """Whether a config's logits pass a step after the unembedding (a scale, a soft-cap): `after_logits`, unless it
        says it does not apply to that config (its `applies`: Gemma 3's caps nothing)."""
        applies = getattr(self.after_logits, "applies", None)
        return self.after_logits is not None and (applies is None or applies(config))

    def biased(self, config: Any) -> bool:
        """Whether the logits have a bias in a config (logits_bias)."""
        return self.logits_bias is not None and bool(getattr(config, self.logits_bias))

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        """Every kind of parameter, in the order a pass meets them, but the biases and norms after the rest."""
        block = self.block.kinds | (self.head.kinds if self.head is not None else {})
        block = (self.per_layer.kinds if self.per_layer is not None else {}) | block
        norms = {k: v for k, v in {**block, **self.norm.kinds}.items() if k in NORM_KINDS}
        rest = {k: v for k, v in block.items() if k not in norms}
        return {
            **self.embed.kinds,
            **rest,
            **({"biases": self.biases} if self.biases else {}),
            **norms,
            "unembedding": self.untied,
        }

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """The whole checkpoint, by name without the prefix, in the order it holds them."""
        tensors = self.embed.tensors(config)
        if self.per_layer is not None:
            tensors |= self.per_layer.tensors(config)
        for i in range(config.n_layer):
            tensors |= under(f"{self.layers}.{i}", self.block.tensors(config, i))
        if self.head is not None:
            tensors |= under(self.head.module, self.head.tensors(config))
        tensors |= under(self.final_norm, self.norm.tensors(config))
        if not config.tie_word_embeddings:
            tensors[f"{self.unembedding}.weight"] = Tensor((config.vocab_size, config.n_embd), "unembedding")
        if self.biased(config):
            tensors[f"{self.unembedding}.bias"] = Tensor((config.vocab_size,), "biases")
        return tensors

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0, R: int = 1) -> Products:
        """A layer's products and the logits', (dot products, their length) each."""
        return self.block.products(config, T, t, B, layer) | {"logits": (B * R * config.vocab_size, config.n_embd)}

    def stage_table(self, name: str, config: Any) -> StageTable:
        """The stages this decoder's forward pass meets for a config, in order: derived once for all the configs
        whose dry run is the same (a model and every prefix of it that holds each kind of its layers: a count's twins
        and cuts; DeepSeek-V4-Pro's dry run takes a second)."""
        dry = dry_run_config(self, config)
        key = (id(self), name, dry)
        if key not in _TABLES:
            _TABLES[key] = derived_table(self, name, dry)
        return _TABLES[key]


class EarlierChoices(dict):
    """A resumed pass's copy of what the pass its stream came from left for later layers (Gemma 4's per-layer inputs,
    a layer's keys and values that later ones share, an indexer's choice that later layers reuse): one that was not
    given is refused in words, not as a KeyError from inside a block."""

    def __init__(self, given: Mapping, start: int):
        super().__init__(given)
        self.start = start

    def __missing__(self, key):
        what = (
            f"layer {key}'s choice of keys" if isinstance(key, int)  # an indexer's, by its layer (parts/indexer.py)
            else f"layer {key[-1]}'s {key[0]}" if isinstance(key, tuple)  # (op, layer): parts/shared_kv.py
            else str(key)  # the decoder's per-layer part's key
        )  # fmt: skip
        raise UserError(
            f"the pass from block {self.start} reads {what}, left by an earlier block or the embedding, which a "
            f"stream does not carry: give run_from(..., choices=choices), filled by the pass the stream came from "
            f"(run_with_cache(ids, names, choices=choices))"
        )


def rotary_tables(rope: Rope, d: Dims, x, pads) -> tuple:
    """cos and sin of this pass's positions at the rope's frequencies ([T, r], or [B, 1, T, r] with pads: one for
    every head), r the numbers of a head it turns; shape-only stand-ins when counting."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly((d.T, rope.turned)), ShapeOnly((d.T, rope.turned))
    at = slot_positions(d.past, d.T, pads)  # [T], or [B, T]: each row's count starts at its first real token
    return rotary.tables(rope, at if pads is None else at[:, None], x.dtype)


# The dry run that finds a family's stages: a prompt long enough to run every scan in chunks (two of the longest
# chunk any family has, and more) and past the keys an indexer chooses (config.index_topk), then a decode step, on a
# batch of two rows, the first left-padded.
DRY_RUN_PROMPT = 2 * 256 + 3


_TABLES: dict = {}  # (decoder, family, config) -> its stage table


def dry_run_prompt(config: Any) -> int:
    """The dry run's prompt: past every chunk, and past the keys an indexer chooses (it chooses among more keys than it
    keeps)."""
    return max(DRY_RUN_PROMPT, (config.index_topk or 0) + 1)


def dry_run_config(decoder: Decoder, config: Any) -> Any:
    """The config a dry run runs for `config`: the decoder's own for it (Decoder.dry_run), cut to its fewest first
    layers that hold one layer of each kind, with room for the dry run's positions (the stages of any context)."""
    config = config if decoder.dry_run is None else decoder.dry_run(config)
    return replace(config.prefix(config.layers_holding_each_kind),
                   n_positions=max(config.n_positions, dry_run_prompt(config) + 1))  # fmt: skip


def derived_table(decoder: Decoder, name: str, c: Any) -> StageTable:
    """The stages a dry run of `decoder` meets on shape-only weights of the config `c` (dry_run_config's: one layer
    of each kind): a padded batch's prompt past every chunk, then a decode step; in one order (engine.stages.merged):
    each kind's stages of both passes where its equations put them, then the kinds' as alternatives in one place,
    those of the kinds decoder.kind_order names first."""
    kinds = c.layer_types
    span = c.n_layer
    T = dry_run_prompt(c)
    order = decoder.kind_order
    first = sorted(range(span), key=lambda i: order.index(kinds[i]) if kinds[i] in order else len(order))
    params = shape_only_tree(decoder, c)
    cache = KVCache(capacity=T + 1, batch=(2,), shape_only=True, layers=tuple(c.layer_cache(i) for i in range(span)))
    pads = np.array([1, 0])
    passes: list[dict[int, list]] = []  # the stages of each pass's layers, each layer's a run
    embed: list = []  # the stages before the blocks, and after them
    final: list = []
    for T_pass, past in ((T, 0), (1, T)):
        phase = Phase("dry run", 0, T_pass, past + T_pass)
        dims = Dims.of(c, T_pass, past, R=1, batch=(2,))
        windows = tuple(c.layer_window(i) for i in range(span))
        tape = Tape(dims, phase, windows=None if set(windows) <= {c.sliding_window} else windows)
        ids = np.zeros((2, T_pass), dtype=np.int64)
        decoder(ids, params, c, cache, tape, all_positions=False, pads=pads)
        layers: dict[int, list] = {}
        for record in phase.records:
            if record.layer is None:
                (final if layers else embed).append(record.stage)
            else:
                layers.setdefault(record.layer, []).append(record.stage)
        passes.append(layers)
    if decoder.decode_first:
        passes.reverse()
    by_kind = {
        kinds[i]: merged([p[j] for p in passes for j in first if kinds[j] == kinds[i]], alternatives=False)
        for i in first
    }
    kind_ops = tuple((kind, frozenset(s.op for s in stages)) for kind, stages in by_kind.items())
    return StageTable(name, merged([embed]), merged(by_kind.values()), merged([final]), decoder.symbols, kind_ops)


def shape_only_tree(decoder: Decoder, config: Any) -> SimpleNamespace:
    """Shape-only stand-ins of every tensor of a config's checkpoint, as a tree that mirrors it."""
    stand_ins = {name: ShapeOnly(tensor.shape) for name, tensor in decoder.tensors(config).items()}
    return tree_of(stand_ins, decoder.layers, config.n_layer)


def tree_of(flat: Mapping[str, object], layers: str, n_layer: int) -> SimpleNamespace:
    """{"h.0.attn.c_attn.weight": w, ...} -> tree.h[0].attn.c_attn.weight, mirroring the checkpoint, its blocks a list
    under `layers` (`h` in a GPT-2, `layers` in a Llama)."""
    root: dict = {layers: [{} for _ in range(n_layer)]}
    for name, value in flat.items():
        parts = name.split(".")
        node = root[layers][int(parts[1])] if parts[0] == layers else root
        for part in parts[2 if parts[0] == layers else 0 : -1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def build(node):
        if isinstance(node, dict):
            return SimpleNamespace(**{k: build(v) for k, v in node.items()})
        if isinstance(node, list):
            return [build(v) for v in node]
        return node

    return build(root)
