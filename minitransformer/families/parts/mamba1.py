"""The Mamba-1 mixer, the selective scan with a state per channel, as transformers' MambaMixer computes it without
its kernels (mamba_selective_scan's sequential loop for a prompt, mamba_selective_state_update in decode; Mamba's
and Falcon-Mamba's layers, and Jamba's Mamba layers):

    [x, z] = h W_in                     x, z [T, I]: the scan's input and the gate
    x = act(causal_conv(x))             each channel its own kernel of K positions: a dot product of length K
    [dt, B, C] = x W_x                  the selection, from each position's x: dt [T, Rdt], B and C [T, N]
    dt, B, C = RMSNorm(dt, B, C)        Falcon-Mamba's (config.bcdt_norm_eps): three norms without weights; Jamba's
                                        with gains (`gains`: dt_layernorm, b_layernorm, c_layernorm)
    Δ = softplus(dt W_dt + b_dt)        a step per channel and position, up from dt's low rank Rdt
    x_dt = Δ x                          elementwise
    h_t = exp(Δ_t A) ∘ h_t-1 + x_dt_t ⊗ B_t    A = -exp(A_log) [I, N]: each channel's N decays; x_dt ⊗ B an
                                        outer product, I N dot products of length 1; the update elementwise
    y_t = h_t C_t                       I dot products of length N a position
    y = (y + D x) silu(z)               D per channel: elementwise, then the gate
    m = y W_out

The scan is the recurrent form at every position, a prompt's as a decode step's (transformers' loop computes the same
products one position at a time; no chunked form exists for a decay per channel and state, as Mamba-2's SSD needs
one per head): 2 I N MACs a position, the same at any context. Its state is what the cache keeps between passes (the
layer's `State`, config.mixer_state: "conv" [K - 1, I], the last K - 1 inputs of the conv, and "ssm" [I, N]), neither
growing with the context. Pad slots of a left-padded batch enter neither: x is zeroed there before the conv and after
it (as transformers zeroes the mixer's input and the conv's output), so B, C and x_dt are zero and the state, zero
before a row's first token, stays zero through its pads.

Symbols: D d_model, I the channels (intermediate_size, expand D where a file has none), N the state per channel,
Rdt the rank of dt (time_step_rank), K the conv's kernel. Per position, its products with weights: in_proj 2 I D,
the conv I K, x_proj I (Rdt + 2 N), dt_proj Rdt I, out_proj I D; its scan's: x_dt ⊗ B, I N of length 1, and h C, I of
length N.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import constant, rms_norm, silu, without_pads
from ...engine.shapes import ShapeOnly
from ...engine.stages import CONV_WINDOWS, Stage, by_op
from ...engine.tape import Tape
from .attention import bias_of
from .blocks import LayerInputs
from .mamba2 import SSM_PROJECTIONS, conv_activation, decode_and_state, softplus
from .part import Part, Products, Tensor, Tensors, linear, plus
from .ssd import recurrent_form

# The published count of the selective scan (Tri Dao, state-spaces/mamba issue #110): 9 B L D N FLOPs for a batch of
# B sequences of L positions, D channels (our I) and a state of N; our ledger's products in the same scan, beside it.
PUBLISHED_SCAN_FLOPS = 9


@dataclass(frozen=True)
class Mamba1Mixer(Part):
    """The Mamba-1 mixer of a config with its shapes (families/mamba/config.py's MambaConfig: d_inner, state_size,
    dt_rank, conv_kernel), biases on in_proj and out_proj where use_bias, on the conv where use_conv_bias, and dt, B
    and C normed where the config's bcdt_norm_eps is a number (Falcon-Mamba's, without weights; `gains`: each norm
    with its gains, Jamba's dt_layernorm [Rdt], b_layernorm and c_layernorm [N])."""

    gains: bool = False

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        norms = {"ssm_norms": "the selection's RMSNorm gains: dt [Rdt], B and C [N] each"} if self.gains else {}
        return KINDS | norms

    def stages(self, config: Any) -> dict[str, Stage]:
        b = config.use_bias
        return by_op(
            Stage("ssm.in_proj", ("mixer.in_proj",), "matmul", f"[x, z] = h W_in{plus(b, 'in')}",
                  "h [T, D], W_in [D, 2I]", SSM_PROJECTIONS, product="projection"),
            Stage("ssm.split", ("mixer.x_in", "mixer.z"), "reshape", "x (the scan's input, I), z (the gate, I)",
                  "[T, 2I]"),
            Stage("ssm.conv", ("mixer.conv",), "matmul",
                  f"u = causal conv of x{plus(config.use_conv_bias, 'conv')}: each channel and position a dot "
                  "product of its last K inputs (the K - 1 before this pass kept in the conv state, zeros at the "
                  "start) with its kernel", "x [T, I], w [I, K]",
                  SSM_PROJECTIONS, state=CONV_WINDOWS, product="conv"),
            Stage("ssm.conv_act", ("mixer.x",), "activation", "x = act(u)  (SiLU)", "u [T, I]"),
            Stage("ssm.x_proj", ("mixer.x_proj",), "matmul", "[dt, B, C] = x W_x  (the selection, from x)",
                  "x [T, I], W_x [I, Rdt+2N]", SSM_PROJECTIONS, product="projection"),
            Stage("ssm.select", ("mixer.dt_low", "mixer.B", "mixer.C"), "reshape",
                  "dt (Rdt: the step's low rank), B and C (N each)", "[T, Rdt+2N]"),
            *((BCDT_NORM_GAINS if self.gains else BCDT_NORM,) if config.bcdt_norm_eps is not None else ()),
            Stage("ssm.dt_proj", ("mixer.dt_proj",), "matmul", "dt = dt W_dt  (its bias in softplus: ssm.dt)",
                  "dt [T, Rdt], W_dt [Rdt, I]", SSM_PROJECTIONS, product="projection"),
            Stage("ssm.dt", ("mixer.dt",), "activation", "Δ = softplus(dt + b_dt)  (a step per channel and position)",
                  "dt [T, I]"),
            Stage("ssm.discretize", ("mixer.dA", "mixer.x_dt"), "scale",
                  "exp(Δ A)  (A = -exp(A_log) [I, N]: each channel's N decays, < 1), x_dt = Δ x  (elementwise)",
                  "Δ [T, I], A [I, N], x [T, I]"),
            *recurrent_form(
                ("x_dt ⊗ B  (an outer product: I N dot products of length 1 a position)", "x_dt [T, I, 1], B [T, 1, N]"),
                ("h_t = exp(Δ_t A) ∘ h_t-1 + x_dt_t ⊗ B_t, position after position (elementwise; the last one kept "
                 "in the cache)", "h [I, N]"),
                ("y_t = C_t h_t^T  (I dot products of length N a position)", "C [T, 1, N], h^T [T, N, I]")),
            Stage("ssm.skip", ("mixer.y",), "scale", "y = y + D x  (D per channel)", "y, x [T, I]"),
            Stage("ssm.gate", ("mixer.gated",), "multiply", "y = y silu(z)", "y, z [T, I]"),
            Stage("ssm.out_proj", ("mixer.out",), "matmul", f"m = y W_out{plus(b, 'out')}", "y [T, I], W_out [I, D]",
                  SSM_PROJECTIONS, product="projection"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """h [T, D] -> m [T, D]; `inputs.cache` (the layer's state, or None: no cache) holds the conv and scan states,
        read and written in place; `inputs.pads`, the left pad slots of each row of a batch."""
        at, d, state, pads = at.declaring(self.declared(config)), at.dims, inputs.cache, inputs.pads
        inner, R, N = config.d_inner, config.dt_rank, config.state_size
        xz = at.matmul("ssm.in_proj", h, p.in_proj.weight.T, "T D, D 2I -> T 2I", bias=bias_of(p.in_proj))
        x, z = at.stage("ssm.split", (xz[..., :inner], xz[..., inner:]), "T I")
        conv_state, kernels = None if state is None else state["conv"], p.conv1d.weight[:, 0, :]
        # the conv's bias added to its sums before they are rounded, once, as torch's conv1d and the kernels do
        u = causal_conv(at, "ssm.conv", without_pads(x, d.past, pads), kernels, conv_state, "I", "K", bias_of(p.conv1d))
        x = at.stage("ssm.conv_act", without_pads(conv_activation(u, config), d.past, pads), "T I")
        dbc = at.matmul("ssm.x_proj", x, p.x_proj.weight.T, "T I, I Rdt+2N -> T Rdt+2N")
        dt, B, C = at.stage("ssm.select", (dbc[..., :R], dbc[..., R : R + N], dbc[..., R + N :]), "T Rdt; T N; T N")
        if config.bcdt_norm_eps is not None:
            normed = tuple(self.bcdt_norm(v, name, p, config) for v, name in zip((dt, B, C), BCDT_GAINS))
            dt, B, C = at.stage("ssm.bcdt_norm", normed, "T Rdt; T N; T N")
        dt = at.matmul("ssm.dt_proj", dt, p.dt_proj.weight.T, "T Rdt, Rdt I -> T I")
        dt = at.stage("ssm.dt", softplus(dt + p.dt_proj.bias), "T I")
        dA, x_dt = at.stage("ssm.discretize", (np.exp(dt[..., None] * -np.exp(p.A_log)), dt * x), "T I N; T I")
        update = at.matmul("ssm.input", x_dt[..., None], B[..., None, :], "T I 1, T 1 N -> T I N")
        before = zeros_state(x, config) if state is None else state["ssm"]
        states = at.stage("ssm.state", scan(dA, update, before), "T I N", replaceable=False)  # scanned: read only
        if state is not None and not isinstance(states, ShapeOnly):
            state["ssm"][...] = states[..., -1, :, :]
        y = at.matmul("ssm.output", C[..., None, :], states.swapaxes(-1, -2), "T 1 N, T N I -> T 1 I")
        y = at.stage("ssm.skip", y[..., 0, :] + x * p.D, "T I")
        y = at.stage("ssm.gate", np.multiply(y, silu(z), out=at.scratch(y)), "T I")
        return at.matmul("ssm.out_proj", y, p.out_proj.weight.T, "T I, I D -> T D", bias=bias_of(p.out_proj))

    def bcdt_norm(self, v, name: str, p: SimpleNamespace, config: Any):
        """v RMS-normed over its own width: with its gains where the mixer has them (Jamba's), else without."""
        if self.gains:
            return rms_norm(v, getattr(p, name).weight, config.bcdt_norm_eps)
        return weightless_norm(v, config)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """in_proj [2I, D], conv1d [I, 1, K], x_proj [Rdt+2N, I], dt_proj [I, Rdt] with its bias, A_log [I, N], D [I],
        out_proj [D, I]; biases on in_proj and out_proj where use_bias, on the conv where use_conv_bias. Falcon-Mamba's
        norms of dt, B and C have no weights (transformers' are buffers it does not save); Jamba's have gains."""
        D, inner, N, R, b = config.n_embd, config.d_inner, config.state_size, config.dt_rank, config.use_bias
        gains = dict(zip(BCDT_GAINS, (R, N, N))) if self.gains else {}
        return {
            **linear("in_proj", 2 * inner, D, b, "ssm_in"),
            "conv1d.weight": Tensor((inner, 1, config.conv_kernel), "ssm_conv"),
            **({"conv1d.bias": Tensor((inner,), "ssm_conv")} if config.use_conv_bias else {}),
            "x_proj.weight": Tensor((R + 2 * N, inner), "ssm_select"),
            **linear("dt_proj", inner, R, True, "ssm_select", "ssm_select"),
            "A_log": Tensor((inner, N), "ssm_channels"),
            "D": Tensor((inner,), "ssm_channels"),
            **linear("out_proj", D, inner, b, "ssm_out"),
            **{f"{name}.weight": Tensor((width,), "ssm_norms") for name, width in gains.items()},
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """in_proj, the conv, x_proj, dt_proj, the scan's two, out_proj, in the order they run."""
        D, inner, N, R = config.n_embd, config.d_inner, config.state_size, config.dt_rank
        return {
            "ssm.in_proj": (B * T * 2 * inner, D),  # h [T, D] x W_in [D, 2I]
            "ssm.conv": (B * T * inner, config.conv_kernel),  # each channel's K-wide window x its kernel
            "ssm.x_proj": (B * T * (R + 2 * N), inner),  # x [T, I] x W_x [I, Rdt+2N]
            "ssm.dt_proj": (B * T * inner, R),  # dt [T, Rdt] x W_dt [Rdt, I]
            **{op: (dots, macs // dots) for op, (dots, macs) in self.scan(config, T, t, B).items()},
            "ssm.out_proj": (B * T * D, inner),  # y [T, I] x W_out [I, D]
        }

    # A recurrent layer's scan (parts/hybrid.py reads these): its products as computed, the recurrent form at every T.
    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, MACs) of the scan's products in a pass of T positions: x_dt ⊗ B, B T I N dot products of
        length 1, and h C, B T I of length N, whatever the context t."""
        inner, N = config.d_inner, config.state_size
        return {"ssm.input": (B * T * inner * N, B * T * inner * N), "ssm.output": (B * T * inner, B * T * inner * N)}

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        """2 I N T: the form the scan is computed in."""
        return 2 * config.d_inner * config.state_size * T

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """No attention: a decode step's scan costs 2 I N MACs a layer at any context, against the weights'."""
        return (
            "2 (2 I N) FLOPs for the scan, at any context, against 2 I (3 D + K + 2 Rdt + 2 N) for the weights",
            "2 N / (3 D + K + 2 Rdt + 2 N)",
            f"D = {c.n_embd:,}, I = {c.d_inner:,}, N = {c.state_size}, Rdt = {c.dt_rank}, K = {c.conv_kernel}",
        )

    def scan_notes(self, c: Any, layers: int, n_prompt: int, n_new: int, label: str) -> list[str]:
        """count's lines on the selective scan: the prefill's and a decode step's, the published 9 B L D N FLOPs beside
        ours, and the state a layer keeps."""
        inner, N = c.d_inner, c.state_size
        ours, published = 2 * 2 * inner * N * n_prompt, PUBLISHED_SCAN_FLOPS * inner * N * n_prompt
        s, step = "s" if layers != 1 else "", f"2 I N = {2 * inner * N:,} MACs a layer"
        conv, ssm = ("(K - 1) I", inner * (c.conv_kernel - 1)), ("I N", inner * N)
        return [
            f"The selective scan ({layers} {label} layer{s}): the recurrent form at every position, a prompt's as a "
            f"decode step's",
            f"  the prefill (T = {n_prompt:,}): 2 I N T = {2 * inner * N * n_prompt:,} MACs a layer (x_dt ⊗ B, then "
            f"h C: {ours:,} FLOPs)",
            f"    against the published 9 B L D N = {published:,} FLOPs a layer (state-spaces/mamba#110, D = I "
            f"channels): Δ A 1, Δ B u 2, the associative scan's 2 L steps of a multiply and an add 4, C h 2; the "
            f"5 B L D N apart, Δ A and the scan's steps, are elementwise here, no sum of products",
            *decode_and_state(c, n_prompt, n_new, step, conv, ssm),
        ]


KINDS = {
    "ssm_in": "state-space in-projection W_in [2I, D] (x, z)",
    "ssm_conv": "causal conv kernels [I, 1, K] and their biases [I]",
    "ssm_select": "the selection's projections: x_proj [Rdt+2N, I] (dt, B, C), dt_proj [I, Rdt] and its bias [I]",
    "ssm_channels": "per-channel A_log [I, N] and D [I]",
    "ssm_out": "state-space out-projection W_out [D, I]",
}
# Falcon-Mamba's norms of the selection (transformers' FalconMambaWeightlessRMSNorm: no gains)
BCDT_NORM = Stage("ssm.bcdt_norm", ("mixer.dt_normed", "mixer.B_normed", "mixer.C_normed"), "norm",
                  "dt, B, C = RMSNorm(dt), RMSNorm(B), RMSNorm(C)  (each over its own width, no weights)",
                  "dt [T, Rdt], B, C [T, N]")  # fmt: skip
# Jamba's (JambaMambaMixer's dt_layernorm, b_layernorm, c_layernorm): the same norms, each with its gains
BCDT_GAINS = ("dt_layernorm", "b_layernorm", "c_layernorm")
BCDT_NORM_GAINS = replace(
    BCDT_NORM,
    equation="dt, B, C = RMSNorm(dt) w_dt, RMSNorm(B) w_B, RMSNorm(C) w_C  (each over its own width, with its gains)",
)


def weightless_norm(v, config: Any):
    """v / sqrt(mean(v^2) + eps) over the last axis, no gains (eps: the config's bcdt_norm_eps, mixer_rms_eps)."""
    return rms_norm(v, constant(v, 1.0), config.bcdt_norm_eps)


def zeros_state(x, config: Any):
    """The state before a pass from position 0 without a cache: zeros [.., I, N]."""
    shape = (*x.shape[:-2], config.d_inner, config.state_size)
    return ShapeOnly(shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros(shape, x.dtype)


def scan(dA, update, h):
    """Every position's state [.., T, I, N]: h_t = dA_t ∘ h_t-1 + update_t, position after position from h [.., I, N]
    before the first (elementwise: no dot products), as transformers' loop computes it."""
    if isinstance(update, ShapeOnly) or isinstance(dA, ShapeOnly):
        return ShapeOnly(update.shape, update.dtype)
    states = np.empty_like(update)
    h = h.astype(update.dtype, copy=False)
    for t in range(update.shape[-3]):
        h = np.multiply(dA[..., t, :, :], h, out=states[..., t, :, :])
        h += update[..., t, :, :]
    return states
