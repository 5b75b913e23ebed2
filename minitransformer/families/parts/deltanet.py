"""The Gated DeltaNet layer (linear attention with a delta-rule state), as transformers' Qwen3_5GatedDeltaNet computes
it (Qwen3.5's; Qwen3-Next's and Kimi Linear's are its kin): four projections of h (qkv, z, b, a), a depthwise causal
conv over qkv (engine/causal_conv.py) and its activation, q and k l2-normed per key head and q scaled by dk^-1/2,
each value head's write strength beta = sigmoid(b) and decay g = -exp(A_log) softplus(a + dt_bias), the gated delta
rule (parts/delta_rule.py: recurrent in a decode step, in chunks over a prompt), an RMSNorm of each head's output
gated by silu(z), and out_proj.

Its cache is a state (the conv's last K - 1 inputs and each value head's [dk, dv] delta-rule state) instead of keys
and values; a left-padded row's pad slots are zeroed before the projections, so that they never enter it.

Qwen3-Next's layer (`fused`) makes the four projections in two products, in_proj_qkvz and in_proj_ba, whose columns
are grouped by key head (each key head's q, k, then its Gv value heads' v and z; its value heads' b, then a), and cuts
them apart into Qwen3.5's q, k, v (the conv's channels in Qwen3.5's order), z, b and a (`linear.cut`): the same
MACs in two dispatches instead of four.

Symbols: Hk key heads of dk, Hv value heads of dv (Gv = Hv / Hk a key head), Dc = 2 Hk dk + Hv dv conv channels of
kernel K. Per position, its products with weights: D Dc (q, k, v), D Hv dv (z), 2 D Hv (b, a), Dc K (the conv: each
channel a dot product of length K with its kernel) and Hv dv D (out); its delta rule holds no weights and reads no
past positions (parts/delta_rule.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import ACTIVATIONS, merge_heads, rms_norm, sigmoid, split_into_heads, ungroup_heads, without_pads
from ...engine.ops import constant as const
from ...engine.shapes import ShapeOnly
from ...engine.stages import CONV_WINDOWS, Stage, by_op
from ...engine.tape import Tape
from . import delta_rule
from .blocks import LayerInputs
from .part import Part, Products, Tensor, Tensors, linear

LINEAR_PROJECTIONS = "linear attention projections and conv"


def projection(op: str, names: str, equation: str, reads: str) -> Stage:
    return Stage(op, (names,), "matmul", equation, reads, LINEAR_PROJECTIONS, product="projection")


# The four in-projections as Qwen3.5 makes them, and as Qwen3-Next makes them: two products grouped by key head, cut.
SEPARATE = (
    projection("linear.qkv", "linear_attn.in_proj_qkv", "[q k v] = h W_qkv", "h [T, D], W_qkv [D, Dc]"),
    projection("linear.z", "linear_attn.in_proj_z", "z = h W_z  (the output gate)", "h [T, D], W_z [D, Hv*dv]"),
    projection(
        "linear.b", "linear_attn.in_proj_b", "b = h W_b  (a value head's write strength)", "h [T, D], W_b [D, Hv]"
    ),
    projection("linear.a", "linear_attn.in_proj_a", "a = h W_a  (a value head's decay)", "h [T, D], W_a [D, Hv]"),
)
FUSED = (
    projection("linear.qkvz", "linear_attn.in_proj_qkvz",
               "[q k v z] = h W_qkvz  (by key head: its q, k, then its Gv value heads' v and z)",
               "h [T, D], W_qkvz [D, Dc+Hv*dv]"),
    projection("linear.ba", "linear_attn.in_proj_ba", "[b a] = h W_ba  (by key head: its value heads' b, then a)",
               "h [T, D], W_ba [D, 2Hv]"),
    Stage("linear.cut", ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_b",
                         "linear_attn.in_proj_a"), "reshape",
          "[q k v], z, b, a: each key head's columns cut apart (q, k and v side by side, as the conv reads them)",
          "[T, Dc+Hv*dv], [T, 2Hv]"),
)  # fmt: skip
BETA = Stage("linear.beta", ("linear_attn.beta",), "activation", "beta = sigmoid(b)", "b [T, Hv]")
DECAY = Stage(
    "linear.decay", ("linear_attn.g",), "activation", "g = -exp(A_log) softplus(a + dt_bias)  (log decay)", "a [T, Hv]"
)


def around_the_rule(
    projections: tuple[Stage, ...], split: str, heads: str, gates: tuple[Stage, ...], gate: str, dv: str
) -> dict[str, Stage]:
    """A delta-rule layer's stages around the rule (parts/delta_rule.py declares the rule's): a left-padded row's pad
    slots zeroed, its `projections`, the conv of [q k v] and its activation, the split into heads (`split` says how),
    q and k l2-normed per head (`heads` of them) and q scaled, its `gates`; then its output, each head's RMSNorm times
    `gate`(z) (heads of `dv`), the heads merged, W_out."""
    return by_op(
        Stage("linear.pads", ("linear_attn.unpadded",), "mask",
              "h = 0 at a left-padded row's pad slots (none enters the state)", "h [T, D]"),
        *projections,
        Stage("linear.conv", ("linear_attn.conv",), "matmul",
              "c = conv([q k v]): each channel's last Kc inputs . its kernel", "windows [Dc, T, Kc], w [Dc, Kc, 1]",
              LINEAR_PROJECTIONS, state=CONV_WINDOWS, product="conv"),
        Stage("linear.conv_act", ("linear_attn.conv_act",), "activation", "c = act(c)  (SiLU)", "c [T, Dc]"),
        Stage("linear.split", ("linear_attn.q", "linear_attn.k", "linear_attn.v"), "reshape", split, "c [T, Dc]"),
        Stage("linear.l2norm", ("linear_attn.q_normed", "linear_attn.k_normed"), "norm",
              "q, k = x / |x|  (each head)", f"q, k [{heads}, T, dk]"),
        Stage("linear.scale", ("linear_attn.q_scaled",), "scale", "q = q / sqrt(dk)", f"q [{heads}, T, dk]"),
        *gates,
        Stage("linear.norm", ("linear_attn.normed",), "norm", f"o = RMSNorm(o) * {gate}(z)  (each head)",
              f"o, z [Hv, T, {dv}]"),
        Stage("linear.merge", ("linear_attn.z",), "reshape", f"o -> [T, Hv*{dv}]", f"o [Hv, T, {dv}]"),
        projection("linear.out", "linear_attn.out", "o = o W_out", f"o [T, Hv*{dv}], W_out [Hv*{dv}, D]"),
    )  # fmt: skip


@dataclass(frozen=True)
class GatedDeltaNet(Part):
    """A Gated DeltaNet layer of a config with its shapes (linear_key_heads, linear_value_heads, linear_key_dim,
    linear_value_dim, linear_kernel, conv_channels, value_groups; hidden_act the conv's activation). `fused`: its
    in-projections Qwen3-Next's two, grouped by key head (in_proj_qkvz, in_proj_ba), cut apart."""

    fused: bool = False

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        projections = (
            "W_qkvz [Dc+Hv*dv, D], W_ba [2Hv, D]"
            if self.fused
            else "W_qkv [Dc, D], W_z [Hv*dv, D], W_b and W_a [Hv, D]"
        )
        return {
            "linear_in": f"DeltaNet in-projections {projections}",
            "linear_conv": "DeltaNet conv kernels [Dc, 1, Kc]",
            "linear_decay": "DeltaNet decay parameters A_log and dt_bias [Hv]",
            "linear_out": "DeltaNet output weights W_out [D, Hv*dv]",
        }

    def stages(self, config: Any) -> dict[str, Stage]:
        split = "q, k -> Hk heads of dk; v -> Hv heads of dv"
        return around_the_rule(FUSED if self.fused else SEPARATE, split, "Hk", (BETA, DECAY), "silu", "dv")

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """Linear attention with a delta-rule state: projections, the causal conv, the gated delta rule, the gated
        norm, out_proj. `inputs.cache`: the layer's cache handle (its "conv" and "recurrent" arrays), or None without
        a cache; `inputs.pads`, a left-padded batch's pad slots."""
        at, state, pads = at.declaring(self.declared(config)), inputs.cache, inputs.pads
        Hk, Hv, Gv = config.linear_key_heads, config.linear_value_heads, config.value_groups
        dk, dv = config.linear_key_dim, config.linear_value_dim
        if pads is not None:  # a left-padded row's pad slots feed the conv and the state zeros
            h = at.stage("linear.pads", without_pads(h, at.dims.past, pads), "T D")
        qkv, z, b, a = self.projections(h, p, config, at)
        conv_state = state["conv"] if state is not None else None
        c = causal_conv(at, "linear.conv", qkv, p.conv1d.weight[:, 0, :], conv_state, channels="Dc", kernel="Kc")
        c = at.stage("linear.conv_act", ACTIVATIONS[config.hidden_act](c[..., 0].swapaxes(-1, -2)), "T Dc")
        q, k, v = at.stage("linear.split", split_linear_heads(c, Hk, Gv, dk, dv), "Hk T dk; Hk T dk; Hk Gv T dv")
        # q and k's norms, the decay and the whole rule in float32 from the values as rounded, its output rounded once
        # (and the state kept in float32): transformers upcasts them itself, as the kernels do (docs/precision.md);
        # beta is its sigmoid in the model's dtype
        wide = at.in_float32()
        q, k = wide.stage("linear.l2norm", (l2norm(q), l2norm(k)), "Hk T dk; Hk T dk")
        q = wide.stage("linear.scale", q * const(q, dk**-0.5), "Hk T dk")
        beta = at.stage("linear.beta", per_value_head(sigmoid(b), Hk, Gv), "Hk Gv T")
        g = wide.stage("linear.decay", per_value_head(decay(a, p.A_log, p.dt_bias), Hk, Gv), "Hk Gv T")
        recurrent = (
            None if state is None else state["recurrent"].reshape(*state["recurrent"].shape[:-3], Hk, Gv, dk, dv)
        )
        o = at.in_format(delta_rule.delta_rule(wide, q, k, v, g, beta, recurrent), "delta.out")  # [..., Hk, Gv, T, dv]
        gates = split_into_heads(z, Hv).reshape(o.shape)  # each value head's z, [..., Hk, Gv, T, dv]
        o = at.stage("linear.norm", gated_rms_norm(o, gates, p.norm.weight, config.norm_eps), "Hk Gv T dv")
        o = at.stage("linear.merge", merge_heads(ungroup_heads(o)), "T Hv*dv")
        return at.matmul("linear.out", o, p.out_proj.weight.T, "T Hv*dv, Hv*dv D -> T D")

    def projections(self, h, p: SimpleNamespace, config: Any, at: Tape) -> tuple:
        """[q k v] [T, Dc], z [T, Hv dv], b and a [T, Hv]: four products, or (fused) two cut apart."""
        if not self.fused:
            qkv = at.matmul("linear.qkv", h, p.in_proj_qkv.weight.T, "T D, D Dc -> T Dc")
            z = at.matmul("linear.z", h, p.in_proj_z.weight.T, "T D, D Hv*dv -> T Hv*dv")
            b = at.matmul("linear.b", h, p.in_proj_b.weight.T, "T D, D Hv -> T Hv")
            return qkv, z, b, at.matmul("linear.a", h, p.in_proj_a.weight.T, "T D, D Hv -> T Hv")
        qkvz = at.matmul("linear.qkvz", h, p.in_proj_qkvz.weight.T, "T D, D Dc+Hv*dv -> T Dc+Hv*dv")
        ba = at.matmul("linear.ba", h, p.in_proj_ba.weight.T, "T D, D 2*Hv -> T 2*Hv")
        return at.stage("linear.cut", cut_by_key_head(qkvz, ba, config), "T Dc; T Hv*dv; T Hv; T Hv")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """in_proj_qkv [Dc, D], in_proj_z [Hv dv, D], in_proj_b and in_proj_a [Hv, D] (fused: in_proj_qkvz [Dc + Hv dv,
        D] and in_proj_ba [2 Hv, D]), conv1d [Dc, 1, K], dt_bias and A_log [Hv], the gated norm's gains [dv], out_proj
        [D, Hv dv]: no biases."""
        D, Dc, Hv, dv = config.n_embd, config.conv_channels, config.linear_value_heads, config.linear_value_dim
        tensors: Tensors = {}
        for name, rows in self.in_widths(config).items():
            tensors |= linear(f"in_proj_{name}", rows, D, False, "linear_in")
        return tensors | {
            "conv1d.weight": Tensor((Dc, 1, config.linear_kernel), "linear_conv"),
            "dt_bias": Tensor((Hv,), "linear_decay"),
            "A_log": Tensor((Hv,), "linear_decay"),
            "norm.weight": Tensor((dv,), "norms"),
            "out_proj.weight": Tensor((D, Hv * dv), "linear_out"),
        }

    def in_widths(self, config: Any) -> dict[str, int]:
        """Each in-projection's width by its name (its module in_proj_<name>, its op linear.<name>)."""
        Dc, Hv, dv = config.conv_channels, config.linear_value_heads, config.linear_value_dim
        return {"qkvz": Dc + Hv * dv, "ba": 2 * Hv} if self.fused else {"qkv": Dc, "z": Hv * dv, "b": Hv, "a": Hv}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Its projections, the conv and the delta rule's products (the solve's as its record has it: the dense [C, C]
        x [C, dk + dv] product, of length C, whose rows are 1 .. C - 1 long as computed), in the order they run."""
        c, D = config, config.n_embd
        Dc, Hv, dv = c.conv_channels, c.linear_value_heads, c.linear_value_dim
        rule = {op: (dots, macs // dots) for op, (dots, macs) in self.scan(config, T, t, B).items()}
        if "delta.solve" in rule:
            C, N = delta_rule.chunking(T)
            rule["delta.solve"] = (B * Hv * N * C * (c.linear_key_dim + dv), C)
        return {
            **{f"linear.{name}": (B * T * rows, D) for name, rows in self.in_widths(config).items()},  # h x W_in
            "linear.conv": (B * T * Dc, c.linear_kernel),  # each channel's K-wide window x its kernel
            **rule,
            "linear.out": (B * T * D, Hv * dv),
        }

    # A recurrent layer's scan (parts/hybrid.py reads these): its products as computed, and in the recurrent form.
    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        return delta_rule.scan_products(config, T, B)

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        return delta_rule.recurrent_macs(config, T)


def cut_by_key_head(qkvz, ba, config: Any) -> tuple:
    """Qwen3-Next's fused projections [.., T, Hk (2 dk + 2 Gv dv)] and [.., T, Hk 2 Gv], each key head's columns
    side by side, cut into Qwen3.5's [q k v] [.., T, Dc] (every head's q, then k, then v), z [.., T, Hv dv], b and a
    [.., T, Hv] (value head Gv g + j of key head g, as transformers' fix_query_key_value_ordering orders them)."""
    Hk, Gv, dk, dv = config.linear_key_heads, config.value_groups, config.linear_key_dim, config.linear_value_dim
    *lead, T, _ = qkvz.shape
    Hv = Hk * Gv
    if isinstance(qkvz, ShapeOnly):
        shapes = ((*lead, T, config.conv_channels), (*lead, T, Hv * dv), (*lead, T, Hv), (*lead, T, Hv))
        return tuple(ShapeOnly(shape, qkvz.dtype) for shape in shapes)
    heads = qkvz.reshape(*lead, T, Hk, 2 * dk + 2 * Gv * dv)
    q, k = heads[..., :dk], heads[..., dk : 2 * dk]
    v, z = heads[..., 2 * dk : 2 * dk + Gv * dv], heads[..., 2 * dk + Gv * dv :]
    qkv = np.concatenate([x.reshape(*lead, T, -1) for x in (q, k, v)], axis=-1)
    pairs = ba.reshape(*lead, T, Hk, 2 * Gv)
    b, a = (x.reshape(*lead, T, Hv) for x in (pairs[..., :Gv], pairs[..., Gv:]))
    return qkv, z.reshape(*lead, T, Hv * dv), b, a


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
