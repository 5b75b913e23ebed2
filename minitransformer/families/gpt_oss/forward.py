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
  by the attention factor (families/rotary.py);
- the mixture of experts: a router with a bias, its k largest logits chosen and a softmax over those k alone
  (Mixtral: a softmax over all E, then the top k renormalised); each expert a clamped SwiGLU with biases, whose gate
  and up are one product with the fused W_gu [D, 2F] (gate at even columns, up at odd ones):
  g = min(g, limit), u = clip(u, -limit, limit), a = (u + 1) g sigmoid(alpha g), then W_down [F, D].
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np

from ...engine.ops import add_mask, constant, group_heads, rotate, sigmoid, softmax, ungroup_heads
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..blocks import LayerInputs, PreNorm
from ..decoder import Decoder
from ..llama.forward import attend_to_cache, heads, scale_scores
from ..moe import experts, top_k
from .config import GptOssConfig

# The shapes of a layer's expert records: each token's rows in its k experts, which is what the experts computed
# between them (engine/gathered.py).
EXPERT_SHAPES = {
    "expert.gather": "T k*D",
    "expert.gate_up": "T D, D k*2F -> T k*2F",
    "expert.clamp": "T k*2F",
    "expert.act": "T k*F",
    "expert.mul": "T k*F",
    "expert.down": "T F, F k*D -> T k*D",
    "expert.weigh": "T k*D",
}


def attention(h, p: SimpleNamespace, config: GptOssConfig, at: Tape, inputs: LayerInputs):
    """The Llama family's grouped-query attention with biases, whose softmax also weighs each head's sink."""
    q, k, v = heads(h, p, config, at)
    q, k = at.stage("rope", (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs, partial(attend, p.sinks))


def attend(sinks, q, K, V, bias, config: GptOssConfig, at: Tape):
    """llama.attend with each head's sink logit as one more column of its scores, dropped after the softmax."""
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")
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


def mixture(h, p: SimpleNamespace, config: GptOssConfig, at: Tape):
    """The experts: the router (with a bias) picks each token's k largest logits and weighs those experts by a
    softmax over the k; each expert computes its tokens' rows of the clamped SwiGLU."""
    E, k, w = config.n_experts, config.top_k, p.experts
    logits = at.matmul("router", h, p.router.weight.T, "T D, D E -> T E", bias=p.router.bias)
    chosen, top = at.stage("router.topk", top_k(logits, k, at), "T k")
    gates = at.stage("router.softmax", softmax(top), "T k")

    def clamped_swiglu(ex: Tape, e: int, xe):
        gu = ex.matmul("expert.gate_up", xe, w.gate_up_proj[e], "Te D, D 2F -> Te 2F", bias=w.gate_up_proj_bias[e])
        gu = ex.stage("expert.clamp", clamp(gu, config.swiglu_limit), "Te 2F")
        a = ex.stage("expert.act", glu(gu[:, ::2], config.swiglu_alpha), "Te F")
        a = ex.stage("expert.mul", np.multiply(gu[:, 1::2] + constant(gu, 1.0), a, out=ex.scratch(a)), "Te F")
        return ex.matmul("expert.down", a, w.down_proj[e], "Te F, F D -> Te D", bias=w.down_proj_bias[e])

    return experts(h, chosen, gates, E, at, EXPERT_SHAPES, clamped_swiglu)


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


# Token ids [T] (or [B, T]) -> logits [R, V]: the Llama family's decoder (each layer with its own window's mask, the
# rotary tables x YaRN's attention factor) and pre-norm block, with these parts.
gpt_oss = Decoder(PreNorm(attention, mixture))
