"""The Mamba-2 mixer, as transformers' Mamba2Mixer.torch_forward computes it (Nemotron-H's Mamba layers are the same):

    [z, xBC, dt] = h W_in                     z [T, I], xBC [T, Cv] (x, B and C), dt [T, Hs]
    xBC = act(causal_conv(xBC))               each channel its own kernel of K positions: a dot product of length K
    x, B, C = xBC                             x: Hs heads of P; B, C: Ng groups of N (shared by the group's heads)
    dt = softplus(dt + dt_bias)               a step per head and position (clamped to time_step_limit in chunks)
    a = dt A, x̄ = dt x                        A = -exp(A_log) per head: a decay exp(a) < 1 per head and position
    y = scan(x̄, a, B, C)                      ssd.py: in chunks for a prompt, one step at a time in decode
    y = y + D x                               D per head: elementwise
    y = RMSNorm(y silu(z)) per group          the gate, then a norm over each of Ng groups of I / Ng numbers
    m = y W_out

Its state is what the cache keeps between passes (the layer's `State`, MixerShapes.mixer_state: "conv" [K - 1, Cv],
the last K - 1 positions the conv reads, and "ssm" [Hs, P, N], the scan's state), neither growing with the context.
Pad slots of a left-padded batch enter neither: their xBC is zeroed before the conv and after it, as transformers
zeroes padded positions' states.
"""

from __future__ import annotations

import numpy as np

from ...engine.ops import ACTIVATIONS, constant, rms_norm, silu
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from .config import MixerShapes
from .ssd import chunked_scan, recurrent_step


def mamba_mixer(h, p, config: MixerShapes, at: Tape, state, pads=None):
    """h [T, D] -> m [T, D]; `state` (the cache's LayerState, or None: no cache) holds the conv and scan states, read
    and written in place; `pads`, the left pad slots of each row of a batch."""
    d = at.dims
    T, inner, Cv = d.T, config.d_inner, config.conv_dim
    fresh = d.past == 0 or state is None  # the states before this pass are zeros
    zxbcdt = at.matmul("ssm.in_proj", h, p.in_proj.weight.T, "T D, D I+Cv+Hs -> T I+Cv+Hs", bias=_bias(p.in_proj))
    z, xbc, dt = at.stage("ssm.split", (zxbcdt[..., :inner], zxbcdt[..., inner : inner + Cv], zxbcdt[..., inner + Cv :]),
                          "T I; T Cv; T Hs")  # fmt: skip
    seen = at.stage("ssm.conv_cache", conv_input(unpad(xbc, d.past, pads), state, config), "Ks+T Cv")
    u = at.matmul("ssm.conv", windows(seen, config.conv_kernel, T), conv_kernel(p.conv1d.weight, d.batch),
                  "Cv T K, Cv K 1 -> Cv T 1", bias=conv_bias(p.conv1d))  # fmt: skip
    xbc = at.stage("ssm.conv_act", unpad(ACTIVATIONS[config.ssm_act](u[..., 0].swapaxes(-1, -2)), d.past, pads), "T Cv")
    x, B, C = at.stage("ssm.heads", heads(xbc, config), "Ng Hg T P; Ng T N; Ng T N")
    recurrent = state is not None and not fresh and T == 1  # a decode step: as transformers, the recurrent form
    dt = at.stage("ssm.dt", step_sizes(dt, p.dt_bias, config, clamp=not recurrent), "Ng Hg T")
    a, x_dt = at.stage("ssm.discretize", discretize(dt, x, p.A_log, config), "Ng Hg T; Ng Hg T P")
    before = zeros_state(x, config) if state is None else grouped(state["ssm"], config)
    if recurrent:
        y, after = recurrent_step(x_dt, a, B, C, before, at)
    else:
        y, after = chunked_scan(x_dt, a, B, C, before, config.chunk_size, at, fresh)
    if state is not None:
        state["ssm"][...] = after.reshape(state["ssm"].shape)
    y = at.stage("ssm.skip", skip(y, x, p.D), "T I")
    y = at.stage("ssm.gate", np.multiply(y, silu(z), out=at.scratch(y)), "T I")
    y = at.stage("ssm.norm", group_norm(y, p.norm.weight, config), "T I")
    return at.matmul("ssm.out_proj", y, p.out_proj.weight.T, "T I, I D -> T D", bias=_bias(p.out_proj))


def conv_input(xbc, state, config: MixerShapes):
    """[.., K - 1 + T, Cv]: the conv state (the K - 1 positions before this pass; zeros at the start) and this pass's
    xBC. Writes the last K - 1 positions back as the new conv state."""
    Ks = config.conv_kernel - 1
    lead, T = xbc.shape[:-2], xbc.shape[-2]
    if isinstance(xbc, ShapeOnly):
        return ShapeOnly((*lead, Ks + T, config.conv_dim), xbc.dtype)
    before = np.zeros((*lead, Ks, config.conv_dim), xbc.dtype) if state is None else state["conv"]
    seen = np.concatenate([before.astype(xbc.dtype, copy=False), xbc], axis=-2)
    if state is not None:
        state["conv"][...] = seen[..., T:, :]
    return seen


def windows(seen, K: int, T: int):
    """[.., Cv, T, K]: for each channel and position, the K inputs its kernel reads (a view of seen [.., K - 1 + T,
    Cv])."""
    if isinstance(seen, ShapeOnly):
        return ShapeOnly((*seen.shape[:-2], seen.shape[-1], T, K), seen.dtype)
    return np.lib.stride_tricks.sliding_window_view(seen.swapaxes(-1, -2), K, axis=-1)


def conv_kernel(weight, batch: tuple[int, ...]):
    """conv1d.weight [Cv, 1, K] as [.., Cv, K, 1]: each channel's kernel a column, the same for every row of a batch
    (a view)."""
    Cv, _, K = weight.shape
    if isinstance(weight, ShapeOnly):
        return ShapeOnly((*batch, Cv, K, 1), weight.dtype)
    return np.broadcast_to(weight.reshape(Cv, K, 1), (*batch, Cv, K, 1))


def conv_bias(conv):
    """conv1d.bias [Cv] as [Cv, 1, 1] (added to each channel's outputs), or None."""
    bias = getattr(conv, "bias", None)
    return None if bias is None else bias.reshape(-1, 1, 1)


def grouped(ssm, config: MixerShapes):
    """A state [.., Hs, P, N] as [.., Ng, Hg, P, N] (a view)."""
    return ssm.reshape(*ssm.shape[:-3], config.n_groups, config.ssm_heads // config.n_groups, *ssm.shape[-2:])


def unpad(x, past: int, pads):
    """x [.., T, n] with the rows of pad slots zeroed: slot j is at position past + j, and row b's first pads[b]
    positions are its padding (x itself where no slot of this pass is one)."""
    if pads is None or isinstance(x, ShapeOnly) or not np.any(np.asarray(pads) > past):
        return x
    real = past + np.arange(x.shape[-2])[None, :] >= np.asarray(pads)[:, None]  # [B, T]
    return np.where(real[..., None], x, x.dtype.type(0))


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
    """(a = dt A [.., Ng, Hg, T], x̄ = dt x [.., Ng, Hg, T, P]), A = -exp(A_log) per head."""
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
    grouped = y.reshape(*y.shape[:-1], Ng, y.shape[-1] // Ng)
    eps = config.layer_norm_epsilon
    return rms_norm(grouped, weight.reshape(Ng, -1), eps).reshape(y.shape)


def _bias(linear):
    return getattr(linear, "bias", None)
