"""The Mamba-2 mixer, as transformers' Mamba2Mixer.torch_forward computes it (Mamba-2's layers and Nemotron-H's Mamba
layers; the scan is parts/ssd.py's):

    [z, xBC, dt] = h W_in                     z [T, I], xBC [T, Cv] (x, B and C), dt [T, Hs]
    xBC = act(causal_conv(xBC))               each channel its own kernel of K positions: a dot product of length K
    x, B, C = xBC                             x: Hs heads of P; B, C: Ng groups of N (shared by the group's heads)
    dt = softplus(dt + dt_bias)               a step per head and position (clamped to time_step_limit in chunks)
    a = dt A, x_dt = dt x                        A = -exp(A_log) per head: a decay exp(a) < 1 per head and position
    y = scan(x_dt, a, B, C)                      in chunks for a prompt, one step at a time in decode
    y = y + D x                               D per head: elementwise
    y = RMSNorm(y silu(z)) per group          the gate, then a norm over each of Ng groups of I / Ng numbers
    m = y W_out

A config may state the mixer otherwise (its MixerShapes properties; Falcon-H1's): in_proj's output multiplied by a
number for each of z, x, B, C and dt (`in_proj_multipliers`), the norm before the gate or no norm at all
(`gated_norm`), out_proj's bias its own (`out_proj_bias`).

Its state is what the cache keeps between passes (the layer's `State`, MixerShapes.mixer_state: "conv" [K - 1, Cv],
the last K - 1 positions the conv reads, and "ssm" [Hs, P, N], the scan's state), neither growing with the context.
Pad slots of a left-padded batch enter neither: their xBC is zeroed before the conv and after it (transformers zeroes
the mixer's input there; zeroing xBC itself keeps in_proj's bias, where it has one, out of the conv too).

Symbols: D d_model, Hs heads of P, N the state per head and channel, Ng groups (B and C shared by a group's heads),
I = Hs P, Cv = I + 2 Ng N the conv's channels, K its kernel, L the chunk. Per position, its products with weights:
in_proj D (I + Cv + Hs), the conv Cv K (each channel a dot product of length K with its kernel), out_proj I D; its
scan's are parts/ssd.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import ACTIVATIONS, constant, rms_norm, silu, without_pads
from ...engine.shapes import ShapeOnly
from ...engine.stages import CONV_WINDOWS, Stage, by_op
from ...engine.tape import Tape
from ..mamba2.config import GATE_NORM, GATE_ONLY, NORM_GATE, MixerShapes
from . import ssd
from .attention import bias_of
from .blocks import LayerInputs
from .part import Part, Products, Tensor, Tensors, linear, plus

# The products of a state-space mixer with weights (count's summary groups products by them), beside its scan's (the
# engine's STATE), which read and write a state of fixed size and hold no weights.
SSM_PROJECTIONS = "state-space projections and conv"


@dataclass(frozen=True)
class Mamba2Mixer(Part):
    """The Mamba-2 mixer of a config with its shapes (MixerShapes: Mamba-2's, Nemotron-H's), biases on in_proj and
    out_proj where the config's use_bias, on the conv where use_conv_bias."""

    kinds = {
        "ssm_in": "state-space in-projection W_in [I+Cv+Hs, D] (z, x, B, C, dt)",
        "ssm_conv": "causal conv kernels [Cv, 1, K] and their biases [Cv]",
        "ssm_heads": "per-head dt_bias, A_log and D [Hs] each",
        "ssm_out": "state-space out-projection W_out [D, I]",
    }

    def stages(self, config: MixerShapes) -> dict[str, Stage]:
        """Its stages around the scan (parts/ssd.py declares the scan's)."""
        return by_op(
            Stage("ssm.in_proj", ("mixer.in_proj",), "matmul", "[z, xBC, dt] = h W_in", "h [T, D], W_in [D, I+Cv+Hs]",
                  SSM_PROJECTIONS, product="projection"),
            *((IN_PROJ_SCALE,) if config.in_proj_multipliers is not None else ()),
            Stage("ssm.split", ("mixer.z", "mixer.xBC", "mixer.dt_in"), "reshape",
                  "z (the gate, I), xBC (x, B and C: Cv), dt (one per head)", "[T, I+Cv+Hs]"),
            Stage("ssm.conv", ("mixer.conv",), "matmul",
                  f"u = causal conv of xBC{plus(config.use_conv_bias, 'conv')}: each channel and position a dot "
                  "product of its last K inputs (the K - 1 before this pass kept in the conv state, zeros at the "
                  "start) with its kernel", "xBC [T, Cv], w [Cv, K]",
                  SSM_PROJECTIONS, state=CONV_WINDOWS, product="conv"),
            Stage("ssm.conv_act", ("mixer.conv_act",), "activation", "xBC = act(u)  (SiLU)", "u [T, Cv]"),
            Stage("ssm.heads", ("mixer.x", "mixer.B", "mixer.C"), "reshape",
                  "x -> Hs heads of P (Ng groups of Hg); B, C -> Ng groups of N, shared by a group's heads", "xBC [T, Cv]"),
            Stage("ssm.dt", ("mixer.dt",), "activation",
                  "dt = softplus(dt + dt_bias)  (clamped to time_step_limit in the chunked form)", "dt [T, Hs]"),
            Stage("ssm.discretize", ("mixer.dA", "mixer.x_dt"), "scale",
                  "a = dt A  (A = -exp(A_log): a decay exp(a) < 1 per head), x_dt = dt x  (per-head scalars: "
                  "elementwise)", "dt [Hs, T], x [Hs, T, P]"),
            Stage("ssm.skip", ("mixer.y",), "scale", "y = y + D x  (D per head), heads side by side", "y, x [Hs, T, P]"),
            *GATED_NORMS[config.gated_norm],
            Stage("ssm.out_proj", ("mixer.out",), "matmul", f"m = y W_out{plus(config.out_proj_bias, 'out')}",
                  "y [T, I], W_out [I, D]", SSM_PROJECTIONS, product="projection"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: MixerShapes, at: Tape, inputs: LayerInputs):
        """h [T, D] -> m [T, D]; `inputs.cache` (the layer's state, or None: no cache) holds the conv and scan states,
        read and written in place; `inputs.pads`, the left pad slots of each row of a batch."""
        at, d, state, pads = at.declaring(self.declared(config)), at.dims, inputs.cache, inputs.pads
        inner, Cv = config.d_inner, config.conv_dim
        zxbcdt = at.matmul("ssm.in_proj", h, p.in_proj.weight.T, "T D, D I+Cv+Hs -> T I+Cv+Hs", bias=bias_of(p.in_proj))
        if config.in_proj_multipliers is not None:
            zxbcdt = at.stage("ssm.proj_scale", zxbcdt * segments(zxbcdt, config), "T I+Cv+Hs")
        split = (zxbcdt[..., :inner], zxbcdt[..., inner : inner + Cv], zxbcdt[..., inner + Cv :])
        z, xbc, dt = at.stage("ssm.split", split, "T I; T Cv; T Hs")
        conv_state, kernels = None if state is None else state["conv"], p.conv1d.weight[:, 0, :]
        # the conv's bias added to its sums before they are rounded, once, as torch's conv1d and the kernels do
        u = causal_conv(
            at, "ssm.conv", without_pads(xbc, d.past, pads), kernels, conv_state, "Cv", "K", bias_of(p.conv1d)
        )
        xbc = at.stage("ssm.conv_act", without_pads(conv_activation(u, config), d.past, pads), "T Cv")
        x, B, C = at.stage("ssm.heads", heads(xbc, config), "Ng Hg T P; Ng T N; Ng T N")
        recurrent = state is not None and d.past > 0 and d.T == 1  # a decode step: as transformers, the recurrent form
        dt = at.stage("ssm.dt", step_sizes(dt, p.dt_bias, config, clamp=not recurrent), "Ng Hg T")
        a, x_dt = at.stage("ssm.discretize", discretize(dt, x, p.A_log, config), "Ng Hg T; Ng Hg T P")
        before = zeros_state(x, config) if state is None else grouped(state["ssm"], config)
        if recurrent:
            y, after = ssd.recurrent_step(x_dt, a, B, C, before, at)
        else:
            y, after = ssd.chunked_scan(x_dt, a, B, C, before, config.chunk_size, at)
        if state is not None:
            state["ssm"][...] = after.reshape(state["ssm"].shape)
        y = at.stage("ssm.skip", skip(y, x, p.D), "T I")
        if config.gated_norm == NORM_GATE:
            y = at.stage("ssm.norm", group_norm(y, p.norm.weight, config), "T I")
        y = at.stage("ssm.gate", np.multiply(y, silu(z), out=at.scratch(y)), "T I")
        if config.gated_norm == GATE_NORM:
            y = at.stage("ssm.norm", group_norm(y, p.norm.weight, config), "T I")
        return at.matmul("ssm.out_proj", y, p.out_proj.weight.T, "T I, I D -> T D", bias=bias_of(p.out_proj))

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """in_proj [I+Cv+Hs, D], conv1d [Cv, 1, K], dt_bias, A_log and D [Hs], the gated norm's gains [I] (where it
        has a norm), out_proj [D, I]; biases where the config has them."""
        D, inner, Cv, Hs, b = config.n_embd, config.d_inner, config.conv_dim, config.ssm_heads, config.use_bias
        return {
            **linear("in_proj", config.in_proj_dim, D, b, "ssm_in"),
            "conv1d.weight": Tensor((Cv, 1, config.conv_kernel), "ssm_conv"),
            **({"conv1d.bias": Tensor((Cv,), "ssm_conv")} if config.use_conv_bias else {}),
            **{name: Tensor((Hs,), "ssm_heads") for name in ("dt_bias", "A_log", "D")},
            **({"norm.weight": Tensor((inner,), "norms")} if config.gated_norm != GATE_ONLY else {}),
            **linear("out_proj", D, inner, config.out_proj_bias, "ssm_out"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """in_proj, the conv, the scan's (parts/ssd.py: the recurrent form in a decode step, the chunks' otherwise),
        out_proj, in the order they run."""
        D, Cv = config.n_embd, config.conv_dim
        scan = {op: (dots, macs // dots) for op, (dots, macs) in self.scan(config, T, t, B).items()}
        return {
            "ssm.in_proj": (B * T * config.in_proj_dim, D),  # h [T, D] x W_in [D, I+Cv+Hs]
            "ssm.conv": (B * T * Cv, config.conv_kernel),  # each channel's K-wide window x its kernel
            **scan,
            "ssm.out_proj": (B * T * D, config.d_inner),  # y [T, I] x W_out [I, D]
        }

    # A recurrent layer's scan (parts/hybrid.py reads these): its products as computed, and in the recurrent form.
    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        return ssd.scan_products(config, T, t, B)

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        return ssd.recurrent_macs(config, T)

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """No attention: a decode step's scan costs 2 Hs P N MACs a layer at any context, against the weights'."""
        return (
            "2 (2 Hs P N) FLOPs for the scan, at any context, against 2 (D (I + Cv + Hs) + Cv K + I D) for the weights",
            "2 Hs P N / (D (I + Cv + Hs) + Cv K + I D)",
            f"D = {c.n_embd:,}, Hs = {c.ssm_heads}, P = {c.ssm_head_dim}, N = {c.state_size}, I = {c.d_inner:,}, "
            f"Cv = {c.conv_dim:,}, K = {c.conv_kernel}",
        )

    def scan_notes(self, c: Any, layers: int, n_prompt: int, n_new: int, kv_numbers: int = 0) -> list[str]:
        """count's lines on the Mamba layers: the prefill's scan in chunks as computed, with the recurrent form beside
        it; a decode step's, the same at any context; and the state a layer keeps (against an attention layer's keys
        and values a position, `kv_numbers`, where the model has them)."""
        Hs, P, N = c.ssm_heads, c.ssm_head_dim, c.state_size
        n, L = ssd.chunking(n_prompt, c.chunk_size)
        padding = n * L - n_prompt
        padded = f", the last padded with {padding:,} zero positions" if padding else ""
        chunked = sum(macs for _, macs in self.scan(c, n_prompt, n_prompt).values())
        recurrent_form = self.scan_recurrent_macs(c, n_prompt)
        conv, ssm = c.conv_dim * (c.conv_kernel - 1), Hs * P * N  # what a layer keeps, whatever the context
        s, step = "s" if layers != 1 else "", f"2 Hs P N = {2 * Hs * P * N:,} MACs a layer (x_dt ⊗ B, then h C)"
        kv = f"; an attention layer's keys and values take {kv_numbers:,} numbers a position, " if kv_numbers else ""
        kv += f"{(conv + ssm) // kv_numbers:,} positions' worth of them" if kv_numbers else ""
        return [
            f"The state-space scan ({layers} Mamba-2 layer{s}): a prompt in chunks (chunk_size {c.chunk_size:,}), a "
            f"decode step in the recurrent form",
            f"  the prefill (T = {n_prompt:,}): {n:,} chunk{'s' if n != 1 else ''} of {L:,}{padded}: {chunked:,} MACs a "
            f"layer as computed (C B^T, the mix, each chunk's state and its read of the state before it),",
            f"    against 2 Hs P N T = {recurrent_form:,} had its {n_prompt:,} positions run one at a time in the "
            f"recurrent form ({chunked / recurrent_form:.3g}x as many, in matrix products over whole chunks instead of "
            f"{n_prompt:,} steps)",
            *decode_and_state(c, n_prompt, n_new, step, ("(K - 1) Cv", conv), ("Hs P N", ssm), kv),
        ]


def decode_and_state(
    c: Any, n_prompt: int, n_new: int, step: str, conv: tuple[str, int], ssm: tuple[str, int], beside: str = ""
) -> list[str]:
    """count's lines on a state-space layer's decode steps after n_prompt positions, `step` (its MACs: the same at any
    context, the last of n_new - 1 steps' and the trained context's alike), and the state a layer keeps, `conv` and
    `ssm` (each its formula and its numbers; `beside`: what the state line adds)."""
    (conv_formula, conv_numbers), (ssm_formula, ssm_numbers) = conv, ssm
    t = n_prompt + n_new - 1
    alike = f" (the last step here, at t = {t:,}, and one at t = {c.n_positions:,} alike)" if n_new > 1 else ""
    return [
        f"  a decode step: {step} at any context{alike}",
        f"  state: conv {conv_formula} = {conv_numbers:,} + ssm {ssm_formula} = {ssm_numbers:,} numbers a layer, "
        f"{(conv_numbers + ssm_numbers) * 4:,} bytes in float32, whatever the context{beside}",
    ]


# How y meets the gate z after the scan (config.gated_norm): its stages in the order they run.
GATE = Stage("ssm.gate", ("mixer.gated",), "multiply", "y = y silu(z)", "y, z [T, I]")
NORM = Stage("ssm.norm", ("mixer.normed",), "norm", "y = RMSNorm(y) over each of Ng groups of I/Ng", "y [T, I]")
GATED_NORMS = {GATE_NORM: (GATE, NORM), NORM_GATE: (NORM, GATE), GATE_ONLY: (GATE,)}
IN_PROJ_SCALE = Stage("ssm.proj_scale", ("mixer.proj_scaled",), "scale",
                      "[z, xBC, dt] = [z, xBC, dt] μ  (μ: one multiplier for each of z, x, B, C and dt)",
                      "[T, I+Cv+Hs]")  # fmt: skip


def segments(zxbcdt, config: MixerShapes):
    """μ [I+Cv+Hs]: in_proj's output's multipliers, one for each of its segments z [I], x [I], B [Ng N], C [Ng N] and
    dt [Hs] (config.in_proj_multipliers), in the pass's dtype."""
    GN = config.n_groups * config.state_size
    widths = (config.d_inner, config.d_inner, GN, GN, config.ssm_heads)
    return np.repeat(np.array(config.in_proj_multipliers, dtype=zxbcdt.dtype), widths)


def conv_activation(u, config: MixerShapes):
    """act(u): the conv's outputs [.., Cv, T, 1] (its bias in them: causal_conv) back to [.., T, Cv], the activation
    applied."""
    return ACTIVATIONS[config.ssm_act](u[..., 0].swapaxes(-1, -2))


def grouped(ssm, config: MixerShapes):
    """A state [.., Hs, P, N] as [.., Ng, Hg, P, N] (a view)."""
    return ssm.reshape(*ssm.shape[:-3], config.n_groups, config.ssm_heads // config.n_groups, *ssm.shape[-2:])


def heads(xbc, config: MixerShapes):
    """x [.., Ng, Hg, T, P], B and C [.., Ng, T, N] from xBC [.., T, Cv]."""
    inner, GN = config.d_inner, config.n_groups * config.state_size
    lead, T = xbc.shape[:-2], xbc.shape[-2]
    Ng, Hg = config.n_groups, config.ssm_heads // config.n_groups
    x = xbc[..., :inner].reshape(*lead, T, Ng, Hg, config.ssm_head_dim)
    x = x.swapaxes(-2, -4).swapaxes(-3, -4)  # [.., Ng, Hg, T, P]
    B = xbc[..., inner : inner + GN].reshape(*lead, T, Ng, config.state_size).swapaxes(-2, -3)
    C = xbc[..., inner + GN :].reshape(*lead, T, Ng, config.state_size).swapaxes(-2, -3)
    return x, B, C


def softplus(x):
    """log(1 + e^x), and x itself past 20 (torch's threshold)."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    with np.errstate(over="ignore"):
        return np.where(x > constant(x, 20.0), x, np.log1p(np.exp(x)))


def step_sizes(dt, dt_bias, config: MixerShapes, clamp: bool):
    """dt [.., T, Hs] -> softplus(dt + dt_bias) [.., Ng, Hg, T], clamped to time_step_limit where `clamp` (the
    chunked form: transformers clamps there and not in its recurrent step)."""
    lead, T = dt.shape[:-2], dt.shape[-2]
    dt = softplus(dt + dt_bias)
    if clamp and not isinstance(dt, ShapeOnly):
        low, high = config.time_step_limit
        if (low, high) != (0.0, float("inf")):
            dt = np.clip(dt, constant(dt, low), constant(dt, high))
    return dt.swapaxes(-1, -2).reshape(*lead, config.n_groups, config.ssm_heads // config.n_groups, T)


def discretize(dt, x, A_log, config: MixerShapes):
    """(a = dt A [.., Ng, Hg, T], x_dt = dt x [.., Ng, Hg, T, P]), A = -exp(A_log) per head."""
    Ng, Hg = config.n_groups, config.ssm_heads // config.n_groups
    A = -np.exp(A_log.reshape(Ng, Hg, 1))
    return dt * A, x * dt[..., None]


def zeros_state(x, config: MixerShapes):
    """The state before a pass from position 0 without a cache: zeros [.., Ng, Hg, P, N]."""
    shape = (*x.shape[:-2], config.ssm_head_dim, config.state_size)
    return ShapeOnly(shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros(shape, x.dtype)


def skip(y, x, D):
    """y + D x, per head, then the heads side by side: [.., Ng, Hg, T, P] -> [.., T, I]."""
    Ng, Hg, T, P = y.shape[-4:]
    y = y + x * D.reshape(Ng, Hg, 1, 1)
    return y.reshape(*y.shape[:-4], Ng * Hg, T, P).swapaxes(-2, -3).reshape(*y.shape[:-4], T, Ng * Hg * P)


def group_norm(y, weight, config: MixerShapes):
    """RMSNorm over each of the Ng groups of I / Ng numbers, times the gains [I]."""
    Ng = config.n_groups
    groups = y.reshape(*y.shape[:-1], Ng, y.shape[-1] // Ng)
    # the gains after the norm, on [T, I]: the norm runs in blocks of rows (ops.rowwise), which a gain of each group,
    # [Ng, I / Ng], does not follow once a block cuts a position's groups apart (a long prompt's broadcasting error)
    normed = rms_norm(groups, constant(y, 1.0), config.norm_eps).reshape(y.shape)
    normed *= weight
    return normed
