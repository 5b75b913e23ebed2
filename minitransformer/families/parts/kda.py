"""Kimi Delta Attention (KDA), as transformers' KimiLinearDeltaAttention computes it: the Gated DeltaNet's layer
(parts/deltanet.py) with a decay a key channel instead of a head, from a low-rank gate. H heads of dk (keys, queries
and values alike):

- q, k, v = h W_q, h W_k, h W_v [T, H dk], three products; a depthwise causal conv of kernel K over them, side by side
  (their three kernels, q_conv1d, k_conv1d and v_conv1d, one conv of Dc = 3 H dk channels: engine/causal_conv.py),
  and its activation (SiLU); q and k l2-normed per head, q scaled by dk^-1/2;
- the decay, a log-decay a position, head and key channel: g = -exp(A_log) softplus(h W_fa W_fb + dt_bias) [T, H dk],
  through a rank-dk bottleneck (f_a_proj [dk, D], then f_b_proj [H dk, dk]: two products with weights), A_log one
  number a head, dt_bias one a channel;
- each head's write strength beta = sigmoid(h W_b) [T, H];
- the gated delta rule with that decay (parts/delta_rule.py, `per_channel`: S = diag(e^g) S, then Gated DeltaNet's
  read, correct and query), recurrent in a decode step, in chunks over a prompt;
- the output gate through another rank-dk bottleneck, z = h W_ga W_gb [T, H dk], an RMSNorm of each head's output
  times sigmoid(z), and o_proj.

Its cache is a state: the conv's last K - 1 inputs [K - 1, 3 H dk] and each head's [dk, dk] delta-rule state. Per
position, its products with weights: 3 D H dk (q, k, v), D dk + dk H dk (the decay's gate), D H (beta), D dk + dk H
dk (the output gate), 3 H dk K (the conv) and H dk D (out); its delta rule 3 H dk^2 MACs in a decode step, whatever
the context (no product reads a past position: the state holds them all).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import ACTIVATIONS, merge_heads, rms_norm, sigmoid, split_into_heads, without_pads
from ...engine.ops import constant as const
from ...engine.shapes import ShapeOnly
from ...engine.stages import Stage
from ...engine.tape import Tape
from . import delta_rule
from .blocks import LayerInputs
from .deltanet import BETA, around_the_rule, l2norm, per_value_head, projection, softplus, split_linear_heads
from .part import Part, Products, Tensor, Tensors, linear


@dataclass(frozen=True)
class KimiDeltaAttention(Part):
    """A KDA layer of a config with its shapes (linear_heads H, linear_head_dim dk, linear_kernel K; the delta rule's
    linear_key_heads, linear_value_heads, linear_key_dim and linear_value_dim, which are H and dk; hidden_act the
    conv's activation; norm_eps the gated norm's)."""

    kinds = {
        "linear_in": "KDA projections W_q, W_k, W_v [Hv*dk, D], W_b [Hv, D]",
        "linear_conv": "KDA conv kernels (q, k, v) [Hv*dk, 1, Kc] each",
        "linear_gate": "KDA low-rank gates W_fa, W_ga [dk, D] (the decay's, the output's), W_fb, W_gb [Hv*dk, dk]",
        "linear_decay": "KDA decay parameters A_log [Hv], dt_bias [Hv*dk]",
        "linear_out": "KDA output weights W_out [D, Hv*dk]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        return around_the_rule(
            (projection("linear.q", "linear_attn.q_proj", "q = h W_q", "h [T, D], W_q [D, Hv*dk]"),
             projection("linear.k", "linear_attn.k_proj", "k = h W_k", "h [T, D], W_k [D, Hv*dk]"),
             projection("linear.v", "linear_attn.v_proj", "v = h W_v", "h [T, D], W_v [D, Hv*dk]"),
             Stage("linear.join", ("linear_attn.qkv",), "reshape", "[q k v] side by side, as the conv reads them",
                   "q, k, v [T, Hv*dk]")),
            "q, k, v -> Hv heads of dk", "Hv",
            (projection("linear.f_a", "linear_attn.f_a_proj", "f = h W_fa  (the decay's gate, down to rank dk)",
                        "h [T, D], W_fa [D, dk]"),
             projection("linear.f_b", "linear_attn.f_b_proj", "f = f W_fb  (a number a head and key channel)",
                        "f [T, dk], W_fb [dk, Hv*dk]"),
             Stage("linear.decay", ("linear_attn.g",), "activation",
                   "g = -exp(A_log) softplus(f + dt_bias)  (log decay, each head's key channels)", "f [T, Hv*dk]"),
             projection("linear.b", "linear_attn.b_proj", "b = h W_b  (a head's write strength)", "h [T, D], W_b [D, Hv]"),
             BETA,
             projection("linear.g_a", "linear_attn.g_a_proj", "z = h W_ga  (the output gate, down to rank dk)",
                        "h [T, D], W_ga [D, dk]"),
             projection("linear.g_b", "linear_attn.g_b_proj", "z = z W_gb", "z [T, dk], W_gb [dk, Hv*dk]")),
            "sigmoid", "dk",
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """KDA: projections, the causal conv, the decay's and beta's gates, the delta rule a decay a key channel, the
        output's gated norm, o_proj. `inputs.cache`: the layer's cache handle (its "conv" and "recurrent" arrays), or
        None without a cache; `inputs.pads`, a left-padded batch's pad slots."""
        H, dk = config.linear_heads, config.linear_head_dim
        # this layer's value heads are dk wide (dv, which MLA's layers use for their own values)
        at, state, pads = at.declaring(self.declared(config)).with_sizes(dv=dk), inputs.cache, inputs.pads
        if pads is not None:  # a left-padded row's pad slots feed the conv and the state zeros
            h = at.stage("linear.pads", without_pads(h, at.dims.past, pads), "T D")
        q = at.matmul("linear.q", h, p.q_proj.weight.T, "T D, D Hv*dk -> T Hv*dk")
        k = at.matmul("linear.k", h, p.k_proj.weight.T, "T D, D Hv*dk -> T Hv*dk")
        v = at.matmul("linear.v", h, p.v_proj.weight.T, "T D, D Hv*dk -> T Hv*dk")
        qkv = at.stage("linear.join", side_by_side(q, k, v), "T Dc")
        kernels = side_by_side(*(w.weight[:, 0, :] for w in (p.q_conv1d, p.k_conv1d, p.v_conv1d)), axis=0)
        conv_state = state["conv"] if state is not None else None
        c = causal_conv(at, "linear.conv", qkv, kernels, conv_state, channels="Dc", kernel="Kc")
        c = at.stage("linear.conv_act", ACTIVATIONS[config.hidden_act](c[..., 0].swapaxes(-1, -2)), "T Dc")
        q, k, v = at.stage("linear.split", split_linear_heads(c, H, 1, dk, dk), "Hk T dk; Hk T dk; Hk Gv T dv")
        # q and k's norms, the decay and the whole rule in float32 from the values as rounded, its output rounded once
        # (and the state kept in float32), as transformers and the kernels compute them (parts/deltanet.py's, alike)
        wide = at.in_float32()
        q, k = wide.stage("linear.l2norm", (l2norm(q), l2norm(k)), "Hk T dk; Hk T dk")
        q = wide.stage("linear.scale", q * const(q, dk**-0.5), "Hk T dk")
        f = at.matmul("linear.f_a", h, p.f_a_proj.weight.T, "T D, D dk -> T dk")
        f = at.matmul("linear.f_b", f, p.f_b_proj.weight.T, "T dk, dk Hv*dk -> T Hv*dk")
        g = wide.stage("linear.decay", per_channel_decay(f, p.A_log, p.dt_bias, H), "Hk Gv T dk")
        b = at.matmul("linear.b", h, p.b_proj.weight.T, "T D, D Hv -> T Hv")
        beta = at.stage("linear.beta", per_value_head(sigmoid(b), H, 1), "Hk Gv T")
        recurrent = None if state is None else state["recurrent"].reshape(*state["recurrent"].shape[:-3], H, 1, dk, dk)
        o = delta_rule.delta_rule(wide, q, k, v, g, beta, recurrent, per_channel=True)  # [..., H, 1, T, dk]
        o = at.in_format(o, "delta.out")
        z = at.matmul("linear.g_a", h, p.g_a_proj.weight.T, "T D, D dk -> T dk")
        z = at.matmul("linear.g_b", z, p.g_b_proj.weight.T, "T dk, dk Hv*dk -> T Hv*dk")
        gates = split_into_heads(z, H).reshape(o.shape)  # each head's z, [..., H, 1, T, dk]
        o = at.stage("linear.norm", rms_norm(o, p.o_norm.weight, config.norm_eps) * sigmoid(gates), "Hk Gv T dv")
        o = at.stage("linear.merge", merge_heads(o[..., 0, :, :]), "T Hv*dk")
        return at.matmul("linear.out", o, p.o_proj.weight.T, "T Hv*dk, Hv*dk D -> T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_proj, k_proj, v_proj [H dk, D], their conv kernels [H dk, 1, K], A_log [1, 1, H, 1], dt_bias [H dk],
        f_a_proj and g_a_proj [dk, D], f_b_proj and g_b_proj [H dk, dk], b_proj [H, D], o_norm [dk], o_proj [D, H dk],
        as the published checkpoints and transformers' save_pretrained name them: no biases."""
        D, H, dk, K = config.n_embd, config.linear_heads, config.linear_head_dim, config.linear_kernel
        width = H * dk
        return {
            **linear("q_proj", width, D, False, "linear_in"),
            **linear("k_proj", width, D, False, "linear_in"),
            **linear("v_proj", width, D, False, "linear_in"),
            "q_conv1d.weight": Tensor((width, 1, K), "linear_conv"),
            "k_conv1d.weight": Tensor((width, 1, K), "linear_conv"),
            "v_conv1d.weight": Tensor((width, 1, K), "linear_conv"),
            "A_log": Tensor((1, 1, H, 1), "linear_decay"),
            "dt_bias": Tensor((width,), "linear_decay"),
            **linear("f_a_proj", dk, D, False, "linear_gate"),
            **linear("f_b_proj", width, dk, False, "linear_gate"),
            **linear("b_proj", H, D, False, "linear_in"),
            **linear("g_a_proj", dk, D, False, "linear_gate"),
            **linear("g_b_proj", width, dk, False, "linear_gate"),
            "o_norm.weight": Tensor((dk,), "norms"),
            **linear("o_proj", D, width, False, "linear_out"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Its projections, the conv, the two low-rank gates and the delta rule's products (the solve's as its record
        has it: the dense [C, C] x [C, 2 dk] product, of length C), in the order they run."""
        D, H, dk, K = config.n_embd, config.linear_heads, config.linear_head_dim, config.linear_kernel
        rule = {op: (dots, macs // dots) for op, (dots, macs) in self.scan(config, T, t, B).items()}
        if "delta.solve" in rule:
            C, N = delta_rule.chunking(T)
            rule["delta.solve"] = (B * H * N * C * 2 * dk, C)
        return {
            "linear.q": (B * T * H * dk, D),
            "linear.k": (B * T * H * dk, D),
            "linear.v": (B * T * H * dk, D),
            "linear.conv": (B * T * 3 * H * dk, K),  # each channel's K-wide window x its kernel
            "linear.f_a": (B * T * dk, D),  # h [T, D] x W_fa [D, dk]
            "linear.f_b": (B * T * H * dk, dk),  # f [T, dk] x W_fb [dk, H dk]
            "linear.b": (B * T * H, D),
            **rule,
            "linear.g_a": (B * T * dk, D),
            "linear.g_b": (B * T * H * dk, dk),
            "linear.out": (B * T * D, H * dk),
        }

    # A recurrent layer's scan (parts/hybrid.py reads these): its products as computed, and in the recurrent form.
    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        return delta_rule.scan_products(config, T, B, per_channel=True)

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        return delta_rule.recurrent_macs(config, T)


def side_by_side(*arrays, axis: int = -1):
    """Arrays joined along `axis` (q, k and v for the conv; their kernels)."""
    if any(isinstance(a, ShapeOnly) for a in arrays):
        shape = list(arrays[0].shape)
        shape[axis] = sum(a.shape[axis] for a in arrays)
        return ShapeOnly(shape, arrays[0].dtype)
    return np.concatenate(arrays, axis=axis)


def per_channel_decay(f, A_log, dt_bias, H: int):
    """Each position's, head's and key channel's log-decay g = -exp(A_log) softplus(f + dt_bias) <= 0 [..., H, 1, T,
    dk], from f [..., T, H dk] (A_log [1, 1, H, 1] one number a head, dt_bias [H dk] one a channel)."""
    g = -np.exp(A_log.reshape(H, 1, 1)) * split_into_heads(softplus(f + dt_bias), H)  # [..., H, T, dk]
    return g[..., None, :, :]
