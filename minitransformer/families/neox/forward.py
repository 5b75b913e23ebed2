"""The GPT-NeoX family's forward pass (GPT-NeoX-20B, Pythia), as transformers' GPTNeoXForCausalLM computes it.

Read it beside gpt2/forward.py and llama/forward.py: LayerNorms with biases and biased products as GPT-2's,
rotary positions as the Llama family's, and these differences, each on its own line below:

- q, k and v come from one fused product (query_key_value), as GPT-2's, but its 3D outputs are laid out head by
  head, [H, 3, dh] (each head's q, k and v side by side), where GPT-2's are [3, H, dh]: the split is a reshape;
- partial rotary: only the first r = rotary_pct x dh numbers of each head's q and k are turned, the other dh - r
  pass through unchanged (Pythia: a quarter);
- the parallel residual (use_parallel_residual, the default): attention and MLP both read the block's input,
  x + attn(ln1(x)) + mlp(ln2(x)), in one sum; serial when false, x + attn(ln1(x)), then x + mlp(ln2(x));
- an untied unembedding (embed_out) unless tie_word_embeddings.

The scores, mask, softmax and mix are the Llama family's (llama.attend), every head its own key/value head.
Weights are stored as transformers' nn.Linear holds them, [out, in]; `W.T` is a view, no copy.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    ACTIVATIONS,
    attention_bias,
    layer_norm,
    merge_heads,
    rotary_tables,
    rotate,
    slot_positions,
    ungroup_heads,
)
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..llama.forward import attend
from .config import NeoXConfig

# `config` is the model's NeoXConfig, a layer above the families: its numbers are read here and its class is
# named in the annotations (never evaluated), not imported.


def neox(ids, p, config: NeoXConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only.

    `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token; each row's
    rotation angles start at its first real token, and pad keys are masked (ops.attention_bias).
    """
    d = tape.dims
    x = tape.stage("embed", p.embed_in.weight[ids], "T D")
    if isinstance(x, ShapeOnly):  # counting: tables of the right shape, no values
        cos = sin = ShapeOnly((d.T, config.rotary_dims))
        bias = None
    else:
        at = slot_positions(d.past, d.T, pads)  # [T], or [B, T]: then [B, 1, T, r] tables, one for every head
        cos, sin = rotary_tables(at if pads is None else at[:, None], inverse_frequencies(config, x.dtype))
        bias = attention_bias(d.past, d.start, d.T, d.t, d.window, x.dtype, pads)  # the same for every layer and head
    for i, block in enumerate(p.layers):
        kv = cache.layer(i) if cache is not None else None
        x = neox_block(x, block, config, tape.layer(i), kv, bias, (cos, sin))
    h = tape.stage("ln_f", layer_norm(x, p.final_layer_norm.weight, p.final_layer_norm.bias, config.layer_norm_eps),
                   "T D")  # fmt: skip
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(d.T)
    unembedding = p.embed_in.weight if config.tie_word_embeddings else p.embed_out.weight
    return tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")


def neox_block(x, p, config: NeoXConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Parallel: x + attn(LN_1(x)) + mlp(LN_2(x)), both norms of the block's input. Serial (use_parallel_residual
    false): x + attn(LN_1(x)), then x + mlp(LN_2(x)), as GPT-2's block."""
    eps = config.layer_norm_eps
    h = at.stage("ln_1", layer_norm(x, p.input_layernorm.weight, p.input_layernorm.bias, eps), "T D")
    o = attention(h, p.attention, config, at, kv, bias, rotary)
    if not config.use_parallel_residual:
        x = at.stage("resid_mid", o + x, "T D")
    h = at.stage("ln_2", layer_norm(x, p.post_attention_layernorm.weight, p.post_attention_layernorm.bias, eps), "T D")
    m = mlp(h, p.mlp, config, at)
    # In transformers' order: (m + o) + x in parallel, m + (o + x) in series.
    return at.stage("resid_post", m + o + x if config.use_parallel_residual else m + x, "T D")


def attention(h, p, config: NeoXConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Causal multi-head attention from the fused, head-by-head query_key_value, with partial rotary positions."""
    qkv = at.matmul("qkv", h, p.query_key_value.weight.T, "T D, D 3D -> T 3D", bias=_bias(p.query_key_value))
    q, k, v = at.stage("split_heads", split_heads_by_head(qkv, config.n_head), "H T dh")
    q, k = at.stage("rope", (rotate_part(q, *rotary), rotate_part(k, *rotary)), "H T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "H t dh")
    # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T D")
    return at.matmul("out", z, p.dense.weight.T, "T D, D D -> T D", bias=_bias(p.dense))


def mlp(h, p, config: NeoXConfig, at: Tape):
    u = at.matmul("mlp.up", h, p.dense_h_to_4h.weight.T, "T D, D F -> T F", bias=p.dense_h_to_4h.bias)
    g = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](u), "T F")
    return at.matmul("mlp.down", g, p.dense_4h_to_h.weight.T, "T F, F D -> T D", bias=p.dense_4h_to_h.bias)


def split_heads_by_head(qkv, n_head: int):
    """[..., T, 3D] laid out [H, 3, dh] -> Q, K, V each [..., H, T, dh]: views, no copies (GPT-2's split_heads
    reads [3, H, dh])."""
    *lead, T, three_d = qkv.shape
    heads = qkv.reshape(*lead, T, n_head, 3, three_d // (3 * n_head))
    return tuple(heads[..., i, :].swapaxes(-3, -2) for i in range(3))


def rotate_part(x, cos, sin):
    """RoPE on the first r numbers of each head (r = cos.shape[-1], rotary_dims), the other dh - r copied as
    they are: x[:r] cos + rotate_half(x[:r]) sin, then x[r:]."""
    r = cos.shape[-1]
    out = x.copy()
    out[..., :r] = rotate(x[..., :r], cos, sin)
    return out


def _bias(linear):
    return getattr(linear, "bias", None)


@lru_cache(maxsize=16)
def inverse_frequencies(config: NeoXConfig, dtype: np.dtype) -> np.ndarray:
    """The r/2 rotation frequencies 1 / theta^(2i / s), s = int(dh x rotary_pct), in `dtype`: float32 step for step
    as transformers computes them (in float32 at every dtype); float64 the same steps in float64 (the truth that
    validate measures against: llama.reference says why)."""
    c = np.dtype(dtype).type
    s = config.rotary_share
    inv_freq = c(1.0) / (c(config.rope_theta) ** (np.arange(0, s, 2, dtype=c) / c(s)))
    inv_freq.flags.writeable = False
    return inv_freq
