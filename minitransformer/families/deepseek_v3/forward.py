"""DeepSeek-V3's forward pass, as transformers' DeepseekV3ForCausalLM computes it: the Llama family's pre-RMSNorm
block, with multi-head latent attention (MLA) in place of grouped-query attention, and after the first
first_k_dense_replace layers (a Llama MLP), a mixture of experts with a shared expert in place of the MLP.

Against llama/forward.py, the attention (`latent_attention`):
- q from a low-rank bottleneck: q = RMSNorm(h W_qa) W_qb [T, H dh] (dh = dn + dr: a part without position, dn wide,
  and a rotary part, dr wide), or one product h W_q where q_lora_rank is None;
- one product h W_kva [T, dc + dr] gives the latent c (dc = kv_lora_rank) and a rotary key k_r (dr wide) that all
  heads share; c is RMSNormed, and W_kvb [dc, H (dn + dv)] up-projects it to every head's k_n (dn) and v (dv);
- rotary turns q's last dr numbers and k_r (in interleaved pairs where rope_interleave: transformers de-interleaves
  them, (x0, x2, ...; x1, x3, ...), then turns them as rotate_half does); each head's key is [k_n, k_r];
- scores over dh = dn + dr, scaled by dh^-0.5 (times mscale^2 under YaRN), a mix over v (dv wide): keys and values
  differ in width, so the KV cache holds H dh keys and H dv values a position, as transformers' form computes
  them. (transformers caches the latent [c, k_r] and up-projects the whole cache each step; the products are the
  same rows, so caching k and v instead computes each row once. What MLA needs to keep is dc + dr numbers a
  position: formulas.py's latent_cache_numbers, and the absorbed form, formulas.absorbed_products, says what
  attending to the latent directly would cost.)
And the MLP of a layer past the dense ones (`mixture`):
- router logits = h W_router [T, E], scores s = sigmoid(logits); the choice adds the correction bias b (s + b,
  only to choose), keeps the topk_group of n_group groups whose two best s + b sum highest, then the k best s + b
  in them; each chosen expert's weight is its s (unbiased), divided by their sum where norm_topk_prob, times
  routed_scaling_factor;
- the routed experts, each a SwiGLU of width Fe on its tokens (as Mixtral's), and the shared experts, one SwiGLU of
  width Fs = n_shared_experts Fe on every token, added.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...engine.kvcache import KVCache
from ...engine.ops import add_mask, constant, merge_heads, rms_norm, rotate, softmax, split_into_heads
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ...errors import UserError
from ..blocks import LayerInputs, PreNorm
from ..decoder import Decoder
from ..llama import forward as llama
from ..moe import shared_expert, swiglu_experts
from .config import RUNNABLE_ROPE_TYPES, DeepseekConfig
from .routing import choose

# transformers' DeepseekV3RMSNorm default: q_a_layernorm and kv_a_layernorm are built without the config's eps
LATENT_NORM_EPS = 1e-6


def deepseek(
    ids: np.ndarray,
    p: SimpleNamespace,
    config: DeepseekConfig,
    cache: KVCache | None,
    tape: Tape,
    all_positions: bool,
    pads: np.ndarray | None = None,
) -> np.ndarray:
    """Token ids [T] (or [B, T]) -> logits [R, V]: the Llama family's decoder and pre-norm block, with MLA and the
    experts (or the dense MLP) as its parts."""
    check_runnable(config, p)
    return DECODER(ids, p, config, cache, tape, all_positions, pads)


def check_runnable(config: DeepseekConfig, p: SimpleNamespace) -> None:
    """A rope type read but not computed here counts (without weights), and is refused by name where it would run."""
    kind = config.rope().kind
    if kind not in RUNNABLE_ROPE_TYPES and not isinstance(p.embed_tokens.weight, ShapeOnly):
        raise UserError(
            f"config rope_parameters rope_type={kind!r} is not computed here (only "
            f"{', '.join(RUNNABLE_ROPE_TYPES)}): this model counts, but does not run"
        )


def mlp(h, p: SimpleNamespace, config: DeepseekConfig, at: Tape):
    """Past the first first_k_dense_replace layers, the experts; before, the Llama family's gated MLP."""
    return mixture(h, p, config, at) if config.is_moe(at.layer_index or 0) else llama.mlp(h, p, config, at)


def latent_attention(h, p: SimpleNamespace, config: DeepseekConfig, at: Tape, inputs: LayerInputs):
    """Multi-head latent attention, as transformers' DeepseekV3Attention computes it."""
    q, K, V, _ = latent_keys(h, p, config, at, inputs)
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
    return output(z, p, at)


def latent_keys(h, p: SimpleNamespace, config: DeepseekConfig, at: Tape, inputs: LayerInputs):
    """MLA up to its keys: the queries [H, T, dh], the t attended keys [H, t, dh] and values [H, t, dv], and c_q, the
    query's normed latent [T, dq] (None where q is one product h W_q)."""
    H, dn = config.n_head, config.qk_nope_head_dim
    cq = None
    if config.q_lora_rank is None:
        q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh")
    else:
        cq = at.matmul("q_a", h, p.q_a_proj.weight.T, "T D, D dq -> T dq")
        cq = at.stage("q_a_norm", rms_norm(cq, p.q_a_layernorm.weight, LATENT_NORM_EPS), "T dq")
        q = at.matmul("q_b", cq, p.q_b_proj.weight.T, "T dq, dq H*dh -> T H*dh")
    ckv = at.matmul("kv_a", h, p.kv_a_proj_with_mqa.weight.T, "T D, D dc+dr -> T dc+dr")
    c, k_r = at.stage("kv_split", (ckv[..., : config.kv_lora_rank], ckv[..., config.kv_lora_rank :]), "T dc; T dr")
    c = at.stage("kv_a_norm", rms_norm(c, p.kv_a_layernorm.weight, LATENT_NORM_EPS), "T dc")
    kv_up = at.matmul("kv_b", c, p.kv_b_proj.weight.T, "T dc, dc H*dn+H*dv -> T H*dn+H*dv")
    q = at.stage("split_heads", split_into_heads(q, H), "H T dh")
    kv_up = split_into_heads(kv_up, H)  # [H, T, dn + dv]: each head's k_n then v
    k_n, v = at.stage("kv_b_split", (kv_up[..., :dn], kv_up[..., dn:]), "H T dn; H T dv")
    q_r, k_r = turn(q[..., dn:], inputs.rotary, config), turn(k_r[..., None, :, :], inputs.rotary, config)
    q_r, k_r = at.stage("rope", (q_r, k_r), "H T dr; 1 T dr")
    q = at.stage("q_join", join(q[..., :dn], q_r), "H T dh")
    k = at.stage("k_join", join(k_n, broadcast(k_r, k_n.shape[:-1] + (config.qk_rope_head_dim,))), "H T dh")
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh; H t dv")
    return q, K, V, cq


def output(z, p: SimpleNamespace, at: Tape):
    """The heads' mixes [H, T, dv] merged and projected back to the stream: o = Z W_o [T, D]."""
    z = at.stage("merge_heads", merge_heads(z), "T H*dv")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dv, H*dv D -> T D")


def attend(q, K, V, bias, config: DeepseekConfig, at: Tape):
    """softmax(q K^T x scale + bias) V, per head: keys dh wide, values dv wide."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", np.multiply(s, constant(s, config.softmax_scale), out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", a, V, "H T t, H t dv -> H T dv")


def turn(x, rotary, config: DeepseekConfig):
    """Rotary on x's last dr numbers; where rope_interleave, the pairs (x0, x1), (x2, x3), ... de-interleaved first
    to (x0, x2, ...; x1, x3, ...), as transformers' apply_rotary_pos_emb_interleave lays its output out."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    if config.rope_interleave:
        x = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
    cos, sin = rotary
    if cos.ndim == 3:  # a batch's tables [B, T, dr]: one for every head
        cos, sin = cos[:, None], sin[:, None]
    return rotate(x, cos, sin)


def join(a, b):
    """[..., n] and [..., m] side by side: [..., n + m]."""
    if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
        return ShapeOnly((*a.shape[:-1], a.shape[-1] + b.shape[-1]), a.dtype)
    return np.concatenate([a, b], axis=-1)


def broadcast(x, shape):
    """x repeated along its axes of 1 (the shared rotary key, for every head): a view."""
    return ShapeOnly(shape, x.dtype) if isinstance(x, ShapeOnly) else np.broadcast_to(x, shape)


def mixture(h, p: SimpleNamespace, config: DeepseekConfig, at: Tape):
    """The routed experts (k of E a token, chosen by group-limited sigmoid scores) and the shared experts."""
    E = config.n_experts
    logits = at.matmul("router", h, p.gate.weight.T, "T D, D E -> T E")
    scores = at.stage("router.sigmoid", sigmoid(logits), "T E")
    chosen = at.stage("router.choose", choose(scores, p.gate.e_score_correction_bias, config, at), "T k")
    gates = at.stage("router.weigh", weigh(scores, chosen, config), "T k")

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.gate_proj.weight, w.up_proj.weight, w.down_proj.weight

    m = swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at, F="Fe")
    y = shared_expert(h, p.shared_experts, config.hidden_act, at)
    return at.stage("moe.shared_add", m + y, "T D")


def sigmoid(x):
    """1 / (1 + e^-x), elementwise."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    one = constant(x, 1.0)
    return one / (one + np.exp(-x))


def weigh(scores, chosen, config: DeepseekConfig):
    """The chosen experts' sigmoid scores (without the correction bias), over their sum (+1e-20) where
    norm_topk_prob, times routed_scaling_factor."""
    if isinstance(scores, ShapeOnly):
        return ShapeOnly(chosen.shape, scores.dtype)
    w = np.take_along_axis(scores, chosen, axis=-1)
    if config.norm_topk_prob:
        w = w / (w.sum(axis=-1, keepdims=True) + constant(w, 1e-20))
    return w * constant(w, config.routed_scaling_factor)


DECODER = Decoder(PreNorm(latent_attention, mlp))
