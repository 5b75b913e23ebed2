"""The Mamba-2 mixer, as transformers' Mamba2Mixer.torch_forward computes it (Nemotron-H's Mamba layers are the same):

    [z, xBC, dt] = h W_in                     z [T, I], xBC [T, Cv] (x, B and C), dt [T, Hs]
    xBC = act(causal_conv(xBC))               each channel its own kernel of K positions: a dot product of length K
    x, B, C = xBC                             x: Hs heads of P; B, C: Ng groups of N (shared by the group's heads)
    dt = softplus(dt + dt_bias)               a step per head and position (clamped to time_step_limit in chunks)
    a = dt A, x_dt = dt x                        A = -exp(A_log) per head: a decay exp(a) < 1 per head and position
    y = scan(x_dt, a, B, C)                      ssd.py: in chunks for a prompt, one step at a time in decode
    y = y + D x                               D per head: elementwise
    y = RMSNorm(y silu(z)) per group          the gate, then a norm over each of Ng groups of I / Ng numbers
    m = y W_out

Its state is what the cache keeps between passes (the layer's `State`, MixerShapes.mixer_state: "conv" [K - 1, Cv],
the last K - 1 positions the conv reads, and "ssm" [Hs, P, N], the scan's state), neither growing with the context.
Pad slots of a left-padded batch enter neither: their xBC is zeroed before the conv and after it (transformers zeroes
the mixer's input there; zeroing xBC itself keeps in_proj's bias, where it has one, out of the conv too).
"""

from __future__ import annotations

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import ACTIVATIONS, constant, rms_norm, silu, without_pads
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from .config import MixerShapes
from .ssd import chunked_scan, recurrent_step


def mamba_mixer(h, p, config: MixerShapes, at: Tape, state, pads=None):
    """h [T, D] -> m [T, D]; `state` (the cache's LayerState, or None: no cache) holds the conv and scan states, read
    and written in place; `pads`, the left pad slots of each row of a batch."""
    d = at.dims
    T, inner, Cv = d.T, config.d_inner, config.conv_dim
    zxbcdt = at.matmul("ssm.in_proj", h, p.in_proj.weight.T, "T D, D I+Cv+Hs -> T I+Cv+Hs", bias=_bias(p.in_proj))
    z, xbc, dt = at.stage(
        "ssm.split",
        (zxbcdt[..., :inner], zxbcdt[..., inner : inner + Cv], zxbcdt[..., inner + Cv :]),
        "T I; T Cv; T Hs",
    )
    conv_state = None if state is None else state["conv"]
    u = causal_conv(at, "ssm.conv", without_pads(xbc, d.past, pads), p.conv1d.weight[:, 0, :], conv_state, "Cv", "K")
    xbc = at.stage("ssm.conv_act", without_pads(conv_activation(u, p.conv1d, config), d.past, pads), "T Cv")
    x, B, C = at.stage("ssm.heads", heads(xbc, config), "Ng Hg T P; Ng T N; Ng T N")
    recurrent = state is not None and d.past > 0 and T == 1  # a decode step: as transformers, the recurrent form
    dt = at.stage("ssm.dt", step_sizes(dt, p.dt_bias, config, clamp=not recurrent), "Ng Hg T")
    a, x_dt = at.stage("ssm.discretize", discretize(dt, x, p.A_log, config), "Ng Hg T; Ng Hg T P")
    before = zeros_state(x, config) if state is None else grouped(state["ssm"], config)
    if recurrent:
        y, after = recurrent_step(x_dt, a, B, C, before, at)
    else:
        y, after = chunked_scan(x_dt, a, B, C, before, config.chunk_size, at)
    if state is not None:
        state["ssm"][...] = after.reshape(state["ssm"].shape)
    y = at.stage("ssm.skip", skip(y, x, p.D), "T I")
    y = at.stage("ssm.gate", np.multiply(y, silu(z), out=at.scratch(y)), "T I")
    y = at.stage("ssm.norm", group_norm(y, p.norm.weight, config), "T I")
    return at.matmul("ssm.out_proj", y, p.out_proj.weight.T, "T I, I D -> T D", bias=_bias(p.out_proj))


def conv_activation(u, conv, config: MixerShapes):
    """act(u + b): the conv's outputs [.., Cv, T, 1] back to [.., T, Cv], its bias added, the activation applied."""
    u = u[..., 0].swapaxes(-1, -2)
    bias = getattr(conv, "bias", None)
    return ACTIVATIONS[config.ssm_act](u if bias is None else u + bias)


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
    eps = config.norm_eps
    return rms_norm(groups, weight.reshape(Ng, -1), eps).reshape(y.shape)


def _bias(linear):
    return getattr(linear, "bias", None)
