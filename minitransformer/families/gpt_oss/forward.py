"""gpt-oss's forward pass, as transformers' GptOssForCausalLM computes it, written as its difference from Mixtral's
(families/mixtral/forward.py) and the Llama family's (families/llama/forward.py), whose attention projections,
rotary machinery and grouped scores it reuses:

- attention sinks: each head h has a learned logit s_h that joins every query's row of scores as one more column
  before the softmax, and whose weight is then dropped: A = softmax([S | s_h])[:, :t], so a head may give
  its query's weight to no key at all (rows of A sum to less than 1);
- sliding-window layers (a window of W keys) alternate with full ones, as layer_types says: each layer's tape
  carries its window, and the mask is that window's;
- biases on q, k, v and o;
- YaRN rotary positions: frequencies blended between kept and slowed ones, and the cos and sin tables multiplied
  by the attention factor (llama/forward.py: inverse_frequencies, rope, rotary_attention_factor);
- the mixture of experts: a router with a bias, its k largest logits chosen and a softmax over those k alone
  (Mixtral: a softmax over all E, then the top k renormalised); each expert a clamped SwiGLU with biases, whose gate
  and up are one product with the fused W_gu [D, 2F] (gate at even columns, up at odd ones):
  g = min(g, limit), u = clip(u, -limit, limit), a = (u + 1) g sigmoid(alpha g), then W_down [F, D].
"""

from __future__ import annotations

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    add_mask,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    rotate,
    sigmoid,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..llama.forward import _bias, decoder, scale_scores
from ..moe import add_rows, routed, top_k
from .config import GptOssConfig

# The shapes of a layer's expert records: each token's rows in its k experts, which is what the experts computed
# between them (engine/experts.py).
EXPERT_SHAPES = {
    "expert.gather": "T k*D",
    "expert.gate_up": "T D, D k*2F -> T k*2F",
    "expert.clamp": "T k*2F",
    "expert.act": "T k*F",
    "expert.mul": "T k*F",
    "expert.down": "T F, F k*D -> T k*D",
    "expert.weigh": "T k*D",
}


def gpt_oss(ids, p, config: GptOssConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: the Llama family's decoder (each layer with its own window's mask,
    the rotary tables x YaRN's attention factor) around gpt-oss's blocks."""
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder_block(x, p, config: GptOssConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block: x + attention with sinks(RMSNorm(x)), then x + mixture of experts(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + mixture(h, p.mlp, config, at), "T D")


def attention(h, p, config: GptOssConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """The Llama family's grouped-query attention with biases, whose softmax also weighs each head's sink."""
    H, Hkv = config.n_head, config.n_kv_head
    q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=_bias(p.q_proj))
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.v_proj))
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    q, k = at.stage("rope", (rotate(q, *rotary), rotate(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, p.sinks, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=_bias(p.o_proj))


def attend(q, K, V, bias, sinks, config: GptOssConfig, at: Tape):
    """llama.attend with each head's sink logit as one more column of its scores, dropped after the softmax."""
    Hkv = config.n_kv_head
    s = at.matmul("scores", group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :],
                  "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")  # fmt: skip
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    s = at.stage("sinks", with_sinks(s, sinks), "H T t+1")
    a = at.stage("softmax", softmax(s, out=at.scratch(s))[..., :-1], "H T t")  # the sink's weight dropped
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def with_sinks(s, sinks):
    """[S | s_h]: the scores [..., H, T, t] with each head's sink logit as column t + 1."""
    if isinstance(s, ShapeOnly):
        return ShapeOnly((*s.shape[:-1], s.shape[-1] + 1), s.dtype)
    column = np.broadcast_to(sinks.astype(s.dtype)[:, None, None], (*s.shape[:-1], 1))
    return np.concatenate([s, column], axis=-1)


def mixture(h, p, config: GptOssConfig, at: Tape):
    """The experts: the router (with a bias) picks each token's k largest logits and weighs those experts by a
    softmax over the k; each expert computes its tokens' rows of the clamped SwiGLU."""
    E, k = config.n_experts, config.top_k
    logits = at.matmul("router", h, p.router.weight.T, "T D, D E -> T E", bias=p.router.bias)
    chosen, top = at.stage("router.topk", top_k(logits, k), "T k")
    gates = at.stage("router.softmax", softmax(top), "T k")
    x, n = h.reshape(-1, h.shape[-1]), h.size // h.shape[-1]  # the batch's tokens, one row each
    out = ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros_like(x)
    w = p.experts
    experts = at.experts()
    for expert in routed(chosen.reshape(n, k), E, at.routing):
        ex, e = experts.expert(expert), expert.expert
        xe = ex.stage("expert.gather", expert.gather(x), "Te D")
        gu = ex.matmul("expert.gate_up", xe, w.gate_up_proj[e], "Te D, D 2F -> Te 2F", bias=w.gate_up_proj_bias[e])
        gu = ex.stage("expert.clamp", clamp(gu, config.swiglu_limit), "Te 2F")
        a = ex.stage("expert.act", glu(gu[:, ::2], config.swiglu_alpha), "Te F")
        a = ex.stage("expert.mul", np.multiply(gu[:, 1::2] + constant(gu, 1.0), a, out=ex.scratch(a)), "Te F")
        y = ex.matmul("expert.down", a, w.down_proj[e], "Te F, F D -> Te D", bias=w.down_proj_bias[e])
        y = ex.stage("expert.weigh", y * expert.gates(gates.reshape(n, k)), "Te D")
        add_rows(out, expert, y)
    at.record_experts(experts, EXPERT_SHAPES, E)
    return at.stage("moe.combine", out.reshape(h.shape), "T D")


def clamp(gate_up, limit: float):
    """The gate columns (even) capped at `limit` from above only, the up columns (odd) clipped to [-limit, limit]."""
    if isinstance(gate_up, ShapeOnly):
        return gate_up.copy()
    c = constant(gate_up, limit)
    out = np.minimum(gate_up, c)
    out[:, 1::2] = np.maximum(out[:, 1::2], -c)
    return out


def glu(gate, alpha: float):
    """g sigmoid(alpha g): SiLU with a gain alpha (1.702) inside the sigmoid."""
    with np.errstate(over="ignore"):  # exp(-alpha g) of a large negative g: inf, and a weight of exactly 0
        return gate * sigmoid(constant(gate, alpha) * gate)
