"""The tape of one forward pass: each stage goes through it, is shape-checked, recorded and shown to watchers.

`Tape.matmul` is the one door through which every matrix product of the model passes: it computes
the product, on the threads it is sized for (threads.py), and records its dot products in the ledger.
Attention over a long prompt runs in chunks of query rows through the same door (row_chunks.py, beside
this). Nothing else in the package multiplies matrices (a test reads the source to hold us to that).

Shapes are written symbolically on each line of the forward pass ("H T dh") and checked here
against the concrete sizes of this pass, so a shape in the code cannot drift from the truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from math import prod
from typing import Any

import numpy as np

from ..errors import UserError
from .gathered import CHUNKS, EXPERTS, PIECES, Gathered
from .kvcache import first_attended
from .ledger import Phase, Record, dot_product_count
from .precision import Precision, widening
from .row_chunks import in_row_chunks, on_chosen_keys
from .selection import selected, top_k
from .shapes import ShapeOnly
from .spec import matmul_spec, specs, symbols
from .stages import Stage, StageTable
from .threads import sized_for_threads, widens_itself

# Why a hook may read, not replace, a stage computed in parts: the parts have run when it is shown.
_SHOWN_AFTER = {
    EXPERTS: "a stage each expert computes on its own tokens, shown after they all ran: a replacement cannot take "
    "effect (hook the router's stages or moe.out instead)",
    PIECES: "a stage computed piece by piece (a scan's chunks or positions, a solve's rows), shown after the last piece: a "
    "replacement cannot take effect (hook a stage before or after it instead)",
}

# A watcher sees every stage: (full name, tensor, record) -> the tensor to continue with.
Watcher = Callable[[str, object, Record], object]


def fold_shared_axes(a, b):
    """(a', b', out shape): a @ b = (a' @ b').reshape(out shape), with the axes that b is shared over (b lacks
    them or has size 1 there) folded into a's rows, so that one BLAS call reads b once for all of them,
    where np.matmul would loop over them and read b again for each: a weight shared by a batch
    ([B*T, n] x [n, p]; a decode step is bound by those reads), and the keys or values shared by the G
    query heads of a group ([G*T, dh] x [dh, t]). The same dot products; fewer, larger BLAS calls.
    """
    fold = 0  # a's axes just before its rows that b is shared over
    while fold < a.ndim - 2 and (fold >= b.ndim - 2 or b.shape[-3 - fold] == 1):
        fold += 1
    if fold == 0:
        return a, b, None
    kept = a.shape[: a.ndim - 2 - fold]
    a_rows = a.reshape(*kept, -1, a.shape[-1])
    b_kept = b.reshape(*b.shape[: max(b.ndim - 2 - fold, 0)], *b.shape[-2:])
    batch = np.broadcast_shapes(kept, b_kept.shape[:-2])
    return a_rows, b_kept, (*batch, *a.shape[len(kept) : -1], b.shape[-1])


@dataclass
class Dims:
    """The concrete size of each dimension symbol during one forward pass (see stages.py)."""

    T: int
    t: int
    D: int
    H: int
    F: int
    V: int
    R: int
    batch: tuple[int, ...] = ()
    dh: int | None = None  # None: D / H
    Hkv: int | None = None  # None: H (every head has its own keys and values)
    start: int = 0  # the position of the first attended key (beyond 0 only where a sliding window cut the rest)
    window: int | None = None
    # Chunked attention (Llama 4's attention_chunk_size C): each query reads only the keys of its own chunk of C
    # positions (row_chunks.py cuts the pass at the chunks); the pass's keys are still those of its window (C: every
    # chunk a query of it is in lies within the C positions up to it). None: no chunks, or a left-padded batch's
    # layer, whose rows begin their chunks at different slots (its mask cuts each row's chunk).
    chunk: int | None = None
    E: int | None = None  # a mixture of experts: E experts a layer, k of which compute each token (None: dense)
    k: int | None = None
    selected: int | None = None  # sparse attention: the most keys a query attends to, chosen by an indexer (None: all)
    # Sizes that depend on the data, not on the model or the pass: the rows of a product that only some tokens
    # reach (Te: the tokens a router sent to expert e). A forward pass names them per call (Tape.with_sizes).
    data: dict = field(default_factory=dict)
    _shapes: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.dh = self.D // self.H if self.dh is None else self.dh
        self.Hkv = self.H if self.Hkv is None else self.Hkv

    @classmethod
    def of(cls, config, T: int, past: int, R: int, batch: tuple[int, ...] = ()) -> Dims:
        """The sizes of a pass of `config` over T new positions after `past` cached ones."""
        window = config.sliding_window
        start = first_attended(past, window)  # the earliest key any new query sees
        return cls(
            T=T,
            t=past + T - start,
            D=config.n_embd,
            H=config.n_head,
            F=config.d_ff,
            V=config.vocab_size,
            R=R,
            batch=batch,
            dh=config.d_head,
            Hkv=config.n_kv_head,
            start=start,
            window=window,
            E=config.n_experts,
            k=config.top_k,
            selected=config.index_topk,
            data=dict(getattr(config, "symbol_sizes", {})),
        )

    def with_window(self, window: int | None) -> Dims:
        """The same pass as seen by a layer with another sliding window (or none): its keys start elsewhere."""
        if window == self.window:
            return self
        start = first_attended(self.past, window)
        return replace(self, t=self.past + self.T - start, start=start, window=window, _shapes={})

    @property
    def past(self) -> int:
        """Positions before this pass's first new one."""
        return self.start + self.t - self.T

    @property
    def s(self) -> int:
        """The keys each query attends to where an indexer chooses them: min(t, selected); t without one."""
        return self.t if self.selected is None else min(self.t, self.selected)

    @property
    def G(self) -> int:  # noqa: N802 - the symbol
        return self.H // self.Hkv  # type: ignore[operator]  # set in __post_init__

    def size(self, symbol: str) -> int:
        if symbol.isdigit():
            return int(symbol)
        if "+" in symbol:  # "H*dh+2*Hkv*dh": the width of a fused product (Phi-3's q, k and v in one)
            return sum(self.size(s) for s in symbol.split("+"))
        if "*" in symbol:  # "H*dh"
            return prod(self.size(s) for s in symbol.split("*"))
        if symbol[0].isdigit():  # "3D"
            return int(symbol[:-1]) * self.size(symbol[-1])
        if symbol in self.data:
            return self.data[symbol]
        return getattr(self, symbol)

    def describe(self) -> str:
        """ "T=5 t=5 D=64 H=4 dh=16 ..." : every size of this pass, for traces."""
        kv = f" Hkv={self.Hkv} G={self.G}" if self.Hkv != self.H else ""
        window = f" window={self.window}" if self.window is not None else ""
        window += f" chunk={self.chunk}" if self.chunk is not None else ""
        experts = f" E={self.E} k={self.k}" if self.E is not None else ""
        selected = f" s={self.s}" if self.selected is not None else ""
        return (
            f"T={self.T} t={self.t} D={self.D} H={self.H}{kv} dh={self.dh} F={self.F} V={self.V} "
            f"R={self.R}{window}{experts}{selected}"
        )

    def shape(self, spec: str, batched: bool = True) -> tuple[int, ...]:
        key = (spec, batched)
        if key not in self._shapes:  # every block asks the same questions: answer each once per pass
            sizes = tuple(self.size(s) for s in symbols(spec))
            self._shapes[key] = self.batch + sizes if batched else sizes
        return self._shapes[key]

    def symbolic(self, spec: str) -> str:
        return "[" + ", ".join(("B",) * len(self.batch) + tuple(spec.split())) + "]"


@dataclass
class Tape:
    dims: Dims
    phase: Phase | None = None  # None: ledger off
    watcher: Watcher | None = None
    layer_index: int | None = None
    prefix: str = ""
    stage_table: StageTable | None = None  # where an op is looked up that no part declared (Tape.declaring)
    # The stages of the part running on this tape, by op (Tape.declaring): a part declares its stages once, and its
    # forward pass names each by its op, as the ledger does
    declared: Mapping[str, Stage] | None = None
    # Each layer's sliding window, where the layers differ (config.layer_window); None: every layer has dims.window.
    windows: tuple | None = None
    # Each layer's chunk of chunked attention (config.layer_chunk), where some layer has one; None: no layer has.
    chunks: tuple | None = None
    dense: bool = False  # attention as transformers' eager attention computes it: every T x t score, never in chunks
    # Counting from a config alone, a mixture of experts has no router to ask: which tokens each expert gets is
    # assumed, "balanced" (T k / E each) or "worst" (all T to the same k experts). A real run's router decides.
    routing: str = "balanced"
    # Inside work done in parts (a long prompt's attention in chunks of query rows, a layer's experts, a scan's
    # pieces): what each part computed, for the one record per op that the whole computation's tape writes after the
    # last part (Tape.record_gathered; engine/gathered.py); None elsewhere, and where nobody keeps a ledger or watches.
    gathered: Gathered | None = None
    routed: object = None  # the expert whose rows this tape's stages compute (Tape.expert; a mixture's Routed)
    # bfloat16, float16, fp8: what products' operands and outputs and stages' values are rounded to (precision.py);
    # also widens weights kept in their 2-byte format. None: float32, nothing rounded.
    precision: Precision | None = None

    def layer(self, i: int) -> Tape:
        """The tape as seen from inside block i: stage names get the prefix "blocks.{i}.", and the sizes are
        those of block i's attention (its window, where layers differ)."""
        dims = self.dims if self.windows is None else self.dims.with_window(self.windows[i])
        if self.chunks is not None and self.chunks[i] != dims.chunk:
            dims = replace(dims, chunk=self.chunks[i])
        return replace(self, dims=dims, layer_index=i, prefix=f"blocks.{i}.", windows=None, chunks=None)

    def in_row_chunks(self, attend, q, K, V, bias=None):
        """attend(q, K, V, bias, tape) -> z [..., T, dh], in chunks of query rows, each against only the keys it can
        see (row_chunks.py says how, and what the ledger then holds)."""
        return in_row_chunks(self, attend, q, K, V, bias)

    def on_chosen_keys(self, attend_chosen, attend, q, K, V, bias, chosen):
        """Attention where each query attends only to the keys `chosen` for it ([..., T, s]: an indexer's top s of the
        t): attend_chosen(q, K, V, bias, chosen, tape) in chunks of query rows, or, watched or dense, attend(q, K, V,
        bias, tape) over every key with the others masked (row_chunks.py says which, and what the ledger holds)."""
        return on_chosen_keys(self, attend_chosen, attend, q, K, V, bias, chosen)

    def with_sizes(self, **data: int) -> Tape:
        """The same tape, with sizes that depend on the data named for the stages run through it: a product over
        the Te tokens routed to an expert reads "Te D, D F -> Te F" on `tape.with_sizes(Te=len(tokens))`."""
        return replace(self, dims=replace(self.dims, data={**self.dims.data, **data}, _shapes={}))

    def experts(self) -> Tape:
        """The tape of a layer's experts, each computing only the rows of the tokens routed to it (Tape.expert): their
        products and stages are counted expert by expert and written, and shown to watchers, as one record per op
        by record_gathered (engine/gathered.py). Their rows are the whole batch's tokens, flattened: no batch axis."""
        d = self.dims
        n = prod(d.batch) * d.T
        return replace(
            self,
            dims=replace(d, batch=(), _shapes={}),
            phase=None,
            watcher=None,
            gathered=self._gathering(EXPERTS, tokens=n, k=d.k or 0),
        )

    def expert(self, routed) -> Tape:
        """The tape of one expert's stages over the tokens routed to it (`routed`: its .expert, .tokens, .rows and
        .slots, a mixture's Routed): the symbol Te is their number."""
        return replace(self.with_sizes(Te=routed.tokens), routed=routed)

    def repeats(self, first: int, routed) -> bool:
        """Whether the expert `routed` (a shape-only Routed: a number of tokens, no rows) is counted as a repeat of
        expert `first`, which computed as many tokens through weights of the same shapes: the same products and
        stages, so its counts are first's, without running its lines again (DeepSeek-V4-Pro's 384 experts a layer
        ran 384 times a pass; two numbers of tokens at most under balanced routing). Not where somebody watches the
        pass: a watcher sees each part's values."""
        g = self.gathered
        if first == routed.expert or g is None or g.watched:
            return False
        g.repeat(first, routed.expert)
        return True

    def in_pieces(self) -> Tape:
        """The tape of a computation done piece by piece (a scan over chunks, a solve row by row): each piece's
        products and stages run on it (with that piece's sizes, Tape.with_sizes), and are written, and shown to
        watchers, as one record per op by record_gathered after the last piece (engine/gathered.py)."""
        return replace(self, phase=None, watcher=None, gathered=self._gathering(PIECES))

    def in_chunks(self, dims: Dims, gathered: Gathered | None) -> Tape:
        """The tape of one chunk of query rows of this pass (row_chunks.py), its sizes `dims`, adding what it computes
        to `gathered` (this tape's gathering(CHUNKS), shared by the chunks)."""
        return replace(self, dims=dims, phase=None, watcher=None, gathered=gathered)

    def _gathering(self, how: str, **more) -> Gathered | None:
        """A Gathered for work done in parts on this tape, None where nobody keeps a ledger or watches."""
        return None if self.unobserved else Gathered(how, self.phase is not None, self.watcher is not None, **more)

    def record_gathered(
        self,
        parts: Tape | Gathered | None,
        whole: Mapping[str, str] | None = None,
        *,
        n_experts: int = 0,
        along: str | None = None,
        values: dict | None = None,
        recurrent: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """One record per op that the parts ran (a Gathered, or the tape that gathered it), with the shapes of the whole
        computation: `whole[op]` where given (a layer's experts: "T D, D k*F -> T k*F", each token's rows in its k
        experts; a scan's chunks side by side: "Hv N C dk, Hv N dk dv -> Hv N C dv"), else the spec the parts ran, at
        this tape's sizes (chunks of query rows). Its counts are the parts' sums: beside the whole shape where fewer
        than its dense product (Record.computed), each expert's share (Record.breakdown, of `n_experts`), the range
        of dot-product lengths where they differ; `recurrent[op]`, the (dot products, MACs) of a scan's op in the
        recurrent form. Watchers see each op's value once: `values[op]`, the experts' [T, k*width], or the pieces'
        values side by side along the axis of the symbol `along` ("N") of its whole shape."""
        g = parts.gathered if isinstance(parts, Tape) else parts
        if g is None:
            return
        for op, entry in g.entries.items():
            spec = (whole or {}).get(op, entry.spec)
            if not entry.product:
                out_spec = specs(spec, 1)[0]
                record = self._record(entry.stage, self.dims.shape(out_spec), out_spec)
            else:
                record = self._record_product(g, entry, spec, n_experts, (recurrent or {}).get(op))
            if not g.watched or g.how == CHUNKS:  # a watched pass computes its attention whole, never in chunks
                continue
            value = (values or {}).get(op)
            if value is None and g.how == EXPERTS:
                value = entry.values[0].reshape(record.out_shape) if entry.values else None
            elif value is None and not entry.values:  # shape-only pieces keep no values: the whole's shape stands in
                value = ShapeOnly(record.out_shape)
            elif value is None:
                assert along is not None, f"{op}: the pieces' values go side by side along a symbol, or are given"
                axis = len(self.dims.batch) + symbols(record.spec).index(along)
                value = np.stack(_padded_to_first(entry.values), axis=axis)
            if value is None:
                continue
            self._check(op, value, record.spec)
            if self._watch(entry.stage, value, record) is not value:
                raise UserError(f"a hook replaced {self.prefix}{entry.stage.names[0]}, {_SHOWN_AFTER[g.how]}")

    def _record_product(self, g: Gathered, entry, spec: str, n_experts: int, recurrent) -> Record:
        """The record of a product the parts computed, with the whole computation's shapes `spec`."""
        a_spec, b_spec, out_spec = matmul_spec(spec)
        d = self.dims
        a_shape, out_shape = d.shape(a_spec), d.shape(out_spec)
        b_shape = d.shape(b_spec, entry.b_batched and g.how != EXPERTS)
        if g.how == EXPERTS:
            breakdown = g.breakdown(entry, n_experts)
            record = self._record(entry.stage, out_shape, out_spec, a_shape, b_shape, breakdown=breakdown)
            if breakdown is not None and sum(p.macs for p in breakdown) != record.macs:
                raise AssertionError(f"{self.prefix}{entry.stage.op}: the experts computed {breakdown}, not {spec}")
            return record
        lengths, product = (entry.shortest, entry.longest), (entry.stage, out_shape, out_spec, a_shape, b_shape)
        if g.how == CHUNKS:
            return self._record(*product, computed=(entry.dots, entry.macs), row_chunk=g.rows, lengths=lengths)
        dense = (prod(out_shape), prod(out_shape) * a_shape[-1])
        computed = (entry.dots, entry.macs) if g.counting and (entry.dots, entry.macs) != dense else None
        uneven = g.counting and lengths != (a_shape[-1], a_shape[-1])  # a solve's rows: 1 .. C - 1 long
        return self._record(*product, computed, recurrent=recurrent, lengths=lengths if uneven else None)

    def top_k(self, stage: str, scores, k: int, order: str = "score"):
        """The indices [..., k] of each row's k largest scores [..., n], by the package's one rule (selection.py: equal
        scores, the lowest index first), highest first or in index `order`. Where this pass keeps a ledger, what the
        choice decided is written in it under `stage` (Phase.selections): each row's ties and near ties at the k-th
        place, near as the format the scores are held in resolves them. Shape-only scores choose nothing, and k of k
        (DeepSeek-V3's one group of one) decides nothing: neither is written."""
        chosen = top_k(scores, k, order)
        if self.phase is not None and not isinstance(scores, ShapeOnly) and k < scores.shape[-1]:
            held = self.precision.values if self.precision is not None else None  # None: the scores' own dtype
            name = held.name if held else scores.dtype.name
            epsilon = held.epsilon if held else float(np.finfo(scores.dtype).eps)
            self.phase.selections.append(selected(stage, self.layer_index, scores, k, self.dims.past, name, epsilon))
        return chosen

    def in_float32(self) -> Tape:
        """The tape of a region computed in float32 whatever the pass's precision: its products' operands and outputs
        and its stages' values are not rounded (a weight kept narrow is still widened), so it reads its inputs as the
        stages before it rounded them, and its output is rounded once, by the stage after it or by `in_format`. Where
        transformers upcasts a piece itself and real kernels keep it in float32 registers (a delta rule's whole
        chunked scan: transformers' torch_chunk_gated_delta_rule, flash-linear-attention's kernels), the emulation
        does too (docs/precision.md). At float32 the tape itself: nothing changes."""
        if self.precision is None:
            return self
        return replace(self, precision=widening())

    def in_format(self, value, op: str):
        """A value computed between the tape's records (a row of a solve written in place), stored in the pass's
        number format as a stage's output is (engine/precision.py); in float32, as it is."""
        return value if self.precision is None else self.precision.value(value, self.prefix + op)

    def scratch(self, x):
        """x itself when nobody watches this pass, so that the next stage may write its result over x;
        else None (a watcher may hold x, so it must stay as it was). A ledger holds no tensors."""
        return x if self.watcher is None else None

    def _check(self, what: str, value, spec: str, batched: bool = True) -> None:
        want = self.dims.shape(spec, batched)
        if value.shape != want:
            raise AssertionError(
                f"{self.prefix}{what}: shape {list(value.shape)} but the equations say "
                f"{self.dims.symbolic(spec)} = {list(want)}"
            )

    def declaring(self, stages: Mapping[str, Stage]) -> Tape:
        """The tape of a part whose stages, by op, are `stages` (its declaration, families/parts/): its forward pass
        names each stage by its op."""
        return replace(self, declared=stages)

    def stage_of(self, op: str | Stage) -> Stage:
        """The stage a forward pass names: a Stage, or an op its part declared (Tape.declaring), or, for a family of
        the old layout, an op of the tape's stage table."""
        if isinstance(op, Stage):
            return op
        if self.declared is not None and op in self.declared:
            return self.declared[op]
        assert self.stage_table is not None, f"{op}: no part declared it, and the tape has no stage table"
        return self.stage_table.stages[op]

    def _record(
        self,
        stage: Stage,
        out_shape,
        spec: str,
        a_shape=None,
        b_shape=None,
        computed=None,
        row_chunk=None,
        breakdown=None,
        recurrent=None,
        lengths=None,
    ) -> Record:
        attention = stage.op in ("scores", "mix")
        window = self.dims.window if attention else None
        chunked = (self.dims.chunk, self.dims.past) if attention and self.dims.chunk is not None else None
        record = Record(
            stage,
            self.layer_index,
            tuple(out_shape),
            spec,
            a_shape,
            b_shape,
            window,
            computed,
            row_chunk,
            lengths=lengths,
            breakdown=breakdown,
            recurrent=recurrent,
            selected=self.dims.selected if attention else None,
            chunked=chunked,
            dims=self.dims if self.watcher is not None else None,
        )
        if self.phase is not None:
            self.phase.records.append(record)
        return record

    def _watch(self, stage: Stage, value, record: Record):
        if self.watcher is None:
            return value
        if isinstance(value, tuple):
            return tuple(self.watcher(self.prefix + n, v, record) for n, v in zip(stage.names, value))
        return self.watcher(self.prefix + stage.names[0], value, record)

    @property
    def unobserved(self) -> bool:
        """Nobody keeps a ledger of this pass or watches it: the bookkeeping can be skipped."""
        return self.phase is None and self.watcher is None

    def stage(self, op: str | Stage, value, spec: str, replaceable: bool = True, indices: range | None = None):
        """A stage that is not a matrix product: check its shape(s), record it with zero dot products. `op`: the
        stage, declared at the line (engine/stages.py's `step`), or its op in the tape's stage table.

        A stage with several outputs (a tuple) states one spec for all, or one each: "H T dh; Hkv T dh".
        replaceable=False: a stage shown after every position of it was computed, each from the one before (a scan
        position by position): a hook may read it, and a replacement, which could not reach the positions after it,
        is refused, as a gathered stage's is.
        indices: a selection's (first) output holds indices into this range (the experts, the keys; -1 where a
        query has no choice): a replacement must too, or it would read no expert, or another row, without a word.
        """
        name = op.op if isinstance(op, Stage) else op
        values = value if isinstance(value, tuple) else (value,)
        shapes = specs(spec, len(values))
        for v, each in zip(values, shapes):
            self._check(name, v, each)
        if self.precision is not None:  # the stage's values stored in the format
            rounded = tuple(self.precision.value(v, self.prefix + name) for v in values)
            value = rounded if isinstance(value, tuple) else rounded[0]
        if self.unobserved and self.gathered is None:
            return value
        stage = self.stage_of(op)
        if self.gathered is not None:  # one part: shown with the others, after the last (record_gathered)
            self.gathered.add(stage, spec, value, routed=self.routed)
            return value
        record = self._record(stage, values[0].shape, spec)
        shown = self._watch(stage, value, record)
        if not replaceable and shown is not value:
            raise UserError(f"a hook replaced {self.prefix}{stage.names[0]}, {_SHOWN_AFTER[PIECES]}")
        if indices is not None:
            chosen, before = (shown[0], value[0]) if isinstance(value, tuple) else (shown, value)
            if chosen is not before and not isinstance(chosen, ShapeOnly):
                _check_indices(self.prefix + stage.names[0], chosen, indices)
        return shown

    def matmul(
        self,
        stage_or_op: str | Stage,
        a,
        b,
        spec: str,
        bias=None,
        dense: str | None = None,
        recurrent: tuple[int, int] | None = None,
    ):
        """out = a @ b (+ bias), counted: spec reads "T D, D 3D -> T 3D" (a, b -> out, symbolically). The stage:
        declared at the line (engine/stages.py's `product`), or its op in the tape's stage table.

        `dense`: where the product computes only part of a dense one (attention over the keys an indexer chose for each
        query, "H T 1 dh, H T dh s -> H T 1 s", of the dense "H T dh, H dh t -> H T t"), the dense product's spec: the
        record keeps its shapes, with the dot products computed beside them (Record.computed), as row chunks' do.
        `recurrent`: the (dot products, MACs) of this op's work in the recurrent form, where it belongs to a scan
        computed in chunks (Record.recurrent; (0, 0) for a product the recurrent form does not have)."""
        op = stage_or_op.op if isinstance(stage_or_op, Stage) else stage_or_op
        a_spec, b_spec, out_spec = matmul_spec(spec)
        self._check(f"{op} (A)", a, a_spec)
        # B has the batch's axes where it has more than its shape names (K^T, a state); a weight has none: it is
        # shared by the batch (a matrix, or a depthwise conv's kernel [C, K, 1])
        b_batched = b.ndim > len(symbols(b_spec))
        self._check(f"{op} (B)", b, b_spec, batched=b_batched)
        if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
            out = ShapeOnly(dot_product_count(a.shape, b.shape)[0])
        else:
            a, b, out = self._product(op, a, b, bias)
        self._check(op, out, out_spec)
        if self.unobserved and self.gathered is None:
            return out
        stage = self.stage_of(stage_or_op)
        if self.gathered is not None:  # one part: summed into the whole computation's record (record_gathered)
            _, dots, length = dot_product_count(a.shape, b.shape)
            self.gathered.add(stage, dense or spec, out, (dots, length), b_batched, self.routed)
            return out
        if dense is None:
            record = self._record(stage, out.shape, out_spec, tuple(a.shape), tuple(b.shape), recurrent=recurrent)
        else:  # the dense product's shapes, what was computed beside them
            _, dots, length = dot_product_count(a.shape, b.shape)
            a_dense, b_dense, out_dense = matmul_spec(dense)
            shapes = (
                self.dims.shape(out_dense),
                out_dense,
                self.dims.shape(a_dense),
                self.dims.shape(b_dense, b_batched),
            )
            record = self._record(stage, *shapes, computed=(dots, dots * length), lengths=(length, length))
        return self._watch(stage, out, record)

    def _product(self, op: str, a, b, bias):
        """a @ b (+ bias) on the BLAS, float32 sums: (a and b as multiplied, out). Under a precision the operands are
        rounded to its format (a large narrow weight widened a block of its columns at a time, each block only as its
        product comes), and the output, bias added, too."""
        blocks = None
        if self.precision is not None:
            a = self.precision.operand(a, self.prefix + op, "A")
            # a weight whose float32 copy is exact goes to the product narrow where the product widens it itself, a
            # block at a time as it reads it (threads.widens_itself: a decode step's row, a prompt's column blocks)
            if not (self.precision.only_widens(b) and widens_itself(fold_shared_axes(a, b)[0], b)):
                blocks = self.precision.column_blocks(b)
                b = b if blocks else self.precision.operand(b, self.prefix + op, "B")
        a_rows, b_rows, out_shape = fold_shared_axes(a, b)
        pieces: Iterator[Any]
        if blocks:
            widen = self.precision.operand  # type: ignore[union-attr]
            pieces = (widen(b_rows[..., cols], self.prefix + op, "B") for cols in blocks)
        else:
            pieces = iter((b_rows,))
        outs = [sized_for_threads(np.matmul, a_rows, piece, np.dot) for piece in pieces]  # the BLAS's threads
        out = outs[0] if len(outs) == 1 else np.concatenate(outs, axis=-1)
        out = out if out_shape is None else out.reshape(out_shape)
        if bias is not None:
            out += bias  # out is fresh: adding in place saves a [T, out] temporary
        if self.precision is not None:
            out = self.precision.value(out, self.prefix + op)
        return a, b, out


def _padded_to_first(values: list) -> list:
    """Pieces' values of the first piece's shape, to be shown side by side: a shorter piece (a scan's last block of
    fewer positions, lightning attention's) padded with zeros past its own rows and columns."""
    full = values[0].shape
    return [v if v.shape == full else np.pad(v, [(0, f - n) for n, f in zip(v.shape, full)]) for v in values]


def _check_indices(name: str, chosen: np.ndarray, indices: range) -> None:
    """A replaced selection's indices: whole numbers in `indices`, or refused in words."""
    if chosen.size and (chosen.min() < indices.start or chosen.max() >= indices.stop):
        raise UserError(
            f"a hook replaced {name} with {int(chosen.min())} to {int(chosen.max())}: its values are indices "
            f"{indices.start} to {indices.stop - 1}"
        )
