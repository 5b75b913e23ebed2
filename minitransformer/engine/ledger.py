"""The ledger: every stage of every forward pass, with the dot products of each matrix product.

The rule it applies: (m x n)(n x p) is m*p dot products, each of length n, so m*p*n
multiply-accumulates (MACs); leading batch and head dimensions multiply the count. FLOPs are
2 x MACs (one multiply and one add each). Stages that are not matrix products (norms, softmax,
masking, residual adds, reshapes) are recorded in their place with zero dot products.

The ledger is data: `to_dict()` is the JSON the CLI writes; tables and plots are views of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from math import prod
from typing import Any, overload

import numpy as np

from ..errors import UserError
from .selection import Selection, Tie
from .stages import ATTENTION_SCORES, B_OPERANDS, READS_STATE, STATE, Stage


def dot_product_count(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[tuple[int, ...], int, int]:
    """(out_shape, dot products, dot-product length) of a matrix product a @ b.

    Every element of the output is one dot product of a row of `a` with a column of `b`; their
    length is the shared inner dimension.
    """
    *a_lead, m, n = a_shape
    *b_lead, n_b, p = b_shape
    if n != n_b:
        raise ValueError(f"inner dimensions differ: {list(a_shape)} x {list(b_shape)}")
    lead = _broadcast(tuple(a_lead), tuple(b_lead))
    out_shape = (*lead, m, p)
    return out_shape, prod(out_shape), n


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if a == b or not b:  # the common cases at once (a long prompt's count asks for every product of every chunk)
        return a
    if not a:
        return b
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise ValueError(f"batch dimensions do not broadcast: {list(a)} and {list(b)}")
    return tuple(y if x == 1 else x for x, y in zip(a, b))  # 1 gives way to the other, even to 0


@dataclass(frozen=True, slots=True)
class Part:
    """One expert's share of a product computed expert by expert (a mixture of experts' layer): the tokens the
    router sent it, and the dot products and MACs of its rows. A Record's `breakdown` lists them."""

    expert: int
    tokens: int
    dot_products: int
    macs: int

    def to_dict(self) -> dict:
        return {"expert": self.expert, "tokens": self.tokens, "dot_products": self.dot_products, "macs": self.macs}


@dataclass(slots=True)  # slots: a long generation on a big model holds millions of records
class Record:
    """One stage of one forward pass: what it was and the shapes it made; the counts follow from them.

    Only the shapes are stored, so that recording costs next to nothing in the forward pass; dot
    products, their length, MACs and the causal share are read off the shapes by the rule above.
    """

    stage: Stage  # its entry in the family's table (stages.py): op, kind, equation, names
    layer: int | None
    out_shape: tuple[int, ...]
    spec: str = ""  # the output shape in symbols ("H T t"; one each for several outputs: "H T dh; Hkv T dh")
    a_shape: tuple[int, ...] | None = None  # the operands, for matrix products
    b_shape: tuple[int, ...] | None = None
    window: int | None = None  # on scores and mix: the sliding window, if the model has one
    # (dot products, MACs) actually computed, where the pass skipped part of the dense product the shapes
    # describe (scores and mix in query-row chunks, each against only the keys it can see); None: all of it.
    computed: tuple[int, int] | None = None
    row_chunk: int | None = None  # the query rows per chunk where `computed` says the pass ran in chunks
    # (shortest, longest) dot product computed where the pass computed less than the dense product (`computed`): each
    # row chunk's A V sums over the keys that chunk sees, so a chunked mix has dot products of several lengths, and
    # attention over an indexer's chosen keys sums over those; None where the product ran whole (dot_length each).
    lengths: tuple[int, int] | None = None
    # A product computed in parts, expert by expert (Tape.experts): each expert's tokens, dot products and MACs,
    # which sum to the record's. Which tokens went where depends on the data (or, counting from a config alone, on
    # the routing assumed), not on the shapes: two records of the same shapes are equal whatever their breakdown.
    breakdown: tuple[Part, ...] | None = field(default=None, compare=False)
    # (dot products, MACs) of this op's work in the recurrent form, where the pass computed a scan in chunks (a
    # linear-attention or state-space layer over a prompt): what the same positions cost token by token, as a decode
    # step computes them (0, 0 for a product the recurrent form does not have); None: the pass computed it that way.
    recurrent: tuple[int, int] | None = None
    # On scores and mix of sparse attention: the most keys a query attends to, those an indexer chose (DeepSeek-V3.2's
    # index_topk); None: every key it can see. The shapes stay the dense form's; `computed` says what was computed.
    selected: int | None = None
    # On scores and mix of chunked attention (Llama 4's): (C, the position of the pass's first query), each query
    # reading the keys of its own chunk of C positions alone (row_chunks.py); None: no chunks.
    chunked: tuple[int, int] | None = None
    # The sizes of the symbols as the stage's own layer saw them (tape.Dims: its window, its head sizes, a dense MLP's
    # width among experts), kept only where someone watched the pass (a trace shows its operands in them); None else.
    dims: Any = field(default=None, compare=False, repr=False)

    def output_spec(self, index: int = 0) -> str:
        """The symbolic shape of output `index` (stages such as split_heads make several)."""
        specs = self.spec.split(";")
        return specs[index if len(specs) > 1 else 0].strip()

    @property
    def op(self) -> str:
        """The vocabulary of stages.py: "qkv", "q", "scores", "mlp.up", "softmax", ..."""
        return self.stage.op

    @property
    def name(self) -> str:
        """The full stage name: "blocks.3.attn.qkv", "ln_f"."""
        first = self.stage.names[0]
        return first if self.layer is None else f"blocks.{self.layer}.{first}"

    @property
    def kind(self) -> str:
        return self.stage.kind

    @property
    def equation(self) -> str:
        return self.stage.equation

    @property
    def attention(self) -> str:
        """Its part in attention over the attended keys (Stage.attention): "scores" (S = Q K^T), "mix" (Z = A V), or ""
        for any other stage, whatever the family names its ops."""
        return self.stage.attention

    @property
    def heads(self) -> int | None:
        """The head count of a per-head product (one record for all heads), else None.

        The symbols before the last two are the heads: "H T t" has H, "Hkv G T t" (grouped-query
        attention: G query heads against each of Hkv key heads) has Hkv x G = H.
        """
        symbols = self.spec.split()
        if self.a_shape is None or len(symbols) <= 2:
            return None
        return prod(self.out_shape[len(self.out_shape) - len(symbols) : -2])

    @property
    def dot_products(self) -> int:
        """Those computed (fewer than the dense ones on scores computed in row chunks)."""
        return self.computed[0] if self.computed is not None else self.dense_dot_products

    @property
    def dot_length(self) -> int:
        """The length of the dense form's dot products (the longest, where row chunks made some shorter)."""
        return self.a_shape[-1] if self.a_shape is not None else 0

    @property
    def dot_lengths(self) -> tuple[int, int]:
        """(shortest, longest) of the dot products computed: (dot_length, dot_length) unless row chunks made some
        shorter, as A V's are in every chunk that sees fewer keys than the last, or attention read chosen keys."""
        return self.lengths if self.lengths is not None else (self.dot_length, self.dot_length)

    @property
    def chunks(self) -> int | None:
        """The chunks of query rows the pass computed this product in (None: whole)."""
        if self.row_chunk is None:
            return None
        return -(-self.out_shape[-2] // self.row_chunk)

    @property
    def macs(self) -> int:
        """Those computed: dot products x their length, summed over row chunks where the pass had them."""
        return self.computed[1] if self.computed is not None else self.dense_macs

    @property
    def dense_dot_products(self) -> int:
        """What the textbook dense product of these shapes costs: every element of the output."""
        return prod(self.out_shape) if self.a_shape is not None else 0

    @property
    def dense_macs(self) -> int:
        return self.dense_dot_products * self.dot_length

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def b_operand(self) -> str | None:
        """What B of this product is, read off its stage's group (stages.B_OPERANDS): "weight" (a parameter, shared by
        every row and sequence: read once a pass), "kv_cache" (the keys or values of the attended positions) or
        "state" (a recurrent state: Stage.state), "activations" (a scan's other products); A and the output are
        activations. None for a stage that is not a product."""
        if self.a_shape is None:
            return None
        return "state" if self.stage.state == READS_STATE else B_OPERANDS.get(self.stage.group, "weight")

    @property
    def dense_form_dot_products(self) -> int:
        """This record in the pass's dense form: attention's every T x t score where row chunks or an indexer's choice
        computed fewer (the dense product of its shapes), any other product as computed (a solve row by row is not
        attention)."""
        return self.dense_dot_products if self._attention_cut else self.dot_products

    @property
    def dense_form_macs(self) -> int:
        return self.dense_macs if self._attention_cut else self.macs

    @property
    def _attention_cut(self) -> bool:
        """Attention computed in part: in row chunks, over an indexer's choice of keys, or of entries (DeepSeek-V4's
        4:1 layers: a product over the chosen entries with its dense form stated, Tape.matmul's `dense`)."""
        chosen_entries = self.computed is not None and self.stage.group == ATTENTION_SCORES
        return self.row_chunk is not None or self.selected is not None or chosen_entries

    @property
    def recurrent_dot_products(self) -> int:
        """The recurrent form's (Record.recurrent), where a scan ran in chunks; the computed ones elsewhere."""
        return self.dot_products if self.recurrent is None else self.recurrent[0]

    @property
    def recurrent_macs(self) -> int:
        return self.macs if self.recurrent is None else self.recurrent[1]

    # Causal attention computes the dense T x t scores and masks the future afterwards; these say how
    # much of that work the mask keeps (on attention's scores and mix; None elsewhere). Query row i of T (at
    # position past + i) needs past + i + 1 keys.
    def _needed_pairs(self) -> int:
        assert self.a_shape is not None  # scores and mix are products
        *lead, T, t = self.out_shape if self.attention == "scores" else self.a_shape
        if self.chunked is not None:  # each query its own chunk's keys up to itself
            chunk, past = self.chunked
            return prod(lead) * keys_in_chunks(past, past + T, chunk)
        caps = [cap for cap in (self.window, self.selected) if cap is not None]  # an indexer's choice: like a window
        return prod(lead) * needed_pairs(T, t, min(caps) if caps else None)

    @property
    def _keys(self) -> int:
        """t, the keys attention's product is over: the scores' columns, the rows of V the mix sums."""
        assert self.a_shape is not None  # scores and mix are products
        return self.out_shape[-1] if self.attention == "scores" else self.a_shape[-1]

    @property
    def chosen_keys(self) -> int | None:
        """On scores and mix computed against the keys an indexer chose for each query: how many each attends to
        (min(t, selected)); None where every query attended to all the keys it can see."""
        if self.selected is None or self.computed is None or self.a_shape is None:
            return None
        return self.selected if self._keys > self.selected else None

    @property
    def causal_dot_products(self) -> int | None:
        if self.attention == "scores":
            return self._needed_pairs()
        return self.dense_dot_products if self.attention == "mix" else None

    @property
    def causal_macs(self) -> int | None:
        if not self.attention:
            return None
        assert self.a_shape is not None
        d_head = self.a_shape[-1] if self.attention == "scores" else self.out_shape[-1]
        return self._needed_pairs() * d_head

    def to_dict(self, pass_macs: int = 0) -> dict:
        """`pass_macs`: the MACs of the whole forward pass, for this stage's share of it."""
        d = {
            "op": self.op,
            "name": self.name,
            "kind": self.kind,
            "equation": self.equation,
            "a_shape": _list(self.a_shape),
            "b_shape": _list(self.b_shape),
            "out_shape": _list(self.out_shape),
            "heads": self.heads,
            "dot_products": self.dot_products,
            "dot_length": self.dot_length,
            "macs": self.macs,
            "flops": self.flops,
            "share": self.macs / pass_macs if pass_macs else 0.0,
        }
        if self.row_chunk is not None:  # computed in chunks of query rows
            d["row_chunk"] = self.row_chunk
            d["chunks"] = self.chunks
        if self.lengths is not None:  # the lengths of the dot products computed, where not the dense form's
            d["dot_length_min"], d["dot_length_max"] = self.lengths
        if self.causal_dot_products is not None:
            d["causal_dot_products"] = self.causal_dot_products
            d["causal_macs"] = self.causal_macs
            d["dense_dot_products"] = self.dense_dot_products  # equal to dot_products where nothing was skipped
            d["dense_macs"] = self.dense_macs
            if self.selected is not None:  # sparse attention: the keys each query attends to, of the t
                d["selected_keys"] = min(self._keys, self.selected)
        if self.breakdown is not None:
            d["breakdown"] = [part.to_dict() for part in self.breakdown]
        if self.recurrent is not None:  # a scan computed in chunks: this op in the recurrent form
            d["recurrent_dot_products"], d["recurrent_macs"] = self.recurrent
        return d


def keys_in_chunks(first: int, end: int, chunk: int) -> int:
    """(query, key) pairs of one head that chunked attention keeps for the queries at positions first..end - 1: the
    query at p reads the keys of its own chunk of C = `chunk` positions up to itself, p mod C + 1 of them. Summed in
    closed form, S(end) - S(first), S(n) = the pairs of positions 0..n - 1 = (n // C) C (C + 1) / 2 + r (r + 1) / 2,
    r = n mod C: every whole chunk's triangle and the last one's part."""

    def upto(n: int) -> int:
        whole, r = divmod(n, chunk)
        return whole * chunk * (chunk + 1) // 2 + r * (r + 1) // 2

    return upto(end) - upto(first)


def needed_pairs(T: int, t: int, window: int | None = None) -> int:
    """(query, key) pairs of one head that the mask keeps, of the T x t a pass computes.

    Query i of T sits at position p = t - T + i (relative to the first attended key) and sees keys
    0..p: p + 1 of them, or at most `window` (the query itself and the window - 1 before it). Where a
    window cut the attended keys (t = window + T - 1), the same sum holds: every query sees `window`.
    """
    first = t - T + 1  # keys seen by the first query
    if window is None or first + T - 1 <= window:
        return T * first + T * (T - 1) // 2
    uncapped = max(0, window - first + 1)  # queries seeing first, first + 1, ..., window keys
    return (first + window) * uncapped // 2 + (T - uncapped) * window


def _list(shape):
    return None if shape is None else list(shape)


class WeightedSum:
    """A total of a pass (PassTotals) read as an attribute: one attribute of its records summed, each record counted
    as many times as it stands for. A pass's six totals are this one sum, of six attributes (PassTotals lists them)."""

    def __init__(self, attribute: str) -> None:
        self.attribute = attribute  # the record's attribute summed

    @overload
    def __get__(self, totals: None, owner: type) -> WeightedSum: ...
    @overload
    def __get__(self, totals: PassTotals, owner: type | None = None) -> int: ...
    def __get__(self, totals: PassTotals | None, owner: type | None = None) -> WeightedSum | int:
        if totals is None:  # read on the class (help(), a documentation tool): the descriptor itself
            return self
        return sum(n * getattr(r, self.attribute) for r, n in totals.weighted())


class PassTotals:
    """The totals of one forward pass, over its records, each counted as many times as it stands for (`weighted`):
    a ledger's Phase holds each record once, a count's folded Pass a block's records for every layer of its kind."""

    def weighted(self) -> Iterable[tuple[Record, int]]:
        raise NotImplementedError

    dot_products = WeightedSum("dot_products")
    macs = WeightedSum("macs")
    # The dense form's (every T x t score), where row chunks computed fewer; the same as the computed ones elsewhere
    dense_dot_products = WeightedSum("dense_form_dot_products")
    dense_macs = WeightedSum("dense_form_macs")
    # Had every scan computed in chunks run token by token instead (Record.recurrent); the computed ones elsewhere
    recurrent_dot_products = WeightedSum("recurrent_dot_products")
    recurrent_macs = WeightedSum("recurrent_macs")

    @property
    def flops(self) -> int:
        return 2 * self.macs


@dataclass
class Phase(PassTotals):
    """One forward pass: the prefill (step 0) or decode step k."""

    # Where the pass stands in its run: the fields that open its JSON (a count's folded pass's too, its twin's)
    PLACE = ("phase", "step", "tokens", "context", "batch", "cached")

    phase: str  # "prefill" | "decode"
    step: int
    tokens: int  # positions computed in this pass (T)
    context: int  # positions attended to (t = past + T)
    batch: int = 1
    cached: bool = True
    records: list[Record] = field(default_factory=list)
    # A batch of prompts of different lengths (verbs/passes.py): each row's left padding, and
    # the rows that had finished (reached end-of-text) before this pass but kept computing. Empty: one prompt.
    pads: tuple[int, ...] = ()
    finished: tuple[bool, ...] = ()
    # What each selection stage of the pass decided (a router's experts, an indexer's keys: engine/selection.py), with
    # its ties and near ties at the k-th place; none in a shape-only pass, which has no scores to choose by.
    selections: list[Selection] = field(default_factory=list)

    def _counted(self, row: int, slot: int) -> bool:
        """A slot of a prompt's token or of one generated, in a row still going: not padding."""
        return not self.pads or (slot >= self.pads[row] and not self.finished[row])

    def _position(self, row: int, slot: int) -> int:
        """A slot's position in its row's own sequence (in a left-padded batch, counted from its first token)."""
        return slot - self.pads[row] if self.pads else slot

    @property
    def ties(self) -> list[Tie]:
        """Every choice of the pass that tied or near-tied at its k-th place, in the order the pass made them (the pad
        slots' and finished rows' choices, which decide nothing anyone reads, left out)."""
        return [
            replace(tie, position=self._position(tie.row, tie.position))
            for s in self.selections
            for tie in s.ties
            if self._counted(tie.row, tie.position)
        ]

    def decided(self, s: Selection) -> int:
        """How many of a selection's rows decided anything (more than k could be chosen), padding left out."""
        rows, T = s.decides.shape
        slots = self.context - self.tokens + np.arange(T)
        counted = np.ones((rows, T), dtype=bool)
        if self.pads:
            counted = (slots[None, :] >= np.array(self.pads)[:, None]) & ~np.array(self.finished)[:, None]
        return int(np.count_nonzero(s.decides & counted))

    def selections_dict(self, layer: int | None) -> list[dict]:
        """The JSON of a layer's selections in this pass: each stage's k of n, the rows that decided, how many of them
        tied exactly at the k-th place and how many near."""
        out = []
        ties = self.ties
        for s in self.selections:
            if s.layer != layer:
                continue
            mine = [t for t in ties if t.layer == layer and t.stage == s.stage]
            exact = sum(t.exact for t in mine)
            out.append(
                {
                    "stage": s.stage,
                    "k": s.k,
                    "of": s.n,
                    "made": self.decided(s),
                    "exact_ties": exact,
                    "near_ties": len(mine) - exact,
                }
            )
        return out

    def ties_dict(self) -> list[dict]:
        """The JSON's list of the pass's ties: {layer, stage, position, margin (0: exact), scale} (and the row, in a
        batch)."""
        return [
            ({"row": t.row} if self.batch > 1 else {})
            | {"layer": t.layer, "stage": t.stage, "position": t.position, "margin": t.margin, "scale": t.scale}
            for t in self.ties
        ]

    @property
    def padding(self) -> Totals:
        """The dot products and MACs of this pass spent on padding (see padding_of); zero for one prompt."""
        dot_products = macs = 0
        if self.pads:
            # a finished row: every slot up to this pass's last counts as padding
            pads = [self.context if done else pad for pad, done in zip(self.pads, self.finished)]
            for r in self.records:
                n, m = padding_of(r, pads, self.context, self.tokens)
                dot_products, macs = dot_products + n, macs + m
        return Totals(dot_products, macs)

    def weighted(self) -> Iterable[tuple[Record, int]]:
        return ((r, 1) for r in self.records)

    def layer_records(self, layer: int) -> list[Record]:
        return [r for r in self.records if r.layer == layer]

    @property
    def n_layers(self) -> int:
        return len({r.layer for r in self.records if r.layer is not None})

    def find(self, op: str, layer: int | None = None) -> Record:
        """The record of `op` in block `layer` (None: outside the blocks, the embedding's and the logits'), refused in
        words where this pass has none: the ops it has there are named."""
        found = next((r for r in self.records if r.op == op and r.layer == layer), None)
        if found is None:
            where = "outside the blocks" if layer is None else f"in block {layer!r}"
            ops = list(dict.fromkeys(r.op for r in self.records if r.layer == layer))
            listed = f"its ops there: {', '.join(ops)}" if ops else "it has no records there"
            raise UserError(f"this {self.phase} pass has no {op!r} {where} ({listed}; find(op, layer=i) for block i)")
        return found

    def place(self) -> dict:
        return {key: getattr(self, key) for key in self.PLACE}

    def to_dict(self) -> dict:
        outside = [r for r in self.records if r.layer is None]
        by_layer: dict[int, list[Record]] = {}
        for r in self.records:
            if r.layer is not None:
                by_layer.setdefault(r.layer, []).append(r)
        total = self.macs
        layers = []
        for i, records in sorted(by_layer.items()):
            chosen = self.selections_dict(i)
            layers.append(
                {
                    "layer": i,
                    "ops": [r.to_dict(total) for r in records],
                    "dot_products": sum(r.dot_products for r in records),
                    "macs": sum(r.macs for r in records),
                    "flops": sum(r.flops for r in records),
                    "share": sum(r.macs for r in records) / total if total else 0.0,
                }
                | ({"selections": chosen} if chosen else {})
            )
        logits = next((r for r in outside if r.op == "logits"), None)
        return (
            {
                **self.place(),
                "embed": [r.to_dict(total) for r in outside if r.op == "embed"],
                "layers": layers,
                "final": [r.to_dict(total) for r in outside if r.op not in ("embed", "logits")],
                "logits": None if logits is None else logits.to_dict(total),
                "dot_products": self.dot_products,
                "macs": self.macs,
                "flops": self.flops,
            }
            | recurrent_dict(self)
            | ({"ties": self.ties_dict()} if self.selections else {})
            | (
                {}
                if not self.pads
                else {
                    "pads": list(self.pads),
                    "finished": list(self.finished),
                    "padding": padding_dict(self.padding, self.macs),
                }
            )
        )


def padding_of(r: Record, pads: list[int], context: int, tokens: int | None = None) -> tuple[int, int]:
    """(dot products, MACs) of one batched product [B, ..., rows, cols] spent on padding.

    Row b of the batch is padding in its first pads[b] slots (of the `context` slots so far). A MAC
    is spent on padding when it belongs to a pad query (the output row's slot is padding: every product),
    or, in the attention products, pairs a real query with a pad key (scores: the whole dot product of
    that pair; mix: the pad keys' terms of a real query's weighted sum, whose dot product is not
    padding). A dot product is padding when all its MACs are. The output rows are the last `rows`
    slots of the context (logits: the last one only); the keys of scores and mix the last t.

    A recurrent layer's scan (its products of group STATE, laid out by chunks, not by slots) spends on each row's
    pad slots their share of that row's work: pads among the pass's `tokens` slots (0 where `tokens` is not given).
    """
    if r.a_shape is None:
        return 0, 0
    if r.stage.group == STATE:
        if not tokens:
            return 0, 0
        pad_slots = sum(min(max(pad - (context - tokens), 0), tokens) for pad in pads)  # over the batch's rows
        share = len(pads) * tokens
        return r.dot_products * pad_slots // share, r.macs * pad_slots // share
    symbols = r.output_spec().split()
    # The query rows: the output's axis T (an indexer's scores [B, T, Hi, t], hyper-connections' [B, T, N, D]), else
    # the last but one ([B, H, T, t], a product's [B, T, F], the logits' [B, R, V]); the other axes but the last are
    # heads. A product over (query, key) pairs (scores, an indexer's, whose last axis is the keys t) is padding where
    # either is.
    at = symbols.index("T") - len(symbols) if symbols.count("T") == 1 and len(symbols) <= len(r.out_shape) else -2
    rows, cols = r.out_shape[at], r.out_shape[-1]
    heads = prod(r.out_shape[1:]) // (rows * cols)
    pairs = r.attention == "scores" or symbols[-1:] == ["t"]
    keys = cols if pairs else r.a_shape[-1] if r.attention == "mix" else 0
    if r.chosen_keys is not None:  # sparse attention: a pad query's s chosen keys; a real one chooses no pad key
        s = r.chosen_keys  # (but where it sees fewer than s, and then they are masked)
        pad_queries = sum(min(max(pad - (context - rows), 0), rows) for pad in pads)
        if r.attention == "scores":
            return heads * pad_queries * s, heads * pad_queries * s * r.dot_length
        return heads * pad_queries * cols, heads * pad_queries * cols * s
    dot_products = macs = 0
    for pad in pads:
        pad_queries = min(max(pad - (context - rows), 0), rows)
        pad_keys = min(max(pad - (context - keys), 0), keys)
        if pairs:
            n = heads * (pad_queries * cols + (rows - pad_queries) * pad_keys)
            dot_products, macs = dot_products + n, macs + n * r.dot_length
        elif r.attention == "mix":
            dot_products += heads * pad_queries * cols
            macs += heads * (pad_queries * keys + (rows - pad_queries) * pad_keys) * cols
        else:
            dot_products += heads * pad_queries * cols
            macs += heads * pad_queries * cols * r.dot_length
    return dot_products, macs


def recurrent_dict(p) -> dict:
    """The recurrent form's totals of a pass (or of totals), where a scan ran in chunks; nothing elsewhere."""
    if p.recurrent_macs is None or (p.recurrent_dot_products, p.recurrent_macs) == (p.dot_products, p.macs):
        return {}
    return {"recurrent_dot_products": p.recurrent_dot_products, "recurrent_macs": p.recurrent_macs}


def padding_dict(padding: Totals, total_macs: int) -> dict:
    return {
        "dot_products": padding.dot_products,
        "macs": padding.macs,
        "share": padding.macs / total_macs if total_macs else 0.0,
    }


@dataclass
class Totals:
    dot_products: int
    macs: int
    # What the textbook dense form of the same products costs (every T x t score), where the totals are a run's:
    # more than the computed ones where long passes computed attention in row chunks, equal elsewhere.
    dense_dot_products: int | None = None
    dense_macs: int | None = None
    # What the same passes cost had every scan computed in chunks run token by token (Record.recurrent); the computed
    # totals where no pass had one.
    recurrent_dot_products: int | None = None
    recurrent_macs: int | None = None

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def scanned(self) -> bool:
        """Some pass computed a scan in chunks: its recurrent form costs other than what was computed."""
        return self.recurrent_macs is not None and self.recurrent_macs != self.macs

    @property
    def chunked(self) -> bool:
        """Row chunks computed less than the dense form would have."""
        return self.dense_macs is not None and self.dense_macs != self.macs

    def to_dict(self) -> dict:
        dense = (
            {}
            if self.dense_macs is None
            else {"dense_dot_products": self.dense_dot_products, "dense_macs": self.dense_macs}
        )
        return (
            {"dot_products": self.dot_products, "macs": self.macs, "flops": self.flops} | dense | recurrent_dict(self)
        )


def totals_of(phases: Sequence[Phase | Any]) -> Totals:
    """The totals of passes, each of Totals' fields summed over them: the ledger's phases, or count's folded passes
    (count.Pass), which answer the same names."""
    return Totals(**{total.name: sum(getattr(p, total.name) for p in phases) for total in fields(Totals)})


@dataclass
class Ledger:
    """All forward passes of one run, in order, for one model."""

    model: dict  # the model's config, as its to_dict() writes it (families/*/config.py)
    phases: list[Phase] = field(default_factory=list)
    # The same run's totals the other way round (with the cache if this run had none, and vice
    # versa), counted by a shape-only run of the same forward code: what the cache saved.
    other_way: Totals | None = None
    other_way_macs: list[int] | None = None  # the same, pass by pass, in the order of `phases`
    # Every T x t score computed, as transformers' eager attention does (--dense-attention), where the passes would
    # have computed row chunks or an indexer's chosen keys: said in the JSON and on the page, which show it as counted
    dense_attention: bool = False

    @property
    def totals(self) -> Totals:
        return totals_of(self.phases)

    @property
    def cached(self) -> bool:
        return all(p.cached for p in self.phases)

    @property
    def batched(self) -> bool:
        """A batch of prompts (generate with several): the totals then say what padding cost."""
        return any(p.pads for p in self.phases)

    @property
    def padding(self) -> Totals:
        return Totals(sum(p.padding.dot_products for p in self.phases), sum(p.padding.macs for p in self.phases))

    @property
    def finished_padding(self) -> Totals:
        """The part of `padding` spent on rows that had finished and kept computing."""
        n = m = 0
        for p in self.phases:
            rows = [p.context for done in p.finished if done]  # the finished rows only, wholly padding
            for r in p.records if rows else ():
                dn, dm = padding_of(r, rows, p.context, p.tokens)
                n, m = n + dn, m + dm
        return Totals(n, m)

    def cache_comparison(self) -> dict | None:
        if self.other_way is None:
            return None
        steps = None
        if self.other_way_macs is not None:
            steps = cache_steps(self.cached, [(p.step, p.macs) for p in self.phases], self.other_way_macs)
        return cache_comparison(self.cached, self.totals, self.other_way, steps)

    def to_dict(self) -> dict:
        d: dict = {"model": self.model} | ({"dense_attention": True} if self.dense_attention else {})
        d |= {"phases": [p.to_dict() for p in self.phases], "totals": self.totals.to_dict()}
        if self.batched:
            d["totals"]["padding"] = padding_dict(self.padding, self.totals.macs) | {
                "finished_rows": padding_dict(self.finished_padding, self.totals.macs)
            }
        if self.other_way is not None:
            d["cache"] = self.cache_comparison()
        return d

    # Jupyter draws a ledger inline through `_repr_html_`, which views/html_report.py gives this class at its import
    # (register_notebook_display): the data does not import the views that show it, layers above.


def cache_comparison(used: bool, this_way: Totals, other_way: Totals, steps: list[dict] | None = None) -> dict:
    """What the KV cache saves, from the totals of a run (`used`: with the cache) and of the same run the other way;
    `steps` (cache_steps) adds the same pass by pass."""
    with_cache, without = (this_way, other_way) if used else (other_way, this_way)
    saved = without.macs - with_cache.macs
    return {
        "used": used,
        "with_cache": with_cache.to_dict(),
        "without_cache": without.to_dict(),
        "saved_macs": saved,
        "saved_dot_products": without.dot_products - with_cache.dot_products,
        "saved_share": saved / without.macs if without.macs else 0.0,
    } | ({} if steps is None else {"steps": steps})


def cache_steps(used: bool, this_way: list[tuple[int, int]], other_way: list[int]) -> list[dict]:
    """Each pass's MACs with and without the cache: this run's (step, MACs) and the other way's MACs, pass by pass."""
    if len(this_way) != len(other_way):
        raise ValueError(f"{len(this_way)} passes this way but {len(other_way)} the other way")
    return [
        {"step": step, "with_cache_macs": mine if used else other, "without_cache_macs": other if used else mine}
        for (step, mine), other in zip(this_way, other_way)
    ]
