"""The vocabulary of a forward pass: every stage's op name, capture name(s), kind and equation, in order.

This table is the map users read: the ledger, the trace and the JSON all name stages by it, and
the forward pass (families/*/forward.py) records each stage under its op. Only `kind == "matmul"`
stages hold dot products; the others are here so that the map of a block is complete.

Each family has its own table (`StageTable`, in families/*/stages.py): what a GPT-2 block and a Llama block compute differs,
and the equations say how. Stages that play the same part have the same op and capture names in
both (ln_1, scores, softmax, mix, out, mlp.up, mlp.down, resid_post, ...), so a hook or a query
written for one family reads the other.

Dimension symbols used in shapes:
    B  batch (absent for a single prompt)       T  positions computed in this pass
    t  positions attended to (past + T; at most the sliding window + T - 1 where there is one)
    D  d_model      H  query heads      dh  d_head (D / H unless the config says otherwise)
    Hkv  key/value heads (H for GPT-2)          G  query heads per key/value head (H / Hkv)
    F  MLP width    V  vocabulary   R  rows of logits: 1 during generation, T for model.logits()
    C, N  a scan's chunk (positions) and number of chunks in this pass (a recurrent layer's prompt, in chunks)
    Te  rows that depend on the data: the tokens a router sends to expert e (Tape.with_sizes names them)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Stage:
    op: str  # ledger vocabulary (JSON "op")
    names: tuple[str, ...]  # capture name(s) inside the block or model, for run_with_cache and hooks
    kind: str  # matmul | lookup | norm | reshape | rotate | cache | scale | mask | softmax | activation | multiply
    #            | residual (the residual stream takes a branch back in: x = x + branch)
    #            | add (a sum inside a branch, as a scan's or a shared expert's: not the stream's)
    #            | select | scatter (the sum of each token's experts)
    equation: str
    reads: str  # symbolic shape(s) of the input, for traces
    group: str = ""  # for matrix products: which part of the model's arithmetic they are (count's summary)
    reads_stream: bool = False  # it reads the residual stream x itself: where a branch leaves the stream
    # How a recurrent layer's product meets the layer's state (engine/kvcache.py State), for the bytes it moves
    # (verbs/memory.operand_bytes): READS_STATE (its B is the state), WRITES_STATE (its output is the state's update,
    # the state's size, added to it) or CONV_WINDOWS (a causal conv: A is K-wide windows, a view of the conv state's
    # K - 1 inputs and the pass's own); "" for the others (their B is a weight, the KV cache or activations)
    state: str = ""
    # For matrix products: what kind of product it is (PRODUCTS), by which the views colour and recognise it; a
    # product of one of the groups every transformer has (PRODUCT_OF_GROUP) is of that group's kind unless it says.
    product: str = ""
    # For the attention's two products over the attended keys: "scores" (S = Q K^T, the [.., T, t] scores a mask and a
    # softmax follow) or "mix" (Z = A V), by which the ledger and the views recognise attention (its causal share, its
    # window, the keys chosen for it) whatever a family names its stages; "" for every other stage.
    attention: str = ""
    # A TransformerLens name this stage holds where no rule of engine/lens_names.py gives it ("hook_embed" on Gemma's
    # scaled embedding: transformers' embedding module scales, so TransformerLens's hook_embed is after the scale)
    lens: str = ""

    def __post_init__(self) -> None:
        if self.kind != "matmul":
            return
        if not self.attention and self.op in ATTENTION_ROLES:  # the ops every family's attention core records
            object.__setattr__(self, "attention", self.op)
        product = self.product or PRODUCT_OF_GROUP.get(self.group, "")
        if product not in PRODUCTS:
            raise ValueError(
                f"stage {self.op!r}: a matrix product of group {self.group!r} needs its kind of product, one of "
                f"{', '.join(PRODUCTS)} (product=...), got {self.product!r}"
            )
        object.__setattr__(self, "product", product)


@dataclass(frozen=True)
class StageTable:
    """The stages of one architecture, in the order its forward pass runs them."""

    name: str
    embed: tuple[Stage, ...]
    block: tuple[Stage, ...]
    final: tuple[Stage, ...]
    symbols: str  # the dimension symbols its shapes use, for traces
    # Each kind of layer's ops (config.layer_types), where kinds differ in their stages (a hybrid's attention and
    # recurrent layers, Gemma 4's shared layers); () where every block runs every stage of `block`.
    kinds: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def parts(self) -> tuple[tuple[Stage, ...], tuple[Stage, ...], tuple[Stage, ...]]:
        """The stages before the blocks, of a block, after the blocks."""
        return self.embed, self.block, self.final

    @cached_property
    def stages(self) -> dict[str, Stage]:
        return {s.op: s for s in (*self.embed, *self.block, *self.final)}

    @cached_property
    def matmul_ops(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.stages.values() if s.kind == "matmul")

    @cached_property
    def stream_readers(self) -> frozenset[str]:
        """The ops of the block that read the residual stream itself (the pre-norms, or OLMo 2's projections)."""
        return frozenset(s.op for s in self.block if s.reads_stream)

    @cached_property
    def block_ops(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.block)

    def block_names(self, kind: str | None = None) -> list[str]:
        """The capture names inside a block of that kind of layer (None, or a table without kinds: every block's)."""
        ops = dict(self.kinds).get(kind) if kind is not None else None
        return [name for stage in self.block if ops is None or stage.op in ops for name in stage.names]

    def stage_names(self, n_layer: int, layer_types: Sequence[str] | None = None) -> list[str]:
        """Every capture name of a model with n_layer blocks (of these kinds, where given: each block's own), in the
        order the forward pass produces them."""
        names = [name for stage in self.embed for name in stage.names]
        for i in range(n_layer):
            names += [f"blocks.{i}.{name}" for name in self.block_names(layer_types[i] if layer_types else None)]
        return names + [name for stage in self.final for name in stage.names]


ATTENTION_ROLES = ("scores", "mix")  # Stage.attention: Q K^T and A V
ATTENTION_PROJECTIONS = "attention projections"
ATTENTION_SCORES = "attention scores and mix"
MLP = "MLP"
UNEMBEDDING = "logits"
# The products of a recurrent layer's scan (linear attention's delta rule, a state-space layer's SSD): they read and
# write a state of fixed size, so a decode step's cost does not grow with the context, and they hold no weights.
STATE = "recurrent state"
# DeepSeek-V4's manifold-constrained hyper-connections: the residual stream kept as N streams, whose mixing weights are
# a product of the streams with weights W_hc (HYPER_CONNECTIONS), and which are collapsed into a block's input and
# mixed among themselves by products of those weights with the streams (HYPER_STREAMS: B is the streams, activations).
HYPER_CONNECTIONS = "hyper-connections"
HYPER_STREAMS = "hyper-connections' mixing of the streams"
# What the B operand of a product is, by the product's group: a weight (a parameter, the same for every row and every
# sequence, so a pass reads it once however many rows use it) in every group but these, whose B the pass computes or
# keeps: the keys and values of the attended positions (read from the KV cache), a recurrent state or what the scan
# computed from its inputs.
# Of a scan's products only those that read the state (Stage.state) have it as B; the others multiply activations.
B_OPERANDS = {ATTENTION_SCORES: "kv_cache", STATE: "activations", HYPER_STREAMS: "activations"}

# The kinds of matrix product, each as the views name it: every view colours a product, and recognises attention, a
# scan or an expert, by its stage's kind of product (Stage.product), never by a family's op names, so that a new
# family's products are drawn without a line of view code.
PRODUCTS = {
    "projection": "projections",  # of attention (q, k, v, out; a latent's, an indexer's) or of a recurrent layer
    "attention": "attention scores and mix",  # against the keys and values of the attended positions
    "conv": "causal conv",  # a recurrent layer's depthwise conv over its last K inputs
    "scan": "recurrent state (scan)",  # a recurrent layer's scan: its state read and written
    "mlp": "MLP",
    "router": "router",  # the logits that choose the experts (and a shared expert's gate)
    "expert": "experts",  # the routed experts and the shared ones
    "streams": "hyper-connections",  # the residual streams' mixing weights, and their mixing (DeepSeek-V4's mHC)
    "logits": "logits",
}
PRODUCT_OF_GROUP = {
    ATTENTION_PROJECTIONS: "projection",
    ATTENTION_SCORES: "attention",
    MLP: "mlp",
    UNEMBEDDING: "logits",
    STATE: "scan",
    HYPER_CONNECTIONS: "streams",
    HYPER_STREAMS: "streams",
}
READS_STATE, WRITES_STATE, CONV_WINDOWS = "reads", "writes", "windows"

# The two stages after the blocks that every family shares: the last position, then the unembedding.
LAST = Stage("last", ("last",), "select", "h = h[last position]  (generation needs only the next token)", "h [T, D]")
LOGITS = Stage(
    "logits", ("logits",), "matmul", "logits = h W_U^T  (W_U = W_te when tied)", "h [R, D], W_te^T [D, V]", UNEMBEDDING
)


def by_op(*stages: Stage) -> dict[str, Stage]:
    """A part's declaration of its stages, by op, in the order its forward pass runs them (Tape.declaring)."""
    return {stage.op: stage for stage in stages}


def merged(runs: Iterable[Sequence[Stage]], alternatives: bool = True) -> tuple[Stage, ...]:
    """The stages several runs met (kinds of layer, a prefill and a decode step), in one order that keeps each run's:
    a stage one run has and the others before it lack goes after the last stage it follows in its run, and, where the
    runs are `alternatives` (kinds of layer), after the stages the runs before it have there in its place (a dense
    MLP's, then the experts'); else (the passes of one kind of layer) right after it, where its equations put it (a
    decode step's recurrent form of a scan beside the prompt's chunks). The first run to meet an op gives its stage."""
    order: list[Stage] = []
    for run in runs:
        ours = {s.op for s in run}
        at = 0
        for stage in run:
            ops = [s.op for s in order]
            if stage.op in ops:
                at = max(at, ops.index(stage.op) + 1)
                continue
            while alternatives and at < len(order) and order[at].op not in ours:  # past the others' stages here
                at += 1
            order.insert(at, stage)
            at += 1
    return tuple(order)
