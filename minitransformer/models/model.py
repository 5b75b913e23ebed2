"""A model: its config, its weights (or shape-only stand-ins), its tokenizer, and one forward pass per call.

The forward pass itself is the family's (families/*/forward.py), one named stage per line. This
module runs it through a tape (tape.py) that checks shapes, keeps the ledger and shows each stage
to hooks and captures, none of which needs to know which family ran.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from types import SimpleNamespace

import numpy as np

from ..engine.allocator import keep_freed_memory
from ..engine.hooks import ActivationCache, HookHandle, HookRegistry, breakpoint_hook, selector
from ..engine.kvcache import KVCache
from ..engine.ledger import Phase
from ..engine.lens_names import Alias, lens_aliases
from ..engine.precision import Precision
from ..engine.shapes import ShapeOnly
from ..engine.tape import Dims, Tape, Watcher
from ..errors import UserError
from ..families.config import ModelConfig
from ..families.table import architecture_of
from .ids import as_token_ids, is_whole
from .options import RunOptions, switch
from .weights import as_tree, expected_shapes, held_formats, token_embedding

# What model.generate(...) runs: verbs/generate.py's generate, which registers itself at its import (the package's
# __init__ imports it, so it is always set). A model offers the convenience without importing the verbs above it.
_generate: Callable | None = None


def register_generate(generate: Callable) -> None:
    """Called by verbs/generate.py at its import: `generate(model, prompt, **options)` is what model.generate runs."""
    global _generate
    _generate = generate


class Model:
    """A model of a supported family with its weights (or shape-only stand-ins) and its tokenizer.

    `dtype` is the weights' dtype, which every stage of a forward pass, its KV cache and its logits keep:
    float32, or float64 for the reference (load_model(..., dtype="float64") upcasts the weights on load).
    `precision` (engine/precision.py): bfloat16, float16 or fp8 emulated over the float32 passes, or weights kept
    in their 2-byte format widened as products read them; None: neither.
    """

    def __init__(
        self,
        config: ModelConfig,
        params: SimpleNamespace,
        source: str,
        tokenizer=None,
        precision: Precision | None = None,
    ) -> None:
        self.config = config
        self.params = params
        self.source = source  # where the weights came from, for headers
        self.architecture = architecture_of(config)  # its forward pass, weight layout, closed forms (families/)
        self.stage_table = self.architecture.stage_table(config)  # names, equations (families/*/stages.py)
        self.shape_only = isinstance(token_embedding(params, config), ShapeOnly)
        if not self.shape_only:
            keep_freed_memory()  # a pass's large arrays reused, not returned to the kernel (engine/allocator.py)
        embedding = token_embedding(params, config).dtype  # shape-only stand-ins are float32
        self.dtype = np.dtype(embedding if embedding in (np.float32, np.float64) else np.float32)
        self.precision = precision
        # The formats narrower than the passes' float32 its weights are held in: {"weights": the matrices',
        # "embedding": the token embedding's where it differs (fp8)}; {} for float32 and float64
        self.held_formats = {} if self.shape_only else held_formats(params, config)
        self.weight_events: list = []  # weights that left the precision's range when rounded to it at load
        windows = tuple(config.layer_window(i) for i in range(config.n_layer))
        self._windows = None if set(windows) <= {config.sliding_window} else windows  # layers that differ
        chunks = tuple(config.layer_chunk(i) for i in range(config.n_layer))
        self._chunks = None if set(chunks) == {None} else chunks  # the layers of chunked attention
        self.hooks = HookRegistry(  # add_hook, break_at (hooks.py), by our names or TransformerLens's
            lambda: self.stage_names, lambda: self.lens_aliases
        )
        self._tokenizer = tokenizer

    def __repr__(self) -> str:
        c = self.config
        kv = f" ({c.n_kv_head} key/value heads)" if c.n_kv_head != c.n_head else ""
        return (
            f"Model({c.name!r}: {c.family}, {c.n_layer} layers, d_model {c.n_embd}, {c.n_head} heads{kv}, "
            f"{self.dtype}, from {self.source})"
        )

    @classmethod
    def without_weights(cls, config: ModelConfig) -> Model:
        """The same model with shape-only stand-ins for weights: counts everything, computes nothing (a mixture of
        experts' tokens per expert are then assumed, as each pass's RunOptions.routing says)."""
        if not isinstance(config, ModelConfig):
            raise UserError(f"without_weights takes a model's config (model.config, PRESETS[name]), not {config!r:.60}")
        stand_ins = {name: ShapeOnly(shape) for name, shape in expected_shapes(config).items()}
        return cls(config, as_tree(stand_ins, config), source="shape-only")

    @cached_property
    def stage_names(self) -> list[str]:
        """Every capture name of this model, each block's own (a hybrid's attention layers name no scan's stages),
        in the order the forward pass produces them: what hooks and captures may name."""
        return self.stage_table.stage_names(self.config.n_layer, self.config.layer_types)

    @cached_property
    def lens_aliases(self) -> dict[str, Alias]:
        """TransformerLens's names of this model's stages (engine/lens_names.py): name -> the stage(s) and layout."""
        return lens_aliases(self.stage_table, self.config)

    @property
    def tokenizer(self):
        """The model's own tokenizer (tokenizer.json), or GPT-2's for a GPT-2; see tokenizer.py."""
        if self._tokenizer is None:
            from .tokenizer import load_tokenizer

            return load_tokenizer()
        return self._tokenizer

    @property
    def name(self) -> str:
        return self.config.name

    def describe(self) -> dict:
        """The model as the ledger's JSON names it: its config, where its weights came from, the dtype it computes in,
        and, where not float32, the precision its products emulate and the format its weights are held in."""
        narrow = (
            {"precision": self.precision.name}
            if self.precision is not None and self.precision.name != "float32"
            else {}
        )
        return {**self.config.to_dict(), "source": self.source, "dtype": self.dtype.name, **narrow, **self.held_formats}

    def new_cache(self, batch: tuple[int, ...] | int = (), capacity: int | None = None) -> KVCache:
        """The model's cache for `capacity` positions (the context by default) of a batch of shape `batch`: what each
        layer keeps, as its config declares it (config.layer_cache: keys and values, or a fixed-size state)."""
        c = self.config
        capacity = c.n_positions if capacity is None else capacity
        rows = (batch,) if isinstance(batch, (int, np.integer)) else batch  # a number: B rows
        if not isinstance(rows, tuple) or not all(is_whole(n, 1) for n in rows):
            raise UserError(f"batch must be a number of rows or a tuple of them, (B,) for ids [B, T], not {batch!r}")
        if not is_whole(capacity, 0):
            raise UserError(f"capacity must be a whole number of positions, 0 or more, not {capacity!r}")
        try:
            return KVCache(
                capacity=capacity, batch=rows, shape_only=self.shape_only, dtype=self.dtype, layers=self._layer_caches
            )
        except (MemoryError, ValueError) as e:  # NumPy's refusals of an array larger than memory, or than any can be
            if isinstance(e, ValueError) and "too big" not in str(e):
                raise
            of_rows = f" of {' x '.join(map(str, rows))} rows" if rows else ""
            raise UserError(
                f"a cache of {capacity:,} positions{of_rows} does not fit in memory ({e}); ask for fewer positions "
                f"(capacity=...; {self.name}'s context is {c.n_positions:,})" + (" or rows" if rows else "")
            ) from None

    @cached_property
    def _layer_caches(self) -> tuple:
        """What each layer keeps, as its config declares it (config.layer_cache)."""
        return tuple(self.config.layer_cache(i) for i in range(self.config.n_layer))

    def check_ids(self, token_ids, past: int = 0, n_new: int = 1) -> np.ndarray:
        """Token ids as an int array [T] or [B, T], refused with a clear message if the model can't take them
        (see ids.py for what is taken); one past the context is told how many fit after `past` cached positions and
        before the n_new - 1 new tokens a generation feeds after them (config.check_fits refuses those)."""
        ids = as_token_ids(token_ids, self.config.vocab_size, vocabulary="this model's vocabulary")
        if ids.size == 0:
            raise UserError("token ids must be a non-empty list (or a [batch, tokens] array) of integers")
        if past + ids.shape[-1] > self.config.n_positions:
            room = self.config.n_positions - past - max(n_new - 1, 0)
            where = (" after the cached ones" if past else "") + (f" for {n_new:,} new ones" if n_new > 1 else "")
            # room 0 or less: the new tokens alone fill the context (generate's CLI says to give fewer), or the cache
            fits = f"; give at most {room:,} {'token' if room == 1 else 'tokens'}{where}" if room > 0 else ""
            if room <= 0 and past:
                fits = f"; the cache holds {past:,} positions already: start a new one (model.new_cache())"
            raise UserError(
                f"{past + ids.shape[-1]} positions exceed this model's context of {self.config.n_positions}{fits}"
            )
        return ids

    def prompt_ids(self, prompt) -> list[int]:
        """A prompt, text or token ids, as the list of ids the model reads (maybe empty; not yet checked
        against the context). Text goes through the tokenizer, ids through the same check as check_ids."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt, what="the prompt")
            beyond = [i for i in ids if i >= self.config.vocab_size]
            if beyond:  # a tokenizer not made for this model's vocabulary (a GPT-2 directory without its own files)
                raise UserError(
                    f"the prompt's text encodes to token id {beyond[0]}, outside this model's vocabulary "
                    f"(0..{self.config.vocab_size - 1}): its tokenizer is not this model's; give the prompt as token "
                    "ids (--ids 1,2,3, or a list of ints)"
                )
            return ids
        if prompt is None or isinstance(prompt, (bytes, bytearray)):
            raise UserError(f"the prompt must be text (a str) or a list of token ids, not {type(prompt).__name__}")
        return as_token_ids(prompt, self.config.vocab_size, batch=False, vocabulary="this model's vocabulary").tolist()

    def prompt_rows(self, prompts: list, n_new: int, verb: str = "continue") -> list[list[int]]:
        """Prompts (each text or token ids) as the ids the model reads, checked in one place for every verb: none
        empty, every id in the vocabulary, and the longest with n_new tokens within the context."""
        refuse_empty(prompts, verb)
        rows = [self.prompt_ids(prompt) for prompt in prompts]
        refuse_empty(rows, verb)
        for row in rows:
            self.check_ids(row, n_new=n_new)
        self.config.check_fits(max(map(len, rows)), n_new)
        return rows

    def run(
        self,
        token_ids,
        *,
        cache: KVCache | None = None,
        all_positions: bool = False,
        phase: Phase | None = None,
        watcher: Watcher | None = None,
        pads=None,
        options: RunOptions = RunOptions(),
        choices: dict | None = None,
    ):
        """One forward pass over new token ids: logits [R, V] (R = T if all_positions else 1).

        With a cache, the ids are the positions after those already cached. `phase` collects the
        ledger of this pass; `watcher` sees every stage (see tape.py), after the model's hooks (add_hook).
        `pads` (ids [B, T] only): row b is left-padded, its first pads[b] slots (counted from the first
        cached one) hold no token: its positions start after them and no real query sees them.
        `options`: how the pass computes what the weights do not decide (models/options.py: the routing a
        shape-only mixture of experts assumes, attention dense or in row chunks).
        `choices`: a dict the pass leaves each layer's choices in for later layers (an indexer's chosen keys that
        other layers share), kept for run_from.
        """
        if not isinstance(options, RunOptions):
            raise UserError(f"options must be a RunOptions (models/options.py), not {options!r:.60}")
        switch("all_positions", all_positions)
        check_pass_extras(phase, watcher, choices)
        if cache is not None and not isinstance(cache, KVCache):
            raise UserError(f"cache must be one this model made (model.new_cache()), not {type(cache).__name__}")
        past = cache.length if cache is not None else 0
        ids = self.check_ids(token_ids, past)
        T = ids.shape[-1]
        if cache is not None:
            self._check_cache(cache, ids.shape[:-1])
            cache.room(T)  # before any layer writes: a recurrent layer's state is overwritten in place
        pads = None if pads is None else self._check_pads(pads, ids, past)
        dims = Dims.of(self.config, T, past, R=T if all_positions else 1, batch=ids.shape[:-1])
        chunks = self._chunks if pads is None else None  # a padded batch's rows begin their chunks apart
        tape = self._tape(dims, phase, watcher, chunks=chunks, dense=options.dense_attention, routing=options.routing)
        try:
            return self.architecture.forward(
                ids, self.params, self.config, cache, tape, all_positions, pads, choices=choices
            )
        except BaseException:  # a hook's error, a refusal, Ctrl-C: the layers run so far wrote this pass's state
            if cache is not None and cache.overwrites:
                cache.spoilt = True
            raise

    def run_from(
        self,
        layer: int,
        stream,
        *,
        all_positions: bool = False,
        phase: Phase | None = None,
        watcher: Watcher | None = None,
        choices: dict | None = None,
        ids=None,
    ):
        """The forward pass from block `layer` on, without a cache: logits [..., R, V] of the stream [..., T, D] that
        block reads (any batch axes in front), the blocks before it not run, so that the ledger (`phase`) holds only
        what is recomputed. `choices`: those of the pass the stream came from (run(choices=...)), where later layers
        read an earlier one's; `ids`: the token ids [T] of its positions (each row's alike), where a layer reads them
        (DeepSeek-V4's hash-routed layers). Hooks and `watcher` see every stage, as in run. Activation patching runs
        this way."""
        self._check_resumed(layer, stream)
        switch("all_positions", all_positions)
        check_pass_extras(phase, watcher, choices)
        T, batch = self._positions_and_batch(stream)
        dims = Dims.of(self.config, T, 0, R=T if all_positions else 1, batch=batch)
        tape = self._tape(dims, phase, watcher)
        if ids is not None:
            ids = self.check_ids(ids)
            if ids.ndim == 0 or ids.shape[-1] != T or np.broadcast_shapes(ids.shape[:-1], batch) != batch:
                raise UserError(f"ids must hold the stream's {T} positions' tokens (each row's), not {list(ids.shape)}")
            ids = np.broadcast_to(ids, (*batch, T))
        forward = self.architecture.forward
        return forward.resume(stream, layer, self.params, self.config, tape, all_positions, choices, ids)

    def _check_pads(self, pads, ids: np.ndarray, past: int) -> np.ndarray:
        """run's `pads` as an array, one whole number per row of ids [B, T], each leaving its row a token; refused,
        before any layer writes the cache, where the model takes no left padding."""
        try:
            pads = np.asarray(pads)
        except ValueError:  # ragged rows: no array at all
            pads = np.asarray(None)
        T = ids.shape[-1]
        if ids.ndim != 2 or pads.shape != ids.shape[:1] or pads.dtype.kind not in "iu" or (pads < 0).any():
            raise UserError(f"pads must be one whole number >= 0 per row of token ids [B, T], not {pads!r}")
        if (pads >= past + T).any():  # a row of padding alone has no position to read its logits at
            raise UserError(f"pads must leave each row a token: fewer than its {past + T} slots, not {pads!r}")
        if self.config.padding_refused and pads.any():
            raise UserError(self.config.padding_refused)
        return pads

    def _check_cache(self, cache, batch: tuple[int, ...]) -> None:
        """A cache this model made (new_cache) for ids of this batch: another model's layers, numbers or rows would be
        read as this one's (a shape-only model's cache gave a real model shape-only logits, a float64 one float64)."""
        if cache.specs != self._layer_caches or (cache.shape_only, cache.dtype) != (self.shape_only, self.dtype):
            raise UserError(
                "this cache was made by another model (its layers or its numbers differ): use model.new_cache()"
            )
        if cache.batch != tuple(batch):
            shown = lambda rows: f"a batch of shape {rows}" if rows else "one prompt"  # noqa: E731
            raise UserError(
                f"this cache holds {shown(cache.batch)}, the ids are {shown(tuple(batch))}: "
                "make one for these ids (model.new_cache(batch))"
            )

    def _check_resumed(self, layer, stream) -> None:
        """run_from's block and stream, refused in words: a block number 0..n_layer (n_layer: the final norm and the
        logits alone), and an array of this model's kind of numbers [..., T, D]."""
        L = self.config.n_layer
        if not is_whole(layer, 0) or layer > L:
            raise UserError(
                f"layer must be a block number 0..{L} ({L}: the final norm and the logits alone), not {layer!r}"
            )
        self._check_stream(stream)
        T, _ = self._positions_and_batch(stream)
        if not 0 < T <= self.config.n_positions:  # as check_ids holds a prompt: a position, within the context
            raise UserError(
                f"the stream must hold 1 to {self.config.n_positions} positions (this model's context), not {T}"
            )

    @property
    def stream_shape(self) -> tuple[int, ...]:
        """A position's numbers in the residual stream: (D,), or (N, D) where the model carries N streams
        (DeepSeek-V4's hyper-connections)."""
        said = getattr(self.architecture.forward.embed, "stream_shape", None)  # an embedding that starts several
        return (self.config.n_embd,) if said is None else said(self.config)

    def _check_stream(self, stream) -> None:
        """A residual stream run_from or readout reads: an array of this model's kind of numbers [..., T, D] (or
        [..., T, N, D], stream_shape)."""
        each = self.stream_shape
        kind = getattr(stream, "dtype", None)
        if (
            not isinstance(stream, (np.ndarray, ShapeOnly))
            or len(stream.shape) < 1 + len(each)
            or tuple(stream.shape[-len(each) :]) != each
            or kind != self.dtype
        ):
            shown = f"{type(stream).__name__} {list(getattr(stream, 'shape', []))} {kind or ''}".strip()
            wanted = ", ".join(("...", "T", *map(str, each)))
            raise UserError(
                f"the stream must be a {self.dtype} array [{wanted}] (as hook_resid_pre holds), not {shown}"
            )

    def _positions_and_batch(self, stream) -> tuple[int, tuple[int, ...]]:
        """A stream's positions T and its batch axes (those in front of T)."""
        where = stream.ndim - 1 - len(self.stream_shape)
        return stream.shape[where], tuple(stream.shape[:where])

    def _tape(self, dims: Dims, phase: Phase | None, watcher: Watcher | None, **options) -> Tape:
        """A pass's tape through the blocks: the model's stages, windows and precision; its hooks, then `watcher`."""
        settle = None if self.precision is None else self.precision.value  # a replacement in the format's numbers
        seen = self.hooks.watcher(then=watcher, settle=settle)  # None where nobody watches: no hook, no watcher
        table, windows = self.stage_table, self._windows
        return Tape(dims, phase, seen, stage_table=table, windows=windows, precision=self.precision, **options)

    def run_with_cache(
        self,
        token_ids,
        names=None,
        *,
        all_positions: bool = True,
        kv_cache: KVCache | None = None,
        phase: Phase | None = None,
        choices: dict | None = None,
    ):
        """(logits, ActivationCache): one forward pass that keeps its named intermediate tensors.

        `names` picks what to keep: None (everything), a name or glob ("blocks.*.attn.weights"), a
        list of them, or a predicate name -> bool. Hooks run first; the cache holds what they
        returned. Logits are for every position unless all_positions=False (then the cache also has
        `last`); with `kv_cache` this is one step of cached decoding; `phase` collects the pass's
        ledger and `choices` its layers' choices, as for run(). See hooks.ActivationCache.
        """
        known = self.stage_names
        activations = ActivationCache(
            self.name, known, selector(names, known, aliases=self.lens_aliases), self.lens_aliases
        )
        logits = self.run(
            token_ids,
            cache=kv_cache,
            all_positions=all_positions,
            phase=phase,
            watcher=activations.capture,
            choices=choices,
        )
        return logits, activations

    def readout(self, stream, *, phase: Phase | None = None):
        """Logits [..., T, V] of residual streams [..., T, D] (any axes in front: a stream per layer), through the
        model's own final norm and unembedding (and what follows it), each product through the tape into `phase`'s
        ledger: the logit lens's reading of each layer."""
        self._check_stream(stream)
        T, batch = self._positions_and_batch(stream)
        dims = Dims.of(self.config, T, 0, R=T, batch=batch)
        tape = Tape(dims, phase, None, stage_table=self.stage_table, precision=self.precision)
        return self.architecture.forward.readout(stream, self.params, self.config, tape)

    def add_hook(self, name, fn) -> HookHandle:
        """Call fn(tensor, name) on each stage that `name` matches (a name, glob, list or predicate),
        in every forward pass (run, logits, generate, run_with_cache) until `.remove()` on the handle.

        fn returns None to leave the tensor alone, or an array of the same shape that replaces it.
        """
        return self.hooks.add(name, fn)

    def remove_hooks(self) -> None:
        """Remove every hook (and breakpoint) of this model."""
        self.hooks.clear()

    def break_at(self, name) -> HookHandle:
        """Open pdb when the forward pass reaches `name` (a name or glob), with `tensor`, `name` and
        `record` (its ledger entry) in scope; `c` continues. `.remove()` on the handle disarms it."""
        return self.hooks.add(name, breakpoint_hook, with_record=True)

    def logits(self, token_ids) -> np.ndarray:
        """Logits [T, vocab] (or [B, T, vocab]) at every position, in the model's dtype, computed without a cache."""
        return self.run(token_ids, all_positions=True)

    def generate(self, prompt, **options):
        """Continue `prompt` (a string or a list of token ids); see verbs/generate.py's generate for the options."""
        assert _generate is not None, "verbs/generate.py registers it at its import, which the package's __init__ runs"
        return _generate(self, prompt, **options)


def check_pass_extras(phase, watcher, choices) -> None:
    """run's and run_from's `phase`, `watcher` and `choices`, refused in words before any layer runs: a wrong one
    failed deep in the first stage (or the first layer that shares its choices), after the cache was marked spoilt."""
    if phase is not None and not isinstance(phase, Phase):
        raise UserError(f"phase must be a ledger Phase (engine/ledger.py) or None, not {phase!r:.60}")
    if watcher is not None and not callable(watcher):
        raise UserError(f"watcher must be a function of (name, tensor, record) or None, not {watcher!r:.60}")
    if choices is not None and not isinstance(choices, dict):
        raise UserError(f"choices must be a dict the pass fills (or None), not {choices!r:.60}")


def refuse_empty(prompts: list, verb: str = "continue") -> None:
    """An empty prompt (no text, or no tokens) refused, saying which: the one message, before or after tokenizing
    (the CLI asks before loading a model, Model.prompt_rows after)."""
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, (str, list, tuple)) and len(prompt) == 0:  # other kinds: prompt_ids says what is taken
            raise UserError(
                f'the prompt is empty; give some text to {verb}, e.g. "The capital of France is"'
                if len(prompts) == 1
                else f"prompt {i + 1} is empty; give some text to {verb} in each"
            )
