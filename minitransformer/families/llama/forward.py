"""The Llama family's forward pass (Llama 2 and 3, Mistral, Qwen2), as transformers' LlamaForCausalLM computes it.

Read it beside gpt2.py: the block has the same shape (x + attention(norm(x)), then x + MLP(norm(x))),
and these are the differences, each on its own line below:

- RMSNorm instead of LayerNorm: rescale by the root mean square, no centring, no bias;
- no position table: q and k are rotated by their positions (RoPE) just before the scores;
- q, k and v are three products, and k and v have Hkv <= H heads (grouped-query attention): each
  group of G = H / Hkv query heads reads the same keys and values, which are neither copied nor
  recomputed per head; the scores are [Hkv, G, T, dh] x [Hkv, 1, dh, t], the 1 broadcast;
- a sliding window (Mistral) limits each query to the last W positions, and the cache hands back
  only those, so attention past the window costs window-sized products;
- a gated MLP: three products, act(h W_gate) * (h W_up), then W_down;
- no biases unless the config asks for them (Qwen2: on q, k and v).

Weights are stored as transformers' nn.Linear holds them, [out, in]; `W.T` is a view, no copy.
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil, floor, log, pi

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    ACTIVATIONS,
    add_mask,
    attention_bias,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    rotary_tables,
    rotate,  # fmt: skip
    slot_positions,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..config import ModelConfig
from .config import LlamaConfig

# `config` is the model's LlamaConfig (models/config.py), a layer above the families: its numbers are read
# here and its class is named in the annotations (never evaluated), not imported.


def llama(ids, p, config: LlamaConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only.

    `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token; each row's
    rotation angles start at its first real token, and pad keys are masked (ops.attention_bias).
    """
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder(ids, p, config, cache: KVCache | None, tape: Tape, all_positions: bool, pads, block,
            rotary=None, rotary_dims: int | None = None):  # fmt: skip
    """The Llama family's decoder around its blocks: embed, each block on its layer's tape with the mask of that
    layer's window (made once per window), RMSNorm, the logits. A family that differs from Llama only inside its
    block (Qwen3, OLMo 2, Phi-3, Mixtral) passes its own `block`; one with its own rotary tables passes
    `rotary(positions, config, dtype) -> (cos, sin)` and their width `rotary_dims` (default dh)."""
    d = tape.dims
    x = tape.stage("embed", p.embed_tokens.weight[ids], "T D")
    shape_only = isinstance(x, ShapeOnly)
    if shape_only:  # counting: tables of the right shape, no values
        cos = sin = ShapeOnly((d.T, rotary_dims or d.dh))
    else:
        at = slot_positions(d.past, d.T, pads)  # [T], or [B, T]: then [B, 1, T, dh] tables, one for every head
        cos, sin = (rotary or rope)(at if pads is None else at[:, None], config, x.dtype)
    masks: dict = {}  # window -> the attention bias of the layers with that window (one for all where all alike)
    for i, layer_params in enumerate(p.layers):
        layer = tape.layer(i)  # its dims carry its window
        e = layer.dims
        if not shape_only and e.window not in masks:
            masks[e.window] = attention_bias(e.past, e.start, e.T, e.t, e.window, x.dtype, pads)
        kv = cache.layer(i) if cache is not None else None
        x = block(x, layer_params, config, layer, kv, masks.get(e.window), (cos, sin))
    h = tape.stage("ln_f", rms_norm(x, p.norm.weight, config.rms_norm_eps), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(d.T)
    unembedding = p.embed_tokens.weight if config.tie_word_embeddings else p.lm_head.weight
    return tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")


def rope(positions, config: LlamaConfig, dtype: np.dtype):
    """cos and sin [..., T, dh] of the positions, at the config's frequencies (inverse_frequencies), multiplied by
    the attention factor where the rope type has one (YaRN: rotary_attention_factor), as transformers does."""
    cos, sin = rotary_tables(positions, inverse_frequencies(config, np.dtype(dtype)))
    factor = rotary_attention_factor(config)
    if factor == 1.0:
        return cos, sin
    return cos * constant(cos, factor), sin * constant(sin, factor)


def decoder_block(x, p, config: LlamaConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block: x + attention(RMSNorm(x)), then x + MLP(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + mlp(h, p.mlp, config, at), "T D")


def attention(h, p, config: LlamaConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Causal grouped-query attention with rotary positions."""
    H, Hkv = config.n_head, config.n_kv_head
    q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=_bias(p.q_proj))
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.v_proj))
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    q, k = at.stage("rope", (rotate(q, *rotary), rotate(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=_bias(p.o_proj))


def attend(q, K, V, bias, config: ModelConfig, at: Tape):
    """Each query's mix of its group's values, weighted by softmax(q K^T x scale + bias) over the keys (any family's
    config: it reads n_kv_head and d_head; the GPT-NeoX family's attention calls it too)."""
    Hkv = config.n_kv_head
    s = at.matmul("scores", group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :],
                  "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")  # fmt: skip
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def mlp(h, p, config: LlamaConfig, at: Tape):
    g = at.matmul("mlp.gate", h, p.gate_proj.weight.T, "T D, D F -> T F", bias=_bias(p.gate_proj))
    u = at.matmul("mlp.up", h, p.up_proj.weight.T, "T D, D F -> T F", bias=_bias(p.up_proj))
    a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
    a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
    return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D", bias=_bias(p.down_proj))


def scale_scores(s, config: ModelConfig, at: Tape):
    return np.multiply(s, constant(s, config.d_head**-0.5), out=at.scratch(s))


def _bias(linear):
    return getattr(linear, "bias", None)


@lru_cache(maxsize=16)
def inverse_frequencies(config: LlamaConfig, dtype: np.dtype) -> np.ndarray:
    """The dh/2 rotation frequencies 1 / theta^(2i/dh), rescaled as the config's rope scaling says, in `dtype`.

    float32: computed in float32, step for step as transformers computes them (in float32 at every dtype).
    float64: the same steps in float64, so that the reference's angles are those the config defines, not
    float32 roundings (each frequency off by up to 6e-8 of itself, an angle at position p by p times that;
    validate.py says more).
    """
    c = np.dtype(dtype).type
    dh = config.d_head
    inv_freq = c(1.0) / (c(config.rope_theta) ** (np.arange(0, dh, 2, dtype=c) / c(dh)))
    scaling = dict(config.rope_scaling or ())
    kind = scaling.get("rope_type", "default")
    if kind == "linear":  # positions divided by the factor: the same as frequencies divided by it
        inv_freq = inv_freq / c(scaling["factor"])
    elif kind == "llama3":
        inv_freq = _llama3_frequencies(inv_freq, scaling)
    elif kind == "yarn":
        inv_freq = _yarn_frequencies(inv_freq, scaling, config.rope_theta, dh)
    inv_freq.flags.writeable = False
    return inv_freq


def _llama3_frequencies(inv_freq: np.ndarray, s: dict) -> np.ndarray:
    """Llama 3.1's rescaling: long wavelengths slowed by `factor`, short ones kept, those between blended."""
    c = inv_freq.dtype.type
    factor, low, high = c(s["factor"]), c(s["low_freq_factor"]), c(s["high_freq_factor"])
    old_context = c(s["original_max_position_embeddings"])
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = c(2 * pi) / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (c(1.0) - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, scaled).astype(inv_freq.dtype)


def _yarn_frequencies(inv_freq: np.ndarray, s: dict, theta: float, dh: int) -> np.ndarray:
    """YaRN's rescaling (transformers' _compute_yarn_parameters): frequencies that turn fewer than beta_slow times
    over the original context are slowed by `factor` (interpolated), those that turn more than beta_fast times
    are kept (extrapolated), and those between blended along a linear ramp over their index. The cos and sin
    tables are then multiplied by the attention factor (rotary_attention_factor)."""
    c = inv_freq.dtype.type
    factor, original = s["factor"], s["original_max_position_embeddings"]
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:  # the index whose frequency turns `rotations` times
        return (dh * log(original / (rotations * 2 * pi))) / (2 * log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = floor(low), ceil(high)
    low, high = max(low, 0), min(high, dh - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = np.clip((np.arange(dh // 2, dtype=c) - c(low)) / c(high - low), c(0), c(1))
    extrapolation = c(1) - ramp  # 1: the frequency kept, 0: divided by the factor
    interpolation = c(1.0) / (c(factor) * (c(theta) ** (np.arange(0, dh, 2, dtype=c) / c(dh))))
    return (interpolation * (c(1) - extrapolation) + inv_freq * extrapolation).astype(inv_freq.dtype)


def rotary_attention_factor(config: LlamaConfig) -> float:
    """The number transformers multiplies the cos and sin tables by: YaRN's attention factor (given, or from
    mscale and mscale_all_dim, or 0.1 ln(factor) + 1), 1 for every other rope type."""
    scaling: dict = dict(config.rope_scaling or ())
    if scaling.get("rope_type") != "yarn":
        return 1.0
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = scaling["factor"]

    def mscale(m: float = 1) -> float:
        return 1.0 if factor <= 1 else 0.1 * m * log(factor) + 1.0

    if scaling.get("mscale") and scaling.get("mscale_all_dim"):
        return mscale(scaling["mscale"]) / mscale(scaling["mscale_all_dim"])
    return mscale()
