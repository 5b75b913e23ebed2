"""Count a model of any family without its weights: the ledger of a generation, from shapes alone.

The counts come from running the model's own forward code on shape-only stand-ins (engine/shapes.py):
the same code as a real run, so the same ledger, with no arithmetic and no weights. A GPT-3 175B
with a 1,000-token prompt counts in a fraction of a second. Which model to count is select.py's
question, and writing the count out (JSON, CSV) is views/export.py's.

The blocks of a model are of a few kinds (`config.layer_types`: one kind for GPT-2 and the Llama
family), and the blocks of one kind have the same shapes, so the same records but for their name and
layer index. A long generation on a deep model would hold millions of identical records (GPT-3 175B,
1,000 new tokens: 96 blocks x 17 stages x 1,000 passes) and run the same block code 96,000 times; so
each pass here runs the forward code through a twin of the model with one block of each kind (one
block for GPT-2) and keeps each kind's records to stand for every layer of that kind (`Pass`).
`Pass.expand()` gives the full ledger phase, and `count_generation` checks it against a run of the
whole model (the prefill and the first decode step) every time; the tests check whole generations.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np

from ..engine.ledger import Ledger, PassTotals, Phase, Record, Totals, cache_comparison, cache_steps, totals_of
from ..engine.stages import ATTENTION_SCORES, STATE, StageTable
from ..errors import OptionError, UserError
from ..families.config import ModelConfig as Config
from ..families.table import architecture_of
from ..models.model import Model
from ..models.options import RunOptions
from .choices import is_whole
from .formulas import generation_macs
from .options import GenerationOptions
from .passes import forward_passes

STEPS_SHOWN = 10  # decode steps shown (and written in full to JSON) before the middle ones are summarised


# The shape-only stand-ins are NumPy arrays without data, and NumPy still counts their elements in a
# signed 64-bit integer: a count whose tensors would be larger cannot be run, even with no values.
LARGEST_TENSOR = 2**62


def check_run(config: Config, n_prompt: int, n_new: int, batch: int = 1) -> tuple[int, int, int]:
    """The generation a count runs, checked once before any work: whole numbers of tokens, new tokens and rows
    (refused as an OptionError, which a caller renames: the CLI by its flags), that the context holds, and that
    NumPy can describe its tensors. Returns the three as Python's integers (NumPy's are taken)."""
    for what, value in (("new tokens", n_new), ("batch", batch), ("tokens", n_prompt)):
        if not is_whole(value, 1):
            raise OptionError(what, f"must be a whole number of at least 1, not {value!r}")
    config.check_fits(n_prompt, n_new)
    check_describable(config, n_prompt + n_new, batch)
    return int(n_prompt), int(n_new), int(batch)


def check_pass(config: Config, tokens: int) -> None:
    """One pass over a prompt of `tokens` positions and no more (an analysis's: lens, patch, attribute), checked before
    any work as check_run checks a generation: that the context holds them and that NumPy can describe its tensors."""
    if not isinstance(config, Config):
        raise UserError(f"the pass is counted from a model's config (model.config, PRESETS[name]), not {config!r:.60}")
    if not is_whole(tokens, 1):
        raise OptionError("tokens", f"must be a whole number of at least 1, not {tokens!r}")
    if tokens > config.n_positions:
        raise UserError(
            f"a {tokens:,}-token prompt exceeds {config.name}'s context of {config.n_positions:,} positions; "
            f"give at most {config.n_positions:,}"
        )
    check_describable(config, tokens)


def check_describable(config: Config, t: int, batch: int = 1, new: int | None = None) -> None:
    """That NumPy can describe the tensors of passes over t positions, shape-only stand-ins included: passes of all t
    positions, or of `new` of them (a decode step's 1) after t - new cached ones."""
    c, new = config, t if new is None else new
    largest = max(
        batch * new * max(3 * c.n_embd, c.d_ff, c.vocab_size),
        batch * c.n_head * new * t,
        batch * t * 3 * c.n_embd,  # a cache's keys and values (and its other rows) of every position
        c.n_embd * max(3 * c.n_embd, c.d_ff, c.vocab_size, c.n_positions),
    )
    if largest > LARGEST_TENSOR:
        raise UserError(
            f"this count needs a tensor of {largest:,} elements, more than NumPy can describe even "
            f"without values (2**62); choose smaller sizes, fewer tokens or a smaller batch"
        )


# --- counting ---------------------------------------------------------------------------------------------
@dataclass
class Pass(PassTotals):
    """One forward pass, its blocks folded: `twin` is the phase of a twin of the model cut to the fewest first
    layers that hold one layer of each kind (`config.layer_types`: one layer for a GPT-2 or a Llama, whose layers
    are all alike), and the records of each kind's first layer stand for every layer of that kind; its totals
    (PassTotals) count each record for every layer it stands for."""

    twin: Phase
    layer_types: tuple  # the kind of each of the model's layers, in order
    # Its place in the run (Phase.PLACE), its twin's
    phase: str = field(init=False)  # "prefill" | "decode"
    step: int = field(init=False)
    tokens: int = field(init=False)
    context: int = field(init=False)
    batch: int = field(init=False)
    cached: bool = field(init=False)
    groups: list[tuple[list[Record], int]] = field(init=False)  # one per kind: its first layer's records, and how
    #                                                              many layers of the model are of that kind
    block: list[Record] = field(init=False)  # layer 0's records (the block the reports show)
    before: list[Record] = field(init=False)  # the embedding
    after: list[Record] = field(init=False)  # final norm, last position, logits

    def __post_init__(self) -> None:
        for key in Phase.PLACE:
            setattr(self, key, getattr(self.twin, key))
        records = self.twin.records
        first = next(i for i, r in enumerate(records) if r.layer is not None)
        last = max(i for i, r in enumerate(records) if r.layer is not None)
        self.before, self.after = records[:first], records[last + 1 :]
        kinds = list(dict.fromkeys(self.layer_types))  # in the order they first appear
        self._group_of = {kind: g for g, kind in enumerate(kinds)}
        first_layer = {kind: self.layer_types.index(kind) for kind in kinds}
        self.groups = [
            ([r for r in records[first : last + 1] if r.layer == first_layer[kind]], self.layer_types.count(kind))
            for kind in kinds
        ]
        self.block = self.groups[self._group_of[self.layer_types[0]]][0]

    @property
    def n_layer(self) -> int:
        return len(self.layer_types)

    def weighted(self) -> list[tuple[Record, int]]:
        """Every record of the pass once, with the number of layers it stands for (1 outside the blocks)."""
        return [
            *((r, 1) for r in self.before),
            *((r, n) for records, n in self.groups for r in records),
            *((r, 1) for r in self.after),
        ]

    def ops(self) -> dict[str, tuple[int, int]]:
        """op -> (dot products, MACs) over the whole pass (all layers), for the matrix products, in the order they run."""
        totals = {r.op: (0, 0) for r, _ in self.weighted() if r.kind == "matmul"}
        for r, n in self.weighted():
            if r.kind == "matmul":
                dots, macs = totals[r.op]
                totals[r.op] = (dots + n * r.dot_products, macs + n * r.macs)
        return totals

    @property
    def block_dot_products(self) -> int:
        return sum(r.dot_products for r in self.block)

    @property
    def block_macs(self) -> int:
        return sum(r.macs for r in self.block)

    @property
    def causal_macs(self) -> int:
        """The MACs the causal mask keeps: scores and mix counted by the (query, key) pairs it does not hide."""
        return sum(n * (r.causal_macs if r.causal_macs is not None else r.macs) for r, n in self.weighted())

    def find(self, op: str) -> Record:
        """The op's record: outside the blocks, or in the first layer of the first kind that has it (layer 0's kind
        first: where layers differ in their products, an op of another kind is found in that kind's layer)."""
        found = next((r for r in self.before + self.block_records + self.after if r.op == op), None)
        if found is None:  # a StopIteration before
            ops = ", ".join(dict.fromkeys(r.op for r in self.before + self.block_records + self.after))
            raise UserError(f"this {self.phase} pass has no {op!r} (its ops: {ops})")
        return found

    def has(self, op: str) -> bool:
        """Whether some layer of the pass (or the stages outside the blocks) has the op: a model whose layers keep a
        state and none attends has no scores."""
        return any(r.op == op for r in self.before + self.block_records + self.after)

    @property
    def block_records(self) -> list[Record]:
        """The records of one layer of each kind, layer 0's kind first (just `block` where the layers are alike)."""
        return [r for records, _ in self.groups for r in records]

    @property
    def scores(self) -> Record | None:
        """Attention's scores (Q K^T) in the first layer that attends, layer 0's kind first; None where no layer
        attends (every layer keeps a state)."""
        return next((r for r in self.block_records if r.attention == "scores"), None)

    @property
    def attended(self) -> int:
        """Keys each block's scores were computed against (t, or fewer where a sliding window cut the oldest)."""
        assert self.scores is not None, "a pass with attention"
        return self.scores.out_shape[-1]

    @property
    def attending_block(self) -> list[Record]:
        """The records of the first layer that attends: layer 0's, but in a hybrid whose first layers keep a state
        (formulas.first_attending); layer 0's where none attends."""
        return next(
            (records for records, _ in self.groups if any(r.stage.group == ATTENTION_SCORES for r in records)),
            self.block,
        )

    def attention_vs_weights(self) -> AttentionVsWeights:
        """The MACs of attention (Q K^T and A V) against those of the products with weights, per layer and in all
        (a recurrent layer's scan is neither: it reads a state of fixed size and holds no weights)."""
        block = self.attending_block
        attention = sum(r.macs for r in block if r.stage.group == ATTENTION_SCORES)
        weights = sum(r.macs for r in block if with_weights(r))
        outside = sum(r.macs for r in self.before + self.after if r.kind == "matmul")
        return AttentionVsWeights(self, attention, weights, outside)

    def expand(self) -> Phase:
        """The full ledger phase: the block's records once per layer, named and numbered as the model does."""
        p = self.twin
        full = Phase(p.phase, p.step, p.tokens, p.context, p.batch, p.cached, list(self.before))
        for i, kind in enumerate(self.layer_types):
            full.records += [replace(r, layer=i) for r in self.groups[self._group_of[kind]][0]]
        full.records += self.after
        return full

    def summary(self) -> dict:
        """The phase's JSON without the per-layer detail: its place in the generation and its totals."""
        return {**self.twin.place(), "dot_products": self.dot_products, "macs": self.macs, "flops": self.flops}


def with_weights(r: Record) -> bool:
    """A product with weights: not attention's scores and mix (they grow with t), nor a scan over a state."""
    return r.kind == "matmul" and r.stage.group not in (ATTENTION_SCORES, STATE)


@dataclass(frozen=True)
class AttentionVsWeights:
    """One pass's attention (scores and mix: they grow with the context) against its products with weights
    (q, k, v or qkv, out, the MLP: the same at every context), per layer (the first that attends); `outside` is the
    logits. A hybrid's scans (its recurrent layers' products over their state) are neither: all_scan."""

    step: Pass
    attention: int  # MACs, one layer
    weights: int  # MACs, one layer
    outside: int  # MACs of the products outside the blocks (the logits): weights too

    @property
    def layer_ratio(self) -> Fraction:
        return Fraction(self.attention, self.weights)

    @property
    def all_attention(self) -> int:
        return sum(
            n * sum(r.macs for r in records if r.stage.group == ATTENTION_SCORES) for records, n in self.step.groups
        )

    @property
    def all_weights(self) -> int:
        """Every product with weights in the pass: the blocks' and the logits."""
        weights = sum(n * sum(r.macs for r in records if with_weights(r)) for records, n in self.step.groups)
        return weights + self.outside

    @property
    def all_scan(self) -> int:
        """Every recurrent layer's scan in the pass (the same at any context; 0 where every layer attends)."""
        return sum(n * sum(r.macs for r in records if r.stage.group == STATE) for records, n in self.step.groups)

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.all_attention, self.all_weights)


def count_passes(
    model: Model, n_prompt: int, n_new: int, use_cache: bool = True, batch: int = 1, dense_attention: bool = False
) -> Ledger:
    """The ledger of generating n_new tokens after an n_prompt-token prompt, whatever the tokens are.

    The counts depend on shapes only, so placeholder token ids do; on a shape-only model
    (Model.without_weights) this costs no arithmetic at all. `dense_attention`: every T x t score, as
    transformers' eager attention computes it, where a long pass would run in row chunks (row_chunks.py).
    """
    if not isinstance(model, Model):
        raise UserError(f"count_passes counts a Model (Model.without_weights(config) for a config), not {model!r:.80}")
    n_prompt, n_new, batch = check_run(model.config, n_prompt, n_new, batch)
    running = RunOptions(dense_attention=dense_attention)
    return placeholder_passes(
        model, n_prompt, GenerationOptions(max_new_tokens=n_new, use_cache=use_cache, running=running), batch
    )


def placeholder_passes(model: Model, n_prompt: int, options: GenerationOptions, batch: int = 1) -> Ledger:
    """count_passes of the generation `options` describe, every row of the batch the same placeholder ids."""
    book = Ledger(model.config.to_dict(), dense_attention=options.running.dense_attention)
    fed: list[np.ndarray] = []
    placeholder = np.zeros(n_prompt, dtype=np.int64)
    for _ in forward_passes(model, placeholder, fed, options, repeat=(batch,) if batch > 1 else (), book=book):
        fed.append(placeholder[0])
    return book


def count_folded(config: Config, n_prompt: int, options: GenerationOptions, batch: int = 1) -> list[Pass]:
    """Every pass of the generation `options` describe, run through a shape-only twin of the model cut to the fewest
    first layers that hold one layer of each kind (one layer where all are alike), whatever the model's depth. Which
    tokens a mixture of experts' experts are assumed to get is the options' routing (RunOptions), which moves no
    total."""
    twin = folded_twin(config)
    return [Pass(phase, config.layer_types) for phase in placeholder_passes(twin, n_prompt, options, batch).phases]


@lru_cache(maxsize=4)
def folded_twin(config: Config) -> Model:
    """A shape-only twin of the model cut to the fewest first layers that hold one layer of each kind; made once for
    the many passes a count, its check and a roofline's batch search run (DeepSeek-V4-Pro's takes 0.15 s)."""
    return Model.without_weights(config.prefix(config.layers_holding_each_kind))


def decode_at(config: Config, context: int, batch: int = 1, running: RunOptions = RunOptions()) -> Pass:
    """A decode step with the KV cache at `context`: one new position after context - 1 cached ones (at context 1,
    the one-token prefill, which has the same shapes), of `batch` sequences, run as `running` says. One position is
    never computed in chunks.

    The step is counted without the prefill before it: a shape-only cache holds no numbers, and how many positions
    it has seen is all a step's shapes read of it (a window's rows, a compressed stream's entries, an indexer's
    keys), so a cache advanced to context - 1 gives the step the prefill would have left it (the tests compare the
    two for every family). A roofline's batch search counts dozens of steps: a prefill each cost 20 times the step."""
    if not isinstance(config, Config):
        raise UserError(f"decode_at counts a model's config (model.config, PRESETS[name]), not {config!r:.60}")
    if not is_whole(context, 1) or context > config.n_positions:
        n = config.n_positions
        raise OptionError(
            "context", f"must be a whole number of positions, 1 to {config.name}'s {n:,}, not {context!r}"
        )
    if not is_whole(batch, 1):
        raise OptionError("batch", f"must be a whole number of at least 1, not {batch!r}")
    check_describable(config, context, batch, new=1)
    if context == 1:
        return count_folded(config, 1, GenerationOptions(max_new_tokens=1, running=running), batch)[0]
    twin = folded_twin(config)
    rows = (batch,) if batch > 1 else ()
    cache = twin.new_cache(rows, capacity=context)
    cache.advance(context - 1)
    step = Phase("decode", 1, 1, context, batch=batch)
    ids = np.broadcast_to(np.zeros(1, dtype=np.int64), (*rows, 1))  # one row seen as B, as count_folded's
    twin.run(ids, cache=cache, phase=step, options=running)
    return Pass(step, config.layer_types)


@dataclass
class Count:
    """The ledger of a generation counted from shapes alone, and the same generation the other way round
    (without the cache if this one has it, and vice versa): what the cache saves."""

    config: Config
    n_prompt: int
    n_new: int
    batch: int
    cached: bool
    passes: list[Pass]
    other_way: list[Pass]
    # How each pass ran: every T x t score computed or row chunks, and a mixture of experts' tokens each expert is
    # assumed to get (families/parts/moe.py)
    running: RunOptions = RunOptions()

    @property
    def stage_table(self) -> StageTable:
        """The model's stage table (stages.py): its op names, their equations and groups."""
        return architecture_of(self.config).stage_table(self.config)

    @property
    def prefill(self) -> Pass:
        return self.passes[0]

    @property
    def decodes(self) -> list[Pass]:
        return self.passes[1:]

    @property
    def totals(self) -> Totals:
        return totals_of(self.passes)

    @property
    def other_totals(self) -> Totals:
        return totals_of(self.other_way)

    def cache_comparison(self) -> dict:
        steps = cache_steps(self.cached, [(p.step, p.macs) for p in self.passes], [p.macs for p in self.other_way])
        return cache_comparison(self.cached, self.totals, self.other_totals, steps)

    def ops(self) -> dict[str, tuple[int, int]]:
        """op -> (dot products, MACs) over the whole generation."""
        totals = {op: (0, 0) for op in self.stage_table.matmul_ops}
        for p in self.passes:
            for op, (dots, macs) in p.ops().items():
                totals[op] = (totals[op][0] + dots, totals[op][1] + macs)
        return totals

    def ledger(self) -> Ledger:
        """The full Ledger, every block of every pass expanded (as count_passes on the whole model gives)."""
        return Ledger(
            self.config.to_dict(),
            [p.expand() for p in self.passes],
            other_way=self.other_totals,
            other_way_macs=[p.macs for p in self.other_way],
            dense_attention=self.running.dense_attention,
        )

    # Jupyter draws a count inline through `_repr_html_`, which views/html_report.py gives this class at its import
    # (register_notebook_display): the data does not import the views that show it, layers above.

    def comparison_step(self) -> Pass:
        """The decode step whose attention is set against its products with weights: decode_example, the one the
        intensity, memory and roofline read (the step after the prompt where the count has none), or where the prompt
        fills the context, one at its last position."""
        example = self.decode_example()
        return example if example is not None else decode_at(self.config, self.n_prompt, self.batch, self.running)

    def decode_example(self) -> Pass | None:
        """A decode step with the cache (T = 1) of this generation, for intensity: the last one counted with the
        cache (from the other-way run if this one had none), or the first step after the prompt if there is none
        (None if the context has no room for it). Counted once: the report's intensity, memory and roofline read
        it."""
        return self._decode_example

    @cached_property
    def _decode_example(self) -> Pass | None:
        cached = self.passes if self.cached else self.other_way
        if len(cached) > 1:
            return cached[-1]
        if self.n_prompt + 1 > self.config.n_positions:  # the step's context: the prompt and its one new position
            return None
        return decode_at(self.config, self.n_prompt + 1, self.batch, self.running)

    def shown_steps(self, limit: int = STEPS_SHOWN) -> list[int]:
        """The decode steps shown in full: all of them, or the first limit - 2 and the last 2."""
        steps = [p.step for p in self.decodes]
        return steps if len(steps) <= limit else [*steps[: limit - 2], *steps[-2:]]


def count_generation(
    config: Config,
    n_prompt: int,
    n_new: int = 1,
    use_cache: bool = True,
    batch: int = 1,
    dense_attention: bool = False,
    routing: str = "balanced",
) -> Count:
    """Count 1 prefill over n_prompt tokens and n_new - 1 decode steps, with a batch of `batch` sequences;
    `dense_attention`: every T x t score, as transformers' eager attention computes it (else row chunks);
    `routing`: a mixture of experts' tokens per expert, assumed (balanced or worst: families/parts/moe.py)."""
    if not isinstance(config, Config):
        raise UserError(f"count_generation counts a model's config (model.config, PRESETS[name]), not {config!r:.80}")
    n_prompt, n_new, batch = check_run(config, n_prompt, n_new, batch)
    running = RunOptions(routing, dense_attention)
    return counted(
        config, n_prompt, GenerationOptions(max_new_tokens=n_new, use_cache=use_cache, running=running), batch
    )


def counted(config: Config, n_prompt: int, options: GenerationOptions, batch: int = 1) -> Count:
    """count_generation's count, of a run already checked (check_run) with its options already made: the CLI checks
    both first, in its flags' words, before any other work."""
    passes = count_folded(config, n_prompt, options, batch)
    other_way = (
        [Pass(replace(passes[0].twin, cached=not options.use_cache), passes[0].layer_types)]
        if options.max_new_tokens == 1  # a prefill alone: the same products whether the cache is kept or not
        else count_folded(config, n_prompt, replace(options, use_cache=not options.use_cache), batch)
    )
    checked = replace(options, max_new_tokens=min(options.max_new_tokens, 2))
    check_folding(config, n_prompt, checked, batch, passes[:2] if checked == options else None)
    n_new, cached = options.max_new_tokens, options.use_cache
    return Count(config, n_prompt, n_new, batch, cached, passes, other_way, options.running)


def check_folding(
    config: Config, n_prompt: int, options: GenerationOptions, batch: int, own: list[Pass] | None = None
) -> None:
    """The folded passes, expanded, must be exactly what a whole model's forward code records: checked on the
    model cut to two layers of each kind (all of it, when it is no deeper), since layers of one kind record the
    same whatever the depth, so that a count of 10,000 layers does not run 10,000 blocks to check one. `own`: the
    config's own folded passes of these options where the caller has them (the cut's twin is the config's:
    its passes are not run twice)."""
    cut = config.prefix(min(config.n_layer, 2 * config.layers_holding_each_kind))
    if own is None:
        passes = count_folded(cut, n_prompt, options, batch)
    else:
        passes = [Pass(p.twin, cut.layer_types) for p in own]
    whole = placeholder_passes(Model.without_weights(cut), n_prompt, options, batch).phases
    for folded, phase in zip(passes, whole):
        expanded = folded.expand()
        if expanded.records != phase.records or (expanded.tokens, expanded.context) != (phase.tokens, phase.context):
            raise AssertionError(
                f"the one-block count of {phase.phase} step {phase.step} differs from the whole model's"
            )


def sweep_per_token(config: Config, points: int = 24) -> dict[str, list[int]]:
    """MACs to generate one token at context t, with and without the KV cache, for t across the context window.

    With the cache, the decode step at context t (T = 1); without it, the pass that recomputes all t positions (T = t);
    at t = 1 both are the one-token prefill. Each is the closed form of the generation (verbs/formulas.py), which the
    conformance suite holds to the counted passes of every family (with and without the cache, past every window,
    chunk and top-k): counting 24 passes of up to a million positions took minutes where the sums take microseconds.
    """
    if not isinstance(config, Config):
        raise UserError(f"sweep_per_token counts a model's config (model.config, PRESETS[name]), not {config!r:.60}")
    if not is_whole(points, 2):
        raise OptionError(
            "points", f"must be a whole number of at least 2 (the first context and the last), not {points!r}"
        )
    n = config.n_positions
    contexts = sorted({max(2, round(2 + (n - 2) * i / (points - 1))) for i in range(points)}) if n > 2 else [n]
    contexts = [t for t in contexts if t >= 2] or [1]
    if contexts == [1]:
        one = generation_macs(config, 1, 1)
        return {"context": [1], "with_cache": [one], "without_cache": [one]}
    # the step at context t: the one after a prefill of t - 1 positions
    with_cache = [generation_macs(config, t - 1, 2) - generation_macs(config, t - 1, 1) for t in contexts]
    without = [generation_macs(config, t, 1, use_cache=False) for t in contexts]
    return {"context": contexts, "with_cache": with_cache, "without_cache": without}
