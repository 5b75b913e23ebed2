"""The tape of one forward pass: each stage goes through it, is shape-checked, recorded and shown to watchers.

`Tape.matmul` is the one door through which every matrix product of the model passes: it computes
the product, on the threads it is sized for (threads.py), and records its dot products in the ledger.
Attention over a long prompt runs in chunks of query rows through the same door (row_chunks.py, beside
this). Nothing else in the package multiplies matrices (a test reads the source to hold us to that).

Shapes are written symbolically on each line of the forward pass ("H T dh") and checked here
against the concrete sizes of this pass, so a shape in the code cannot drift from the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import prod

import numpy as np

from ..errors import UserError
from .experts import ExpertParts
from .kvcache import first_attended
from .ledger import Phase, Record, dot_product_count
from .pieces import Pieces
from .precision import Precision
from .row_chunks import in_row_chunks, on_chosen_keys
from .selection import selected, top_k
from .shapes import ShapeOnly
from .spec import matmul_spec, specs, symbols
from .stages import StageTable
from .threads import sized_for_threads

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
    stage_table: StageTable | None = None  # the table the forward pass names its stages from (the model's)
    # Inside a chunk of query rows (in_row_chunks): op -> [spec, b batched, dot products, MACs, shortest and longest
    # dot product], over the chunks, for the one record per op that the whole pass's tape writes after the last chunk.
    rows: dict | None = None
    # Each layer's sliding window, where the layers differ (config.layer_window); None: every layer has dims.window.
    windows: tuple | None = None
    dense: bool = False  # attention as transformers' eager attention computes it: every T x t score, never in chunks
    # Counting from a config alone, a mixture of experts has no router to ask: which tokens each expert gets is
    # assumed, "balanced" (T k / E each) or "worst" (all T to the same k experts). A real run's router decides.
    routing: str = "balanced"
    # Inside a layer's experts (Tape.experts): what each expert computed, for the one record per op that the layer's
    # tape writes (record_experts); None where nobody keeps a ledger or watches. engine/experts.py says more.
    parts: ExpertParts | None = None
    routed: object = None  # the expert whose rows this tape's stages compute (Tape.expert; families/moe.Routed)
    # Inside a computation done piece by piece (Tape.in_pieces: a scan's chunks, a triangular solve's rows): what each
    # piece computed, for the one record per op that the whole pass's tape writes (record_pieces; engine/pieces.py).
    pieces: Pieces | None = None
    # bfloat16, float16, fp8: what products' operands and outputs and stages' values are rounded to (precision.py);
    # also widens weights kept in their 2-byte format. None: float32, nothing rounded.
    precision: Precision | None = None

    def layer(self, i: int) -> Tape:
        """The tape as seen from inside block i: stage names get the prefix "blocks.{i}.", and the sizes are
        those of block i's attention (its window, where layers differ)."""
        dims = self.dims if self.windows is None else self.dims.with_window(self.windows[i])
        return Tape(
            dims,
            self.phase,
            self.watcher,
            i,
            f"blocks.{i}.",
            self.stage_table,
            dense=self.dense,
            routing=self.routing,
            precision=self.precision,
        )

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
        by record_experts (engine/experts.py). Their rows are the whole batch's tokens, flattened: no batch axis."""
        d = self.dims
        parts = (
            None
            if self.unobserved
            else ExpertParts(prod(d.batch) * d.T, d.k or 0, self.phase is not None, self.watcher is not None)
        )
        return replace(self, dims=replace(d, batch=(), _shapes={}), phase=None, watcher=None, parts=parts)

    def expert(self, routed) -> Tape:
        """The tape of one expert's stages over the tokens routed to it (`routed`: its .expert, .tokens, .rows and
        .slots, families/moe.Routed): the symbol Te is their number."""
        return replace(self.with_sizes(Te=routed.tokens), routed=routed)

    def record_experts(self, experts: Tape, whole: dict[str, str], n_experts: int) -> None:
        """One record per op that `experts` ran (Tape.experts), with the shapes `whole` states for the layer
        ("T D, D k*F -> T k*F": each token's rows in its k experts, which is what the experts computed between
        them whichever they were), each product's breakdown (every expert's tokens, dot products and MACs), and
        each op's values shown to the watchers as one [T, k*width] tensor."""
        parts = experts.parts
        if parts is None:
            return
        for op, (counted, _) in parts.ops.items():
            if counted is None:  # a stage that is not a product
                out_spec = whole[op]
                record = self._record(op, self.dims.shape(out_spec), out_spec)
            else:
                a_spec, b_spec, out_spec = matmul_spec(whole[op])
                breakdown = parts.breakdown(op, n_experts)
                record = self._record(
                    op,
                    self.dims.shape(out_spec),
                    out_spec,
                    self.dims.shape(a_spec),
                    self.dims.shape(b_spec, batched=False),
                    breakdown=breakdown,
                )
                if breakdown is not None and sum(p.macs for p in breakdown) != record.macs:
                    raise AssertionError(f"{self.prefix}{op}: the experts computed {breakdown}, not {whole[op]}")
            values = parts.values(op, self.dims.shape(out_spec))
            if values is not None and self._watch(op, values, record) is not values:
                raise UserError(
                    f"a hook replaced {self.prefix}{record.stage.names[0]}, a stage each expert "
                    f"computes on its own tokens, shown after they all ran: a replacement cannot take effect "
                    f"(hook the router's stages or moe.out instead)"
                )

    def in_pieces(self) -> Tape:
        """The tape of a computation done piece by piece (a scan over chunks, a solve row by row: engine/pieces.py):
        each piece's products and stages run on it (with that piece's sizes, Tape.with_sizes), and are written, and
        shown to watchers, as one record per op by record_pieces after the last piece."""
        pieces = None if self.unobserved else Pieces(self.phase is not None, self.watcher is not None)
        return replace(self, phase=None, watcher=None, pieces=pieces)

    def record_pieces(self, pieces: Tape, whole: dict[str, str], along: str | None = None, values: dict | None = None,
                      recurrent: dict[str, tuple[int, int]] | None = None) -> None:  # fmt: skip
        """One record per op that `pieces` (Tape.in_pieces) ran, with the shapes `whole` states for all the pieces
        together ("Hv N C dk, Hv N dk dv -> Hv N C dv"), the dot products and MACs the pieces computed (fewer than that
        shape's dense product: Record.computed), and `recurrent`'s (dot products, MACs) for an op of a scan computed in
        chunks (Record.recurrent). Watchers see each op's value once: `values[op]`, or the pieces' values side by side
        along the axis of the symbol `along` ("N") of its whole shape."""
        done = pieces.pieces
        if done is None:
            return
        for op in done.ops:
            counted = done.counted(op)
            if counted is None:  # a stage that is not a product
                out_spec = whole[op]
                record = self._record(op, self.dims.shape(out_spec), out_spec)
            else:
                a_spec, b_spec, out_spec = matmul_spec(whole[op])
                dots, macs, b_batched, lengths = counted
                a_shape, out_shape = self.dims.shape(a_spec), self.dims.shape(out_spec)
                dense = (prod(out_shape), prod(out_shape) * a_shape[-1])
                computed = (dots, macs) if done.counting and (dots, macs) != dense else None
                uneven = done.counting and lengths != (a_shape[-1], a_shape[-1])  # a solve's rows: 1 .. C - 1 long
                record = self._record(op, out_shape, out_spec, a_shape, self.dims.shape(b_spec, b_batched), computed,
                                      recurrent=(recurrent or {}).get(op), lengths=lengths if uneven else None)  # fmt: skip
            if not done.watched:
                continue
            value = (values or {}).get(op)
            if value is None:
                assert along is not None, f"{op}: the pieces' values go side by side along a symbol, or are given"
                value = np.stack(done.values(op), axis=len(self.dims.batch) + symbols(out_spec).index(along))
            self._check(op, value, out_spec)
            if self._watch(op, value, record) is not value:
                raise UserError(f"a hook replaced {self.prefix}{record.stage.names[0]}, a stage computed piece by "
                                f"piece (a scan's chunks, a solve's rows), shown after the last piece: a replacement "
                                f"cannot take effect (hook a stage before or after it instead)")  # fmt: skip

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

    def _record(self, op: str, out_shape, spec: str, a_shape=None, b_shape=None, computed=None,
                row_chunk=None, breakdown=None, recurrent=None, lengths=None) -> Record:  # fmt: skip
        attention = op in ("scores", "mix")
        window = self.dims.window if attention else None
        assert self.stage_table is not None, "a tape that records names its stage table (Tape.stage_table)"
        record = Record(self.stage_table.stages[op], self.layer_index, tuple(out_shape), spec, a_shape, b_shape, window,
                        computed, row_chunk, lengths=lengths, breakdown=breakdown, recurrent=recurrent,
                        selected=self.dims.selected if attention else None)  # fmt: skip
        if self.phase is not None:
            self.phase.records.append(record)
        return record

    def _watch(self, op: str, value, record: Record):
        if self.watcher is None:
            return value
        assert self.stage_table is not None
        names = self.stage_table.stages[op].names
        if isinstance(value, tuple):
            return tuple(self.watcher(self.prefix + n, v, record) for n, v in zip(names, value))
        return self.watcher(self.prefix + names[0], value, record)

    @property
    def unobserved(self) -> bool:
        """Nobody keeps a ledger of this pass or watches it: the bookkeeping can be skipped."""
        return self.phase is None and self.watcher is None

    def stage(self, op: str, value, spec: str):
        """A stage that is not a matrix product: check its shape(s), record it with zero dot products.

        A stage with several outputs (a tuple) states one spec for all, or one each: "H T dh; Hkv T dh".
        """
        values = value if isinstance(value, tuple) else (value,)
        shapes = specs(spec, len(values))
        for v, each in zip(values, shapes):
            self._check(op, v, each)
        if self.precision is not None:  # the stage's values stored in the format
            rounded = tuple(self.precision.value(v, self.prefix + op) for v in values)
            value = rounded if isinstance(value, tuple) else rounded[0]
        if self.rows is not None:
            self.rows.setdefault(op, [spec, False, None, None, None, None])
        if self.parts is not None:  # one expert's rows: shown with the others' (record_experts)
            self.parts.add(op, value, self.routed, None)
            return value
        if self.pieces is not None:  # one piece: shown with the others (record_pieces)
            self.pieces.add(op, value, None)
            return value
        if self.unobserved:
            return value
        record = self._record(op, values[0].shape, spec)
        return self._watch(op, value, record)

    def matmul(self, op: str, a, b, spec: str, bias=None, dense: str | None = None,
               recurrent: tuple[int, int] | None = None):  # fmt: skip
        """out = a @ b (+ bias), counted: spec reads "T D, D 3D -> T 3D" (a, b -> out, symbolically).

        `dense`: where the product computes only part of a dense one (attention over the keys an indexer chose for each
        query, "H T 1 dh, H T dh s -> H T 1 s", of the dense "H T dh, H dh t -> H T t"), the dense product's spec: the
        record keeps its shapes, with the dot products computed beside them (Record.computed), as row chunks' do.
        `recurrent`: the (dot products, MACs) of this op's work in the recurrent form, where it belongs to a scan
        computed in chunks (Record.recurrent; (0, 0) for a product the recurrent form does not have)."""
        a_spec, b_spec, out_spec = matmul_spec(spec)
        self._check(f"{op} (A)", a, a_spec)
        # B has the batch's axes where it has more than its shape names (K^T, a state); a weight has none: it is
        # shared by the batch (a matrix, or a depthwise conv's kernel [C, K, 1])
        b_batched = b.ndim > len(symbols(b_spec))
        self._check(f"{op} (B)", b, b_spec, batched=b_batched)
        if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
            out = ShapeOnly(dot_product_count(a.shape, b.shape)[0])
        else:
            blocks = None  # a large weight kept narrow: widened a block of its columns at a time (precision.py)
            if self.precision is not None:  # the operands rounded to the format, or narrow weights widened
                a = self.precision.operand(a, self.prefix + op, "A")
                blocks = self.precision.column_blocks(b)
                b = b if blocks else self.precision.operand(b, self.prefix + op, "B")
            a_rows, b_rows, out_shape = fold_shared_axes(a, b)
            # each block of a large narrow weight widened only as its product comes (a generator), then joined
            pieces = (b_rows,) if not blocks else (self.precision.operand(b_rows[..., cols], self.prefix + op, "B")  # type: ignore[union-attr]
                                                   for cols in blocks)  # fmt: skip
            outs = [sized_for_threads(np.matmul, a_rows, piece) for piece in pieces]  # the BLAS's threads; float32 sums
            out = outs[0] if len(outs) == 1 else np.concatenate(outs, axis=-1)  # type: ignore[assignment]  # an array
            out = out if out_shape is None else out.reshape(out_shape)
            if bias is not None:
                out += bias  # out is fresh: adding in place saves a [T, out] temporary
            if self.precision is not None:  # the output, bias added, rounded to the format
                out = self.precision.value(out, self.prefix + op)
        self._check(op, out, out_spec)
        if self.rows is not None:  # a chunk of query rows: summed into the whole pass's record (in_row_chunks)
            _, dots, length = dot_product_count(a.shape, b.shape)
            counted = self.rows.setdefault(op, [dense or spec, b_batched, 0, 0, length, length])
            counted[2] += dots
            counted[3] += dots * length
            counted[4], counted[5] = min(counted[4], length), max(counted[5], length)  # chunks see more keys, or fewer
        if self.parts is not None:  # one expert's rows: summed into the layer's record (record_experts)
            _, dots, length = dot_product_count(a.shape, b.shape)
            self.parts.add(op, out, self.routed, (dots, dots * length))
            return out
        if self.pieces is not None:  # one piece: summed into the whole computation's record (record_pieces)
            _, dots, length = dot_product_count(a.shape, b.shape)
            self.pieces.add(op, out, (dots, dots * length), b_batched, length)
            return out
        if self.unobserved:
            return out
        if dense is None:
            record = self._record(op, out.shape, out_spec, tuple(a.shape), tuple(b.shape), recurrent=recurrent)
        else:  # the dense product's shapes, what was computed beside them
            _, dots, length = dot_product_count(a.shape, b.shape)
            a_dense, b_dense, out_dense = matmul_spec(dense)
            d = self.dims
            record = self._record(op, d.shape(out_dense), out_dense, d.shape(a_dense), d.shape(b_dense, b_batched),
                                  computed=(dots, dots * length), lengths=(length, length))  # fmt: skip
        return self._watch(op, out, record)
