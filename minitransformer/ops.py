"""The stages of a transformer that are not dot products: norms, activations, softmax, masks, reshapes.

All in float32: constants are np.float32 so that NumPy never promotes an activation to float64.
Each function returns a new array and never writes into its input, because its input may be a
captured activation that a user is looking at.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .shapes import ShapeOnly

F32 = np.float32
_SQRT_2_OVER_PI = F32(np.sqrt(2.0 / np.pi))
_INV_SQRT_2 = F32(1.0 / np.sqrt(2.0))


def layer_norm(x, weight, bias, eps: float):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, like torch)."""
    centered = x - x.mean(axis=-1, keepdims=True)
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + F32(eps)) * weight + bias


def softmax(s):
    """Row-wise softmax over the last axis; -inf entries (masked) get exactly zero weight."""
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def split_heads(qkv, n_head: int):
    """[..., T, 3D] -> Q, K, V each [..., H, T, dh]: views, no copies."""
    *lead, T, three_d = qkv.shape
    d_head = three_d // (3 * n_head)
    heads = qkv.reshape(*lead, T, 3, n_head, d_head)
    return tuple(heads[..., i, :, :].swapaxes(-3, -2) for i in range(3))


def merge_heads(z):
    """[..., H, T, dh] -> [..., T, D] (heads side by side, as concatenation)."""
    *lead, H, T, d_head = z.shape
    return z.swapaxes(-3, -2).reshape(*lead, T, H * d_head)


@lru_cache(maxsize=4)
def _future_bias(n_positions: int) -> np.ndarray:
    """0 where position j is visible from i (j <= i), -inf where j is i's future; [n_positions]^2."""
    future = np.triu(np.ones((n_positions, n_positions), dtype=bool), k=1)
    bias = np.zeros((n_positions, n_positions), dtype=F32)
    bias[future] = -np.inf
    bias.flags.writeable = False
    return bias


def mask_future(s, past: int, n_positions: int):
    """Hide from the T new query rows (at positions past..past+T-1) every key of their future.

    The mask is added, as in transformers: -inf scores become exactly zero weights after softmax.
    """
    T, t = s.shape[-2], s.shape[-1]
    if isinstance(s, ShapeOnly):  # no values to mask: skip the [n_positions]^2 buffer (4 GB at a 32K context)
        return s + F32(0.0)
    return s + _future_bias(n_positions)[past : past + T, :t]


# --- activations (transformers' ACT2FN names) ---------------------------------------------------------
def gelu_tanh(x):
    """GELU, tanh approximation (GPT-2's "gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = x * x
    inner *= F32(0.044715)
    inner += F32(1.0)
    inner *= x
    inner *= _SQRT_2_OVER_PI
    inner = np.tanh(inner, out=inner)
    inner += F32(1.0)
    inner *= x
    inner *= F32(0.5)
    return inner


def gelu_fast(x):
    """transformers' FastGELU: 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))."""
    return F32(0.5) * x * (F32(1.0) + np.tanh(x * F32(0.7978845608) * (F32(1.0) + F32(0.044715) * x * x)))


def erf(x):
    """erf in float32 (Numerical Recipes' erfc Chebyshev fit, |error| < 1.2e-7); NumPy has none."""
    z = np.abs(x)
    t = F32(1.0) / (F32(1.0) + F32(0.5) * z)
    poly = F32(0.17087277)
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368):
        poly = poly * t + F32(c)
    erfc = t * np.exp(-z * z - F32(1.26551223) + t * poly)
    return np.sign(x) * (F32(1.0) - erfc)


def gelu_exact(x):
    """GELU with the Gaussian CDF: 0.5 x (1 + erf(x / sqrt(2))) (transformers' "gelu")."""
    return F32(0.5) * x * (F32(1.0) + erf(x * _INV_SQRT_2))


def quick_gelu(x):
    return x * sigmoid(F32(1.702) * x)


def relu(x):
    return np.maximum(x, F32(0.0))


def sigmoid(x):
    return F32(1.0) / (F32(1.0) + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def identity(x):
    return x + F32(0.0)  # a new array, like every other stage


ACTIVATIONS = {
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu_python_tanh": gelu_tanh,
    "gelu_fast": gelu_fast,
    "gelu": gelu_exact,
    "gelu_python": gelu_exact,
    "quick_gelu": quick_gelu,
    "relu": relu,
    "silu": silu,
    "swish": silu,
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "linear": identity,
}
