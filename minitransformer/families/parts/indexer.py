"""DeepSeek Sparse Attention as a part: the lightning indexer (DeepSeek-V3.2's, GLM-5's) that scores every key a
query can see and keeps the index_topk it ranks highest, and multi-head latent attention over each query's chosen
keys alone; their tensors, stages and closed forms, and what count says of them.

- the indexer: its own query heads from MLA's query latent, q_i = c_q W_iq [T, Hi, di], and one key a position,
  k_i = LayerNorm(h W_ik) [T, di], both turned on their first dr numbers (in halves, rotate_half: DeepSeek-V3.2's; in
  interleaved pairs de-interleaved first, as MLA's: GLM-5's, `interleaved`); each head's score q_i k_i / sqrt(di)
  through a ReLU, weighed by w = h W_iw / sqrt(Hi) [T, Hi] and summed over the heads: I [T, t]; the keys k_i are
  cached beside K and V;
- each query attends to the s = min(t, ki) keys of largest I alone: its scores and mix over those s keys, gathered for
  it, [H, T, 1, s]; transformers' eager attention computes every T x t score and masks the keys not chosen, and the
  ledger keeps that dense form beside what is computed (engine/row_chunks.py's on_chosen_keys);
- shared top-k (GLM-5's indexer_types "shared"): a layer whose config.topk_source(layer) names an earlier layer has
  no indexer (no tensors, no products, no indexer keys cached) and attends over that layer's choice, which the
  decoder hands on within a pass (LayerInputs.choices); its index.shared stage says so.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import add_mask, constant, gather_keys, gather_mask, layer_norm, relu, rotate, softmax
from ...engine.shapes import ShapeOnly
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_ROLES, ATTENTION_SCORES, Stage, by_op
from ...engine.tape import Tape
from .blocks import under
from .latent import LatentAttention, attend, deepseek_mlp, output, steps
from .part import Part, Products, Tensor, Tensors, linear

# transformers' DeepseekV32Indexer: k_norm = nn.LayerNorm(index_head_dim, eps=1e-6), whatever rms_norm_eps says
INDEX_NORM_EPS = 1e-6

HALVES = "q_i, k_i = RoPE(their first dr numbers), in halves (rotate_half), not in MLA's interleaved pairs"
INTERLEAVED = "q_i, k_i = RoPE(their first dr numbers), in interleaved pairs de-interleaved first, as MLA's"
INDEXER = (
    Stage(
        "index.q",
        ("attn.index_q",),
        "matmul",
        "q_i = c_q W_iq  (the indexer's Hi heads of di, from the query's latent)",
        "c_q [T, dq], W_iq [dq, Hi*di]",
        ATTENTION_PROJECTIONS,
    ),
    Stage(
        "index.k",
        ("attn.index_k",),
        "matmul",
        "k_i = h W_ik  (one key of di a position, for every index head)",
        "h [T, D], W_ik [D, di]",
        ATTENTION_PROJECTIONS,
    ),
    Stage("index.k_norm", ("attn.index_k_norm",), "norm", "k_i = LayerNorm_i(k_i)", "k_i [T, di]"),
    Stage("index.split_heads", ("attn.index_q_heads",), "reshape", "q_i -> Hi heads of di", "q_i [T, Hi*di]"),
    Stage(
        "index.rope",
        ("attn.index_q_rot", "attn.index_k_rot"),
        "rotate",
        HALVES,
        "q_i [T, Hi, dr], k_i [T, dr]",
    ),
    Stage(
        "index.cache",
        ("attn.index_keys",),
        "cache",
        "K_i of the t positions (new rows written to the indexer's key cache: di numbers a position)",
        "k_i [T, di]",
    ),
    Stage(
        "index.scores",
        ("attn.index_qk",),
        "matmul",
        "S_i = q_i K_i^T  (every index head against every key it can see)",
        "q_i [T, Hi, di], K_i^T [di, t]",
        ATTENTION_SCORES,
    ),
    Stage("index.scale", ("attn.index_scaled",), "scale", "S_i = S_i x di^-0.5", "S_i [T, Hi, t]"),
    Stage("index.relu", ("attn.index_relu",), "activation", "S_i = ReLU(S_i)", "S_i [T, Hi, t]"),
    Stage(
        "index.weights",
        ("attn.index_head_weights",),
        "matmul",
        "w = h W_iw  (each query's weight of each index head)",
        "h [T, D], W_iw [D, Hi]",
        ATTENTION_PROJECTIONS,
    ),
    Stage("index.weigh", ("attn.index_weights",), "scale", "w = w x Hi^-0.5", "w [T, Hi]"),
    Stage(
        "index.sum",
        ("attn.index_sum",),
        "matmul",
        "I = w S_i  (the weighted sum over the index heads: each query's score of each key)",
        "w [T, 1, Hi], S_i [T, Hi, t]",
        ATTENTION_SCORES,
    ),
    Stage("index.mask", ("attn.index_scores",), "mask", "I[i, j] = -inf where j is in i's future", "I [T, t]"),
    Stage(
        "index.topk",
        ("attn.index_chosen",),
        "select",
        "the s = min(t, ki) keys of largest I for each query (their indices)",
        "I [T, t]",
    ),
)


@dataclass(frozen=True)
class LightningIndexer(Part):
    """transformers' DeepseekV32Indexer: I = sum over the Hi heads of w_h ReLU(q_h k / sqrt(di)), w = h W_iw /
    sqrt(Hi), for every key a query can see; the s = min(t, ki) keys of largest I, for each query [T, s].
    `interleaved`: its rotary pairs interleaved, de-interleaved first (GlmMoeDsaIndexer's), not halves."""

    interleaved: bool = False
    kinds = {
        "indexer_q": "the indexer's query weights W_iq [Hi*di, dq] (from the query's latent)",
        "indexer_k": "the indexer's key weights W_ik [di, D]",
        "indexer_norm": "the indexer's key LayerNorm: gain and bias [di]",
        "indexer_weights": "the indexer's head weights W_iw [Hi, D]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        stages = by_op(*INDEXER)
        return (
            stages | {"index.rope": replace(stages["index.rope"], equation=INTERLEAVED)} if self.interleaved else stages
        )

    def __call__(self, h, cq, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        Hi, di, dr = config.index_n_heads, config.index_head_dim, config.qk_rope_head_dim
        kv, rotary = inputs.cache, inputs.rotary
        q = at.matmul("index.q", cq, p.wq_b.weight.T, "T dq, dq Hi*di -> T Hi*di")
        k = at.matmul("index.k", h, p.wk.weight.T, "T D, D di -> T di")
        k = at.stage("index.k_norm", layer_norm(k, p.k_norm.weight, p.k_norm.bias, INDEX_NORM_EPS), "T di")
        q = at.stage("index.split_heads", q.reshape(*q.shape[:-1], Hi, di), "T Hi di")
        turned = (turn_first(q, rotary, dr, self.interleaved, heads=True), turn_first(k, rotary, dr, self.interleaved))
        q, k = at.stage("index.rope", turned, "T Hi di; T di")
        K = at.stage("index.cache", kv.extend("index_keys", k) if kv is not None else k, "t di")
        s = at.matmul("index.scores", q, K[..., None, :, :].swapaxes(-1, -2), "T Hi di, 1 di t -> T Hi t")
        s = at.stage("index.scale", np.multiply(s, constant(s, di**-0.5), out=at.scratch(s)), "T Hi t")
        s = at.stage("index.relu", relu(s), "T Hi t")
        w = at.matmul("index.weights", h, p.weights_proj.weight.T, "T D, D Hi -> T Hi")
        w = at.stage("index.weigh", w * constant(w, Hi**-0.5), "T Hi")
        scores = at.matmul("index.sum", w[..., None, :], s, "T 1 Hi, T Hi t -> T 1 t")
        scores = at.stage("index.mask", scores[..., 0, :] + query_key_mask(inputs.mask, scores), "T t")
        return at.stage("index.topk", largest(scores, at.dims.s, at), "T s", indices=range(scores.shape[-1]))

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """wq_b [Hi di, dq], wk [di, D], k_norm's gain and bias [di] each, weights_proj [Hi, D]."""
        D, dq, Hi, di = config.n_embd, config.q_lora_rank or 0, config.index_n_heads, config.index_head_dim
        return {
            **linear("wq_b", Hi * di, dq, False, "indexer_q"),
            **linear("wk", di, D, False, "indexer_k"),
            "k_norm.weight": Tensor((di,), "indexer_norm"),
            "k_norm.bias": Tensor((di,), "indexer_norm"),
            **linear("weights_proj", Hi, D, False, "indexer_weights"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        Hi, di, dq, D = config.index_n_heads, config.index_head_dim, config.q_lora_rank or 0, config.n_embd
        return {
            "index.q": (B * T * Hi * di, dq),  # c_q [T, dq] x W_iq [dq, Hi di]
            "index.k": (B * T * di, D),  # h [T, D] x W_ik [D, di]
            "index.scores": (B * T * Hi * t, di),  # q_i [T, Hi, di] x K_i^T [di, t]
            "index.weights": (B * T * Hi, D),  # h [T, D] x W_iw [D, Hi]
            "index.sum": (B * T * t, Hi),  # w [T, 1, Hi] x S_i [T, Hi, t]
        }

    def selection_per_pair(self, config: Any) -> tuple[int, int]:
        """(MACs, dot products) per (query, key) pair, over every key in reach: Hi scores of di and their weighted sum
        over the Hi heads, Hi (di + 1) MACs in Hi + 1 dot products (verbs/formulas.py reads it)."""
        Hi, di = config.index_n_heads, config.index_head_dim
        return Hi * (di + 1), Hi + 1


def turn_first(x, rotary, dr: int, interleaved: bool = False, heads: bool = False):
    """Rotary on the first dr numbers of x [..., T, di] (or [..., T, Hi, di] with `heads`), in halves as rotate_half
    turns them (DeepSeek-V3.2's indexer: apply_rotary_pos_emb, not MLA's interleaved pairs), or, `interleaved`, the
    pairs (x0, x1), (x2, x3), ... de-interleaved to (x0, x2, ...; x1, x3, ...) first and then turned (GLM-5's:
    apply_rotary_pos_emb_interleave, as MLA's); the rest as it is."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    turned = x[..., :dr]
    if interleaved:
        turned = np.concatenate([turned[..., 0::2], turned[..., 1::2]], axis=-1)
    cos, sin = rotary
    if cos.ndim == 4:  # a left-padded batch's tables [B, 1, T, dr] (one for MLA's heads): [B, T, dr]
        cos, sin = cos[..., 0, :, :], sin[..., 0, :, :]
    if heads:  # one table for every head: [..., T, 1, dr]
        cos, sin = cos[..., None, :], sin[..., None, :]
    return np.concatenate([rotate(turned, cos, sin), x[..., dr:]], axis=-1)


def query_key_mask(bias, like):
    """attention_bias as one [T, t] (or [B, T, t]) mask for the indexer's scores, which have no heads; 0 where there
    is none (counting without weights)."""
    if bias is None:
        return constant(like, 0.0)
    return bias[..., 0, :, :] if bias.ndim == 4 else bias


def largest(scores, s: int, at: Tape):
    """The s keys of largest score for each query: indices [..., T, s] into the t, in key order (as the dense form
    sums them), equal scores the earliest key first (the tape's top k, engine/selection.py); the masked ones rank
    last, chosen only where a query sees fewer than s."""
    t = scores.shape[-1]
    if s >= t and not isinstance(scores, ShapeOnly):  # every key
        return np.broadcast_to(np.arange(t), (*scores.shape[:-1], t))
    return at.top_k("index.topk", scores, s, order="index")


GATHER = Stage(
    "gather",
    ("attn.chosen_keys", "attn.chosen_values"),
    "cache",
    "K_c, V_c = each query's s chosen keys and values  (where t > ki; else every key)",
    "K [H, t, dh], V [H, t, dv], chosen [T, s]",
)
# Where the indexer chose (t > ki), attention reads each query's s keys alone; the dense form transformers' eager
# attention computes (every T x t score, the keys not chosen masked) is what a watched or --dense-attention pass runs.
SPARSE_EQUATIONS = {
    "scores": "S = Q K_c^T  (each query against its s chosen keys, dh = dn + dr wide; dense form: all t)",
    "mask": "S = -inf where a chosen key is in the query's future (dense form: and at every key not chosen)",
    "mix": "Z = A V_c  (the s chosen values, dv wide; dense form: all t)",
}
# A layer without an indexer of its own (GLM-5's indexer_types "shared"): the keys an earlier layer chose, this pass
SHARED = Stage(
    "index.shared",
    ("attn.index_shared",),
    "select",
    "chosen = the s keys layer j's indexer chose for each query this pass, j the last layer before this one with its "
    "own (indexer_types 'full'): this layer computes no indexer",
    "layer j's chosen [T, s]",
)


@dataclass(frozen=True)
class IndexedLatentAttention(LatentAttention):
    """MLA as DeepSeek-V3 computes it, each query attending to the keys the lightning indexer chose for it: its own
    indexer's, or, in a layer whose config.topk_source(layer) names an earlier layer, that layer's choice."""

    indexer: LightningIndexer = field(default_factory=LightningIndexer)
    kinds = {**LatentAttention.kinds, **LightningIndexer.kinds}

    def stages(self, config: Any) -> dict[str, Stage]:
        """MLA's, the gather of each query's keys before the scores, and scores, mask and mix over those keys; where
        some layers read another's choice, the stage that says so."""
        shares = any(config.topk_source(i) is not None for i in range(config.n_layer))
        stages = super().stages(config) | by_op(GATHER, *((SHARED,) if shares else ()))
        return stages | {op: replace(stages[op], equation=equation) for op, equation in SPARSE_EQUATIONS.items()}

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        q, K, V, cq = self.keys(h, p, config, at, inputs)
        layer, source = at.layer_index or 0, config.topk_source(at.layer_index or 0)
        if source is None:
            chosen = inputs.choices[layer] = self.indexer(h, cq, p.indexer, config, at, inputs)
        else:
            given = inputs.choices[source]  # [T, s], or [B, T, s]: one pass's for a run of B rows from a later block
            if not isinstance(given, ShapeOnly) and given.shape[:-2] != tuple(at.dims.batch):
                given = np.broadcast_to(given, (*at.dims.batch, *given.shape[-2:]))  # each patched row reads it
            chosen = at.stage("index.shared", given, "T s", indices=range(K.shape[-2]))
        z = at.on_chosen_keys(
            lambda q, K, V, bias, chosen, at: attend_chosen(q, K, V, bias, chosen, config, at),
            lambda q, K, V, bias, at: attend(q, K, V, bias, config, at),
            q,
            K,
            V,
            inputs.mask,
            chosen,
        )
        return output(z, p, at)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """MLA's, and the indexer's in a layer that has its own."""
        own = config.topk_source(layer) is None
        return super().tensors(config, layer) | (under("indexer", self.indexer.tensors(config, layer)) if own else {})

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """MLA's, the indexer's before the scores, and the scores and mix over s = min(t, ki) keys a query (the keys
        the indexer chose, where t > ki; a query that sees fewer is given ki all the same, the rest masked). A layer
        that reads another's choice has no indexer's."""
        ops, s, H = super().products(config, T, t, B, layer), chosen_keys(config, t), config.n_head
        projections = {op: n for op, n in ops.items() if op not in (*ATTENTION_ROLES, "out")}
        return (
            projections
            | (self.indexer.products(config, T, t, B) if config.topk_source(layer) is None else {})
            | {
                "scores": (B * H * T * s, config.d_head),  # Q [H, T, 1, dh] x K_c^T [H, T, dh, s]
                "mix": (B * H * T * config.v_head_dim, s),  # A [H, T, 1, s] x V_c [H, T, s, dv]
                "out": ops["out"],
            }
        )

    def selection_per_pair(self, config: Any, layer: int = 0) -> tuple[int, int]:
        """The indexer's, in a layer that has its own; nothing in one that reads another's choice."""
        return self.indexer.selection_per_pair(config) if config.topk_source(layer) is None else (0, 0)

    def sparse_attention_macs(self, config: Any, T: int, t: int) -> tuple[int, int, int]:
        """One layer's (indexer, attention as computed, attention's dense form) MACs for T queries at context t, every
        score counted (no row chunk or mask skipped): Hi (di + 1) T t; H (dh + dv) T s; H (dh + dv) T t."""
        per_pair, (selection, _) = self.attention_macs_per_pair(config), self.selection_per_pair(config)
        return selection * T * t, per_pair * T * chosen_keys(config, t), per_pair * T * t

    def attention_vs_weights(self, c: Any, mlp: Any = None) -> tuple[str, str, str]:
        """A decode step's attention (MLA's scores and mix over min(t, ki) keys, the indexer's over all t) against the
        products with weights of layer 0 (count's comparison), in FLOPs, the ratio in symbols while t <= ki, the
        sizes."""
        mla = "D dq + dq H dh + D (dc + dr) + dc H (dn + dv) + H dv D"
        indexer = "dq Hi di + D di + D Hi"
        mlp_terms, which, mlp_sizes = deepseek_mlp(c)
        return (
            f"2 (H (dh + dv) min(t, ki) + Hi (di + 1) t) FLOPs against 2 ({mla} + {indexer} + {mlp_terms}) for the "
            f"weights ({which})",
            f"(for t <= ki) (H (dh + dv) + Hi (di + 1)) t / ({mla} + {indexer} + {mlp_terms})",
            f"D = {c.n_embd:,}, H = {c.n_head}, dh = {c.d_head}, dv = {c.v_head_dim}, dq = {c.q_lora_rank}, "
            f"dc = {c.kv_lora_rank}, dr = {c.qk_rope_head_dim}, dn = {c.qk_nope_head_dim}, Hi = {c.index_n_heads}, "
            f"di = {c.index_head_dim}, ki = {c.index_topk:,}, {mlp_sizes}",
        )

    def count_notes(self, config: Any, n_prompt: int, n_new: int, keys=None) -> list[str]:
        """count's lines: DeepSeek-V3's on MLA, then the indexer's on what it scores, what the attention it chooses
        for reads against the dense form, and the key cache it keeps."""
        c, L = config, config.n_layer
        Hi, di, ki = c.index_n_heads, c.index_head_dim, c.index_topk
        rows = []
        for name, T, seen in steps(n_prompt, n_new):
            indexer, computed, dense = self.sparse_attention_macs(c, T, seen)
            if seen <= ki:
                rows.append(
                    f"    {name}: every key chosen (t = {seen:,} <= ki): scores and mix as DeepSeek-V3's, "
                    f"{computed:,} MACs a layer; the indexer's scores {indexer:,}"
                )
            else:
                rows.append(
                    f"    {name}: scores and mix over {ki:,} keys a query, {computed:,} MACs a layer, against "
                    f"{dense:,} dense ({dense / computed:.3g}x); the indexer's scores of all {seen:,} keys "
                    f"{indexer:,}"
                )
        latent, own = self.latent_cache_numbers(c), [i for i in range(L) if c.topk_source(i) is None]
        return [
            *super().count_notes(c, n_prompt, n_new, keys=lambda t: chosen_keys(c, t)),
            "",
            "DSA (DeepSeek Sparse Attention): the lightning indexer chooses the keys each query attends to",
            f"  indexer: {Hi} heads of {di} score every key a query can see, Hi (di + 1) = {Hi * (di + 1):,} MACs a "
            f"(query, key) pair; each query then attends to the ki = {ki:,} keys they rank highest (all of them while "
            f"t <= ki)",
            "  scores and mix are counted over those keys, as computed here; the dense form beside them is transformers' "
            "eager attention,",
            "  every T x t score with the keys not chosen masked (--dense-attention computes it that way):",
            *rows,
            f"  the indexer's key cache: {di} numbers a layer and position beside MLA's {latent} (the latent and k_r): "
            f"{latent + di:,} in all, {(L * latent + len(own) * di) * 4:,} bytes a token in float32; this "
            f"implementation holds it beside its per-head keys and values, {self.full_cache_numbers(c) + di:,} numbers "
            "a layer and position",
            *shared_notes(c, own),
        ]


def shared_notes(c: Any, own: list[int]) -> list[str]:
    """count's lines on the layers that read another layer's choice (none where every layer has its own indexer)."""
    L = c.n_layer
    if len(own) == L:
        return []
    readers: dict[int, list[int]] = {}
    for i in range(L):
        if c.topk_source(i) is not None:
            readers.setdefault(c.topk_source(i), []).append(i)
    read = ", ".join(
        f"layer {layers[0]} reads layer {j}'s" if len(layers) == 1 else f"layers {spans(layers)} read layer {j}'s"
        for j, layers in readers.items()
    )
    lines = textwrap.wrap(f"(indexer_types): {read}", 114, initial_indent="    ", subsequent_indent="    ")
    return [
        f"  shared top-k: {len(own)} of {L} layers run their own indexer (its products, its keys cached); the other "
        f"{L - len(own)} compute none",
        "  and attend over the keys the last layer before them with its own chose, which index.shared records in each",
        *lines,
    ]


def spans(layers: list[int]) -> str:
    """Layer numbers as runs: "2-4, 6"."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def chosen_keys(config: Any, t: int) -> int:
    """s = min(t, ki): the keys a query's scores and mix read, of the t in reach."""
    return min(t, config.index_topk)


def attend_chosen(q, K, V, bias, chosen, config: Any, at: Tape):
    """softmax(q K_c^T x scale + bias) V_c, each query against its s chosen keys alone (K_c, V_c: those keys and
    values, gathered for it): the same lines as MLA's attend, [H, T, 1, s] where that has [H, T, t]."""
    Kc, Vc = at.stage("gather", (gather_keys(K, chosen), gather_keys(V, chosen)), "H T s dh; H T s dv")
    dense_scores, dense_mix = "H T dh, H dh t -> H T t", "H T t, H t dv -> H T dv"
    s = at.matmul("scores", q[..., None, :], Kc.swapaxes(-1, -2), "H T 1 dh, H T dh s -> H T 1 s", dense=dense_scores)
    s = at.stage("scale", np.multiply(s, constant(s, config.softmax_scale), out=at.scratch(s)), "H T 1 s")
    s = at.stage("mask", add_mask(s, gather_mask(bias, chosen), out=at.scratch(s)), "H T 1 s")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T 1 s")
    z = at.matmul("mix", a, Vc, "H T 1 s, H T s dv -> H T 1 dv", dense=dense_mix)
    return z[..., 0, :]
