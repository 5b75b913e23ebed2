"""DeepSeek-V3.2's forward pass, as transformers' DeepseekV32ForCausalLM computes it: DeepSeek-V3's
(families/deepseek_v3/forward.py: latent attention, the router, routed and shared experts), with DeepSeek Sparse
Attention in each layer's attention (`indexed_attention`):
- the lightning indexer scores every key a query can see: its own query heads from the query's latent, q_i = c_q W_iq
  [T, Hi, di], and one key a position, k_i = LayerNorm(h W_ik) [T, di], both turned on their first dr numbers (in
  halves, rotate_half, where MLA's rotary pairs are interleaved); each head's score q_i k_i / sqrt(di) through a ReLU,
  weighed by w = h W_iw / sqrt(Hi) [T, Hi] and summed over the heads: I [T, t]. The keys k_i are cached beside K and
  V (the indexer scores every earlier position at every step);
- each query attends to the s = min(t, ki) keys of largest I alone (ki = index_topk): its scores and mix are over
  those s keys, gathered for it, [H, T, 1, s]. transformers' eager attention computes every T x t score and masks
  the keys not chosen; the ledger counts what is computed here and keeps that dense form beside it
  (engine/row_chunks.py's on_chosen_keys; a watched or --dense-attention pass computes it that way).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...engine.kvcache import KVCache
from ...engine.ops import add_mask, constant, gather_keys, gather_mask, layer_norm, relu, rotate, softmax
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..blocks import LayerInputs, PreNorm
from ..decoder import Decoder
from ..deepseek_v3.forward import attend, check_runnable, latent_keys, mlp, output
from .config import DeepseekV32Config

# transformers' DeepseekV32Indexer: k_norm = nn.LayerNorm(index_head_dim, eps=1e-6), whatever norm_eps says
INDEX_NORM_EPS = 1e-6


def deepseek_v32(
    ids: np.ndarray,
    p: SimpleNamespace,
    config: DeepseekV32Config,
    cache: KVCache | None,
    tape: Tape,
    all_positions: bool,
    pads: np.ndarray | None = None,
) -> np.ndarray:
    """Token ids [T] (or [B, T]) -> logits [R, V]: DeepSeek-V3's pass with the indexed attention in every layer."""
    check_runnable(config, p)
    return DECODER(ids, p, config, cache, tape, all_positions, pads)


def indexed_attention(h, p: SimpleNamespace, config: DeepseekV32Config, at: Tape, inputs: LayerInputs):
    """MLA as DeepSeek-V3 computes it, each query attending to the keys the lightning indexer chose for it."""
    q, K, V, cq = latent_keys(h, p, config, at, inputs)
    chosen = indexer(h, cq, p.indexer, config, at, inputs)
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


def indexer(h, cq, p: SimpleNamespace, config: DeepseekV32Config, at: Tape, inputs: LayerInputs):
    """transformers' DeepseekV32Indexer: I = sum over the Hi heads of w_h ReLU(q_h k / sqrt(di)), w = h W_iw /
    sqrt(Hi), for every key a query can see; the s = min(t, ki) keys of largest I, for each query [T, s]."""
    Hi, di, dr = config.index_n_heads, config.index_head_dim, config.qk_rope_head_dim
    kv, rotary = inputs.cache, inputs.rotary
    q = at.matmul("index.q", cq, p.wq_b.weight.T, "T dq, dq Hi*di -> T Hi*di")
    k = at.matmul("index.k", h, p.wk.weight.T, "T D, D di -> T di")
    k = at.stage("index.k_norm", layer_norm(k, p.k_norm.weight, p.k_norm.bias, INDEX_NORM_EPS), "T di")
    q = at.stage("index.split_heads", q.reshape(*q.shape[:-1], Hi, di), "T Hi di")
    q, k = at.stage("index.rope", (turn_first(q, rotary, dr, heads=True), turn_first(k, rotary, dr)), "T Hi di; T di")
    K = at.stage("index.cache", kv.extend("index_keys", k) if kv is not None else k, "t di")
    s = at.matmul("index.scores", q, K[..., None, :, :].swapaxes(-1, -2), "T Hi di, 1 di t -> T Hi t")
    s = at.stage("index.scale", np.multiply(s, constant(s, di**-0.5), out=at.scratch(s)), "T Hi t")
    s = at.stage("index.relu", relu(s), "T Hi t")
    w = at.matmul("index.weights", h, p.weights_proj.weight.T, "T D, D Hi -> T Hi")
    w = at.stage("index.weigh", w * constant(w, Hi**-0.5), "T Hi")
    scores = at.matmul("index.sum", w[..., None, :], s, "T 1 Hi, T Hi t -> T 1 t")
    scores = at.stage("index.mask", scores[..., 0, :] + query_key_mask(inputs.mask, scores), "T t")
    return at.stage("index.topk", largest(scores, at.dims.s, at), "T s")


def attend_chosen(q, K, V, bias, chosen, config: DeepseekV32Config, at: Tape):
    """softmax(q K_c^T x scale + bias) V_c, each query against its s chosen keys alone (K_c, V_c: those keys and
    values, gathered for it): the same lines as DeepSeek-V3's attend, [H, T, 1, s] where that has [H, T, t]."""
    Kc, Vc = at.stage("gather", (gather_keys(K, chosen), gather_keys(V, chosen)), "H T s dh; H T s dv")
    s = at.matmul(
        "scores", q[..., None, :], Kc.swapaxes(-1, -2), "H T 1 dh, H T dh s -> H T 1 s", dense="H T dh, H dh t -> H T t"
    )
    s = at.stage("scale", np.multiply(s, constant(s, config.softmax_scale), out=at.scratch(s)), "H T 1 s")
    s = at.stage("mask", add_mask(s, gather_mask(bias, chosen), out=at.scratch(s)), "H T 1 s")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T 1 s")
    z = at.matmul("mix", a, Vc, "H T 1 s, H T s dv -> H T 1 dv", dense="H T t, H t dv -> H T dv")
    return z[..., 0, :]


def turn_first(x, rotary, dr: int, heads: bool = False):
    """Rotary on the first dr numbers of x [..., T, di] (or [..., T, Hi, di] with `heads`), in halves as rotate_half
    turns them (transformers' indexer: apply_rotary_pos_emb, not MLA's interleaved pairs); the rest as it is."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    cos, sin = rotary
    if cos.ndim == 4:  # a left-padded batch's tables [B, 1, T, dr] (one for MLA's heads): [B, T, dr]
        cos, sin = cos[..., 0, :, :], sin[..., 0, :, :]
    if heads:  # one table for every head: [..., T, 1, dr]
        cos, sin = cos[..., None, :], sin[..., None, :]
    return np.concatenate([rotate(x[..., :dr], cos, sin), x[..., dr:]], axis=-1)


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


DECODER = Decoder(PreNorm(indexed_attention, mlp))
