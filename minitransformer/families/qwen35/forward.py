"""The Qwen3.5 forward pass, as transformers' Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM compute it: the pre-norm
block (families/blocks.py's PreNorm, one for each kind of layer: ByKind) whose mixer is, layer by layer
(config.layer_types), a Gated DeltaNet (linear attention) or gated full attention, followed by a SwiGLU MLP (the Llama
family's) or, in the MoE models, k of E experts and a shared expert.

Against the Llama family (families/llama/forward.py), whose attention core, MLP and experts it reuses:
- every RMSNorm scales by (1 + w), as Gemma's (families/gemma/forward.py's gemma_norm);
- a full-attention layer's q_proj makes, for each head, its q and a gate as wide (`q_gate_split`); q and k are
  RMS-normed per head (q_norm, k_norm), only their first dr = head_dim x partial_rotary_factor numbers are rotated
  (rotary.py's rotate_partial, at config.rope(layer); the multimodal rotary's sections reduce to one position per
  text token), and the attention's output is
  multiplied by sigmoid(gate) before o_proj (`gate`);
- a Gated DeltaNet layer (`gated_deltanet`): four projections of h (qkv, z, b, a), a depthwise causal conv over qkv
  (engine/causal_conv.py) and its activation, q and k l2-normed per key head and q scaled by dk^-1/2, each value
  head's write strength beta = sigmoid(b) and decay g = -exp(A_log) softplus(a + dt_bias), the gated delta rule
  (delta_rule.py: recurrent in a decode step, in chunks over a prompt), an RMSNorm of each head's output gated by
  silu(z), and out_proj. Its cache is a state (the conv's last K - 1 inputs and each value head's [dk, dv] delta-rule
  state) instead of keys and values; a left-padded row's pad slots are zeroed before the projections, so that they
  never enter it;
- a MoE layer: the router's softmax over E experts, its top k renormalised to sum to 1, each expert a SwiGLU of its
  tokens (families/moe.py), and a shared expert on every token, weighted by sigmoid(h W_shared_gate).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import (
    ACTIVATIONS,
    merge_heads,
    rms_norm,
    sigmoid,
    split_into_heads,
    ungroup_heads,
    without_pads,
)
from ...engine.ops import constant as const
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..blocks import ByKind, LayerInputs, PreNorm
from ..decoder import Decoder
from ..gemma.forward import gemma_norm
from ..llama.forward import attend, bias_of, mlp
from ..moe import shared_expert, softmax_router, swiglu_experts
from ..rotary import rotate_partial
from .config import FULL, LINEAR, Qwen35Config
from .delta_rule import delta_rule


def gated_attention(h, p: SimpleNamespace, config: Qwen35Config, at: Tape, inputs: LayerInputs):
    """Grouped-query attention with a sigmoid gate on its output: q and the gate from one q_proj, q and k RMS-normed
    per head, the first dr numbers of each head rotated."""
    H, Hkv, dh = config.n_head, config.n_kv_head, config.head_dim
    qg = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*2*dh -> T H*2*dh", bias=bias_of(p.q_proj))
    q, gate = at.stage("q_gate_split", split_query_and_gate(qg, H, dh), "H T dh; T H*dh")
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
    k, v = at.stage("split_heads", (split_into_heads(k, Hkv), split_into_heads(v, Hkv)), "Hkv T dh; Hkv T dh")
    q = at.stage("q_norm", gemma_norm(q, p.q_norm, config), "H T dh")  # each head over its dh, (1 + w)
    k = at.stage("k_norm", gemma_norm(k, p.k_norm, config), "Hkv T dh")
    turned = (rotate_partial(q, *inputs.rotary), rotate_partial(k, *inputs.rotary))
    q, k = at.stage("rope", turned, "H T dh; Hkv T dh")
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    z = at.stage("gate", z * sigmoid(gate), "T H*dh")  # each number by its own gate: no dot products
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=bias_of(p.o_proj))


def split_query_and_gate(qg, n_head: int, d_head: int):
    """[..., T, H 2 dh], each head's q then its gate -> q [..., H, T, dh] and the gates [..., T, H dh] (views)."""
    *lead, T, _ = qg.shape
    heads = qg.reshape(*lead, T, n_head, 2 * d_head)
    return heads[..., :d_head].swapaxes(-3, -2), heads[..., d_head:].reshape(*lead, T, n_head * d_head)


def gated_deltanet(h, p: SimpleNamespace, config: Qwen35Config, at: Tape, inputs: LayerInputs):
    """Linear attention with a delta-rule state: projections, the causal conv, the gated delta rule, the gated norm,
    out_proj (see the module docstring). `inputs.cache`: the layer's cache handle (its "conv" and "recurrent"
    arrays), or None without a cache; `inputs.pads`, a left-padded batch's pad slots."""
    state, pads = inputs.cache, inputs.pads
    Hk, Hv, Gv, dk, dv = (
        config.linear_key_heads,
        config.linear_value_heads,
        config.value_groups,
        config.linear_key_dim,
        config.linear_value_dim,
    )
    if pads is not None:  # a left-padded row's pad slots feed the conv and the state zeros
        h = at.stage("linear.pads", without_pads(h, at.dims.past, pads), "T D")
    qkv = at.matmul("linear.qkv", h, p.in_proj_qkv.weight.T, "T D, D Dc -> T Dc")
    z = at.matmul("linear.z", h, p.in_proj_z.weight.T, "T D, D Hv*dv -> T Hv*dv")
    b = at.matmul("linear.b", h, p.in_proj_b.weight.T, "T D, D Hv -> T Hv")
    a = at.matmul("linear.a", h, p.in_proj_a.weight.T, "T D, D Hv -> T Hv")
    conv_state = state["conv"] if state is not None else None
    c = causal_conv(at, "linear.conv", qkv, p.conv1d.weight[:, 0, :], conv_state, channels="Dc", kernel="Kc")
    c = at.stage("linear.conv_act", ACTIVATIONS[config.hidden_act](c[..., 0].swapaxes(-1, -2)), "T Dc")
    q, k, v = at.stage("linear.split", split_linear_heads(c, Hk, Gv, dk, dv), "Hk T dk; Hk T dk; Hk Gv T dv")
    q, k = at.stage("linear.l2norm", (l2norm(q), l2norm(k)), "Hk T dk; Hk T dk")
    q = at.stage("linear.scale", q * const(q, dk**-0.5), "Hk T dk")
    beta = at.stage("linear.beta", per_value_head(sigmoid(b), Hk, Gv), "Hk Gv T")
    g = at.stage("linear.decay", per_value_head(decay(a, p.A_log, p.dt_bias), Hk, Gv), "Hk Gv T")
    recurrent = None if state is None else state["recurrent"].reshape(*state["recurrent"].shape[:-3], Hk, Gv, dk, dv)
    o = delta_rule(at, q, k, v, g, beta, recurrent)  # [..., Hk, Gv, T, dv]
    gates = split_into_heads(z, Hv).reshape(o.shape)  # each value head's z, [..., Hk, Gv, T, dv]
    o = at.stage("linear.norm", gated_rms_norm(o, gates, p.norm.weight, config.norm_eps), "Hk Gv T dv")
    o = at.stage("linear.merge", merge_heads(ungroup_heads(o)), "T Hv*dv")
    return at.matmul("linear.out", o, p.out_proj.weight.T, "T Hv*dv, Hv*dv D -> T D")


def split_linear_heads(c, Hk: int, Gv: int, dk: int, dv: int):
    """[..., T, 2 Hk dk + Hv dv] (q, k, v side by side) -> q, k [..., Hk, T, dk] and v [..., Hk, Gv, T, dv]: value
    head Gv h + j belongs to key head h, as transformers' repeat_interleave pairs them (views)."""
    key_width = Hk * dk
    q, k = split_into_heads(c[..., :key_width], Hk), split_into_heads(c[..., key_width : 2 * key_width], Hk)
    v = split_into_heads(c[..., 2 * key_width :], Hk * Gv)
    return q, k, v.reshape(*v.shape[:-3], Hk, Gv, *v.shape[-2:])


def per_value_head(x, Hk: int, Gv: int):
    """[..., T, Hv] -> [..., Hk, Gv, T]: one number a position and value head, beside its key head's group."""
    return x.swapaxes(-1, -2).reshape(*x.shape[:-2], Hk, Gv, x.shape[-2])


def l2norm(x, eps: float = 1e-6):
    """x / sqrt(sum(x^2) + eps) over each head's numbers (transformers' l2norm, FLA's eps)."""
    squares = np.add.reduce(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(squares + const(x, eps))


def softplus(x):
    """log(1 + e^x), as torch computes it: x itself above 20 (torch's threshold), where e^-x is below float32's
    resolution of x."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    return np.where(x > const(x, 20.0), x, np.log1p(np.exp(np.minimum(x, const(x, 20.0)))))


def decay(a, A_log, dt_bias):
    """Each position's and value head's log-decay g = -exp(A_log) softplus(a + dt_bias) <= 0: the state is
    multiplied by e^g at that position (A_log and dt_bias: one a value head)."""
    return -np.exp(A_log) * softplus(a + dt_bias)


def gated_rms_norm(o, gates, weight, eps: float):
    """RMSNorm of each head's dv numbers (gains w, not 1 + w), times silu(z): the output gate."""
    return rms_norm(o, weight, eps) * ACTIVATIONS["silu"](gates)


def mixture(h, p: SimpleNamespace, config: Qwen35Config, at: Tape):
    """The routed experts (the router's top k of E, renormalised) and the shared expert, weighted by its gate."""
    E, k, _, _ = config.experts
    chosen, gates = softmax_router(h, p.gate.weight, k, at)

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.gate_proj.weight, w.up_proj.weight, w.down_proj.weight

    m = swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at, F="Fe")
    y = shared_expert(h, p.shared_expert, config.hidden_act, at)
    score = at.matmul("shared.score", h, p.shared_expert_gate.weight.T, "T D, D 1 -> T 1")
    y = at.stage("shared.weigh", y * sigmoid(score), "T D")
    return at.stage("moe.shared_add", m + y, "T D")


def feed_forward(h, p: SimpleNamespace, config: Qwen35Config, at: Tape):
    """The MLP (the Llama family's SwiGLU), or in a MoE model the experts and the shared expert."""
    llama_config: Any = config  # llama.mlp reads hidden_act alone, which a Qwen3.5 config has too
    return mixture(h, p, config, at) if config.is_moe else mlp(h, p, llama_config, at)


# Token ids [T] (or [B, T]) -> logits [R, V]: the decoder (its norms Gemma's (1 + w)) around a pre-norm block for each
# kind of layer, the Gated DeltaNet's under `linear_attn` and the gated attention's under `self_attn`. A batch's pads
# are masked from the attention layers' keys and zeroed before the DeltaNet layers' projections.
qwen3_5 = Decoder(
    ByKind(
        {
            LINEAR: PreNorm(
                gated_deltanet,
                feed_forward,
                gemma_norm,
                ("input_layernorm", "linear_attn", "post_attention_layernorm", "mlp"),
            ),
            FULL: PreNorm(gated_attention, feed_forward, gemma_norm),
        }
    ),
    gemma_norm,
)
