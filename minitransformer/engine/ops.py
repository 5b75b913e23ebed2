"""The stages of a transformer that are not dot products: norms, activations, softmax, masks, reshapes.

Each computes in the dtype of what it is given: float32 (the default) or float64 (the reference mode,
load_model(..., dtype="float64")). Constants are made in that dtype (`constant`), so that NumPy never
promotes a float32 activation to float64 and a float64 pass never rounds through a float32 number.
Each function leaves its input alone, because the input may be a captured activation that a user is
looking at. Those that take `out=` may write their result over their input when the forward pass
hands it over (Tape.scratch: only when nobody watches the pass): at long contexts a fresh
[H, T, t] array per stage costs more in page faults than the arithmetic.

NumPy runs an elementwise loop on one core; the big row-wise stages (softmax, the MLP activation,
RMSNorm, LayerNorm) split their rows among the engine's workers (`rowwise`, threads.py), since NumPy lets go
of the GIL inside its loops, and work through them in blocks that stay in cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from .shapes import ShapeOnly
from .threads import spread

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


def constant(x, value):
    """`value` as a scalar of x's dtype (x an array or a shape-only stand-in): float32 in a float32 pass, where
    a float64 scalar would promote the result (NumPy 2), and the full float64 value in a float64 pass."""
    return x.dtype.type(value)


PARALLEL_MIN_SIZE = 1 << 18  # below this, starting threads costs more than it saves (every decode step)
BLOCK_SIZE = 1 << 16  # numbers in a block of rows (rowwise): it and its output fit in a core's L2 cache


def rowwise(fn, x, out=None):
    """fn(rows, out_rows) on the rows of x (every axis but the last), in blocks shared among the cores.

    Each row's result depends on that row alone (a softmax, an activation), so the split changes
    nothing in the numbers. A block is small enough that it and its output stay in a core's cache
    through all of fn's passes over them: a [T, F] activation streamed through memory once per pass
    costs several times its arithmetic. Small arrays and shape-only stand-ins run in one call. x may
    be in any memory order (a hook's replacement may be Fortran-ordered, strided or reversed); the
    result is out if given, else a new C-ordered array.
    """
    if isinstance(x, ShapeOnly) or x.size < PARALLEL_MIN_SIZE:
        return fn(x, out)
    if out is None:
        out = np.empty(x.shape, x.dtype)  # C order whatever x's order (a hook may return any layout)
    elif not out.flags.c_contiguous:
        return fn(x, out)  # its rows would be a copy, not a view: one call writes into out itself
    # out's rows are views of out (C order); x's are a copy if x is not in C order, which is only read.
    rows, out_rows = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    step = max(1, BLOCK_SIZE // rows.shape[-1])

    def in_blocks(first: int, end: int) -> None:
        for a in range(first, end, step):
            b = min(a + step, end)
            fn(rows[a:b], out_rows[a:b])

    spread(in_blocks, len(rows))
    return out


def layer_norm(x, weight, bias, eps: float):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, like torch); no bias where
    `bias` is None (Cohere's LayerNorm)."""
    return rowwise(lambda rows, out: _layer_norm_rows(rows, weight, bias, eps, out), x)


def _layer_norm_rows(x, weight, bias, eps: float, out=None):
    inverse_d = constant(x, 1.0 / x.shape[-1])
    centered = np.subtract(x, np.add.reduce(x, axis=-1, keepdims=True) * inverse_d, out=out)
    var = np.add.reduce(centered * centered, axis=-1, keepdims=True)
    var *= inverse_d
    var += constant(x, eps)
    centered /= np.sqrt(var, out=var)
    centered *= weight
    if bias is not None:
        centered += bias
    return centered


def softmax(s, out=None):
    """Row-wise softmax over the last axis; -inf entries (masked) get exactly zero weight."""
    return rowwise(_softmax_rows, s, out)


def _softmax_rows(s, out=None):
    e = np.subtract(s, s.max(axis=-1, keepdims=True), out=out)
    e = np.exp(e, out=e)
    e *= constant(e, 1.0) / e.sum(axis=-1, keepdims=True)  # one division per row, then a multiply per entry
    return e


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
def _future_bias(n_positions: int, dtype: np.dtype) -> np.ndarray:
    """0 where position j is visible from i (j <= i), -inf where j is i's future; [n_positions]^2, in `dtype`."""
    future = np.triu(np.ones((n_positions, n_positions), dtype=bool), k=1)
    bias = np.zeros((n_positions, n_positions), dtype=dtype)
    bias[future] = -np.inf
    bias.flags.writeable = False
    return bias


def mask_future(s, past: int, n_positions: int, out=None):
    """Hide from the T new query rows (at positions past..past+T-1) every key of their future.

    The mask is added, as in transformers: -inf scores become exactly zero weights after softmax.
    """
    T, t = s.shape[-2], s.shape[-1]
    if isinstance(s, ShapeOnly):  # no values to mask: skip the [n_positions]^2 buffer (4 GB at a 32K context)
        return s + constant(s, 0.0)
    bias = _future_bias(n_positions, s.dtype)[past : past + T, :t]
    if out is s:  # in place: the first past + 1 keys are every query's past, where the bias adds only zeros
        return _add_in_columns(s, bias, past + 1, t)
    return np.add(s, bias, out=out)


# --- activations (transformers' ACT2FN names) ---------------------------------------------------------
def gelu_tanh(x):
    """GELU, tanh approximation (GPT-2's "gelu_new"): 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3).

    Computed as x / (1 + exp(-2z)), the same function (0.5 (1 + tanh(z)) is the logistic of 2z):
    NumPy's exp is vectorised where its tanh is not, and it needs three fewer passes.
    """
    return rowwise(_gelu_tanh_rows, x)


def _gelu_tanh_rows(x, out=None):
    c = x.dtype.type
    minus_2z = np.multiply(x, x, out=out)
    minus_2z *= c(-2 * 0.044715) * c(_SQRT_2_OVER_PI)
    minus_2z += c(-2.0) * c(_SQRT_2_OVER_PI)
    minus_2z *= x
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative x, where gelu is -0: right
        e = np.exp(minus_2z, out=minus_2z)
    e += c(1.0)
    return np.divide(x, e, out=e)


def gelu_fast(x):
    """transformers' FastGELU: 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2))), rows shared among the cores,
    two temporaries a block of rows."""
    return rowwise(_gelu_fast_rows, x)


def _gelu_fast_rows(x, out=None):
    c = x.dtype.type
    inner = np.multiply(x, c(0.044715), out=out)  # (0.044715 x) x, the order the formula takes them
    inner *= x
    inner += c(1.0)
    tanh = np.multiply(x, c(0.7978845608))
    tanh *= inner
    np.tanh(tanh, out=tanh)
    tanh += c(1.0)
    half_x = np.multiply(x, c(0.5), out=inner)
    return np.multiply(half_x, tanh, out=half_x)


def erf(x):
    """erf, which NumPy has none of. float32: Numerical Recipes' erfc Chebyshev fit, |error| < 1.2e-7, below
    float32's own rounding. float64: the C library's erf (math.erf) on each number, exact to the last bit or so:
    a fit good to 1e-7 would be the largest error of a float64 pass."""
    if x.dtype == np.float64:
        return _erf_each(x).astype(np.float64)
    return _erf_fit_overwriting(np.array(x, copy=True))


# erfc(z) ~ t exp(-z^2 - 1.26551223 + t P(t)), t = 1 / (1 + z/2): P's coefficients, the highest power's first
_ERFC_FIT = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
             1.00002368)  # fmt: skip
_erf_each = np.frompyfunc(math.erf, 1, 1)


def _erf_fit_overwriting(x):
    """erf(x) by the fit, x used as scratch: each step in place, two temporaries of x's size."""
    c = x.dtype.type
    z = np.abs(x)
    t = np.multiply(z, c(0.5))
    t += c(1.0)
    t = np.divide(c(1.0), t, out=t)  # 1 / (1 + z/2)
    poly = np.multiply(t, c(_ERFC_FIT[0]))
    poly += c(_ERFC_FIT[1])
    for k in _ERFC_FIT[2:]:
        poly *= t
        poly += c(k)
    exponent = np.multiply(z, z, out=z)
    np.negative(exponent, out=exponent)
    exponent -= c(1.26551223)
    poly *= t
    exponent += poly
    erfc = np.multiply(t, np.exp(exponent, out=exponent), out=t)
    erf_ = np.subtract(c(1.0), erfc, out=poly)
    erf_ *= np.sign(x, out=x)
    return erf_


def gelu_exact(x):
    """GELU with the Gaussian CDF: 0.5 x (1 + erf(x / sqrt(2))) (transformers' "gelu"). float32: in blocks of rows
    shared among the cores, the fit's steps in place (the whole expression kept six [T, F] arrays alive at once)."""
    if x.dtype == np.float64:
        return constant(x, 0.5) * x * (constant(x, 1.0) + erf(x * constant(x, _INV_SQRT_2)))
    return rowwise(_gelu_exact_rows, x)


def _gelu_exact_rows(x, out=None):
    c = x.dtype.type
    scaled = np.multiply(x, c(_INV_SQRT_2), out=out)
    one_plus_erf = _erf_fit_overwriting(scaled)
    one_plus_erf += c(1.0)
    half_x = np.multiply(x, c(0.5), out=scaled)
    return np.multiply(half_x, one_plus_erf, out=half_x)


def quick_gelu(x):
    """x sigmoid(1.702 x): rows shared among the cores, no temporaries."""
    return rowwise(_quick_gelu_rows, x)


def _quick_gelu_rows(x, out=None):
    scaled = np.multiply(x, constant(x, 1.702), out=out)
    s = _sigmoid_rows(scaled, out=scaled)
    return np.multiply(x, s, out=s)


def relu(x):
    return np.maximum(x, constant(x, 0.0))


def relu_squared(x):
    """relu(x)^2 (transformers' "relu2": Nemotron-H's MLPs and experts)."""
    r = relu(x)
    return np.multiply(r, r, out=r)


def sigmoid(x):
    """1 / (1 + exp(-x)): rows shared among the cores, no temporaries."""
    return rowwise(_sigmoid_rows, x)


def _sigmoid_rows(x, out=None):
    e = np.negative(x, out=out)
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative x, where the sigmoid is 0: right
        np.exp(e, out=e)
    e += constant(e, 1.0)
    return np.divide(constant(e, 1.0), e, out=e)


def silu(x):
    """x sigmoid(x), computed as x / (1 + exp(-x)) (as torch does): one new array and no temporaries, rows
    shared among the cores (a Llama MLP's [T, F] activation is its largest elementwise stage)."""
    return rowwise(_silu_rows, x)


def _silu_rows(x, out=None):
    e = np.negative(x, out=out)
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative x, where silu is -0: right
        e = np.exp(e, out=e)
    e += constant(e, 1.0)
    return np.divide(x, e, out=e)


def identity(x):
    return x + constant(x, 0.0)  # a new array, like every other stage


ACTIVATIONS: dict[str, Callable] = {
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu_python_tanh": gelu_tanh,
    "gelu_fast": gelu_fast,
    "gelu": gelu_exact,
    "gelu_python": gelu_exact,
    "quick_gelu": quick_gelu,
    "relu": relu,
    "relu2": relu_squared,
    "silu": silu,
    "swish": silu,
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "linear": identity,
}


# --- the Llama family's stages ---------------------------------------------------------------------------
def rms_norm(x, weight, eps: float):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis: no centring, no bias (transformers' LlamaRMSNorm)."""
    return rowwise(lambda rows, out: _rms_norm_rows(rows, weight, eps, out), x)


def _rms_norm_rows(x, weight, eps: float, out=None):
    squares = np.multiply(x, x, out=out)
    mean_square = np.add.reduce(squares, axis=-1, keepdims=True)
    mean_square *= constant(x, 1.0 / x.shape[-1])
    mean_square += constant(x, eps)
    h = np.multiply(x, constant(x, 1.0) / np.sqrt(mean_square, out=mean_square), out=squares)
    h *= weight
    return h


def split_into_heads(x, n_heads: int):
    """[..., T, n_heads * dh] -> [..., n_heads, T, dh]: a view."""
    *lead, T, width = x.shape
    return x.reshape(*lead, T, n_heads, width // n_heads).swapaxes(-3, -2)


def group_heads(x, n_groups: int):
    """[..., H, T, n] -> [..., Hkv, G, T, n]: the G query heads that share key/value head g sit together (a view).

    Query head h uses key/value head h // G, as transformers' repeat_kv pairs them.
    """
    return x.reshape(*x.shape[:-3], n_groups, x.shape[-3] // n_groups, *x.shape[-2:])


def ungroup_heads(x):
    """[..., Hkv, G, T, n] -> [..., H, T, n]: the heads in one row again (a view of a contiguous array)."""
    return x.reshape(*x.shape[:-4], x.shape[-4] * x.shape[-3], *x.shape[-2:])


def rotary_tables(positions, inv_freq):
    """cos and sin [T, dh] (or [..., T, dh] for positions [..., T]) of position x frequency, each frequency twice
    ([f, f]), as transformers lays them out; in the dtype of inv_freq (the caller makes them in
    the pass's dtype)."""
    angles = positions.astype(inv_freq.dtype)[..., None] * inv_freq  # one multiply per (position, frequency): no sums
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rotate(x, cos, sin):
    """Rotary position embedding on x [..., T, dh]: x cos + rotate_half(x) sin, rotate_half([x1, x2]) = [-x2, x1].

    Each pair (x[i], x[i + dh/2]) turns by the angle position x frequency i; the dot product of a
    turned q and a turned k then depends on how far apart their positions are, not where they are.
    """
    half = x.shape[-1] // 2
    out = x * cos
    out[..., :half] -= x[..., half:] * sin[..., :half]
    out[..., half:] += x[..., :half] * sin[..., half:]
    return out


def attention_bias(
    past: int, start: int, T: int, t: int, window: int | None, dtype: np.dtype, pads=None, chunk: int | None = None
):
    """0 where key j (at position start + j) is visible from query i (at past + i), -inf elsewhere: [T, t] in `dtype`.

    Visible: not in the future, and with a sliding window W no more than W - 1 positions behind
    (transformers' sliding_window_causal_mask: past + i - W < start + j <= past + i); with chunked attention (a
    `chunk` of C positions: Llama 4's), in the query's own chunk, counted from each row's first real token
    (transformers' chunked_overlay: (key - pads) // C == (query - pads) // C).

    With `pads` (a batch of left-padded rows: the first pads[b] slots of row b hold no token), the
    keys of pad slots are also hidden from the row's real queries: [B, 1, T, t], one for every head.
    A pad query keeps its causal keys (at least itself), so that no softmax row is empty; no real
    query reads what it computes.
    """
    query = np.arange(past, past + T)[:, None]
    key = np.arange(start, start + t)[None, :]
    hidden = key > query  # compared without a [T, t] array of distances: at long prompts the bias is the peak
    if window is not None:
        hidden |= key <= query - window
    if chunk is not None:
        offset = 0 if pads is None else np.asarray(pads)[:, None, None]  # each row's chunks begin at its first token
        hidden = hidden | ((key - offset) // chunk != (query - offset) // chunk)
    if pads is not None:
        pads = np.asarray(pads)[:, None, None]
        pad_key = key[None] < pads  # [B, 1, t]
        real_query = query[None] >= pads  # [B, T, 1]
        hidden = (hidden | (pad_key & real_query))[:, None]  # [B, 1, T, t]
    number = np.dtype(dtype).type
    return np.where(hidden, number(-np.inf), number(0.0))


def unchosen_mask(chosen, t: int, dtype):
    """-inf at every key not chosen for a query, 0 at those chosen: chosen [..., T, s] (indices of the t keys, -1
    where a query has no choice) -> [..., 1, T, t], one for every head; added to attention_bias, it masks a query's
    other keys as transformers' eager attention does under sparse attention (its block_bias, DeepSeek-V4's)."""
    if isinstance(chosen, ShapeOnly):
        return ShapeOnly((*chosen.shape[:-2], 1, chosen.shape[-2], t), dtype)
    number = np.dtype(dtype).type
    mask = np.full((*chosen.shape[:-1], t + 1), number(-np.inf), dtype=dtype)  # a last column for the -1s
    np.put_along_axis(mask, np.where(chosen < 0, t, chosen), number(0.0), axis=-1)
    return mask[..., None, :, :t]


def gather_keys(x, chosen):
    """Each query's chosen rows of x: x [..., H, t, d] (keys or values of every head), chosen [..., T, s] (indices of
    the t rows) -> [..., H, T, s, d], a copy of its s rows for every query (a gather: no arithmetic)."""
    *lead, T, s = chosen.shape
    if isinstance(x, ShapeOnly) or isinstance(chosen, ShapeOnly):
        return ShapeOnly((*x.shape[:-2], T, s, x.shape[-1]), x.dtype)
    rows = np.take_along_axis(x, chosen.reshape(*lead, 1, T * s, 1), axis=-2)  # the same rows for every head
    return rows.reshape(*x.shape[:-2], T, s, x.shape[-1])


def gather_mask(bias, chosen):
    """attention_bias at each query's chosen keys: bias [T, t] (or [B, 1, T, t]), chosen [..., T, s] -> [..., 1, T, 1,
    s], which the scores [..., H, T, 1, s] of the chosen keys take, one for every head. None stays None."""
    if bias is None:
        return None
    *lead, T, s = chosen.shape
    if isinstance(bias, ShapeOnly) or isinstance(chosen, ShapeOnly):
        return ShapeOnly((*lead, 1, T, 1, s), bias.dtype)
    rows = bias[..., 0, :, :] if bias.ndim == 4 else bias  # [T, t] or [B, T, t]
    rows = np.broadcast_to(rows, (*lead, *rows.shape[-2:]))
    return np.take_along_axis(rows, chosen, axis=-1).reshape(*lead, 1, T, 1, s)


def slot_positions(past: int, T: int, pads=None):
    """The positions of this pass's T slots: past..past+T-1 ([T]); with `pads`, each row's count starts at its
    first real token ([B, T]: slot j of row b is at j - pads[b], negative in the padding), as transformers'
    position_ids = attention_mask.cumsum(-1) - 1 on the real tokens."""
    slots = past + np.arange(T)
    return slots if pads is None else slots[None, :] - np.asarray(pads)[:, None]


def without_pads(x, past: int, pads=None):
    """x [B, T, n] with the rows of pad slots set to zero (a new array; x itself where there are no pads): slot
    past + j of row b is padding when it is one of the row's first pads[b] slots. A recurrent layer (a conv, a
    linear-attention or state-space scan) reads every earlier slot, so a left-padded row must feed it zeros where it
    has no tokens, as transformers' apply_mask_to_padding_states does, for the row to equal its prompt alone."""
    if pads is None or isinstance(x, ShapeOnly):
        return x
    real = (past + np.arange(x.shape[-2]))[None, :] >= np.asarray(pads)[:, None]  # [B, T]
    return x * real[..., None].astype(x.dtype)


def add_mask(s, bias, out=None):
    """S + bias (0 or -inf): masked scores become exactly zero weights after softmax."""
    if isinstance(s, ShapeOnly):
        return s + constant(s, 0.0)
    if out is s:  # in place: only the keys some query may not see, where the bias is not all zeros. (A -0.0 score
        # outside them then stays -0.0 where adding 0 made it +0.0; no watcher sees in-place scores, and the
        # softmax's weights are the same bits.)
        hidden = np.flatnonzero(np.any(bias, axis=tuple(range(bias.ndim - 1))))
        return s if hidden.size == 0 else _add_in_columns(s, bias, hidden[0], hidden[-1] + 1)
    return np.add(s, bias, out=out)


def _add_in_columns(s, bias, first: int, end: int):
    """s[..., first:end] += bias[..., first:end], in place: a chunk of query rows of a long prompt sees all but its
    last keys, so most of its [H, rows, t] scores would only have zeros added (row_chunks.py). Where the columns
    are most of s, the whole of it: as fast, and a strided add would take NumPy's iteration buffers (about
    100 KB, beyond the activations memory.py counts)."""
    if 2 * (end - first) > s.shape[-1]:
        return np.add(s, bias, out=s)
    columns = s[..., first:end]
    np.add(columns, bias[..., first:end], out=columns)
    return s
