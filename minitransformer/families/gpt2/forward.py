"""GPT-2's forward pass, one named stage per line, as GPT2LMHeadModel computes it at inference.

Each line is an equation of the model: its stage name (stages.py), the NumPy that computes it, and
its shape in symbols that the tape checks against the real sizes (T new positions, t attended
positions, D = d_model, H heads of dh, F = MLP width, V vocabulary; see stages.py). Every matrix
product goes through `tape.matmul`, which counts its dot products.

The same code runs on real arrays and on shape-only stand-ins (shapes.py): counting a model too
big for this machine is running this code without weights. llama.py is the same pass for the
Llama family, written as its difference from this one.
"""

from __future__ import annotations

from math import sqrt

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    ACTIVATIONS,
    add_mask,
    attention_bias,
    layer_norm,
    mask_future,
    merge_heads,
    slot_positions,
    softmax,
    split_heads,  # fmt: skip
)
from ...engine.tape import Tape
from .config import GPT2Config

# `config` is the model's GPT2Config (models/config.py), a layer above the families: its numbers are read
# here and its class is named in the annotations (never evaluated), not imported.


def gpt2(ids, p, config: GPT2Config, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only.

    `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token; each row's
    positions start at its first real token, and pad keys are masked (ops.attention_bias).
    """
    past = cache.length if cache is not None else 0
    T = ids.shape[-1]
    if pads is None:
        x = tape.stage("embed", p.wte.weight[ids] + p.wpe.weight[past : past + T], "T D")
        bias = None  # the causal mask alone: mask_future
    else:  # pad slots sit at negative positions and read row 0 of W_pe: no real query sees them
        where = np.maximum(slot_positions(past, T, pads), 0)
        x = tape.stage("embed", p.wte.weight[ids] + p.wpe.weight[where], "T D")
        bias = attention_bias(past, 0, T, past + T, None, x.dtype, pads)
    for i, block in enumerate(p.h):
        kv = cache.layer(i) if cache is not None else None
        x = transformer_block(x, block, config, tape.layer(i), kv, bias)
    h = tape.stage("ln_f", layer_norm(x, p.ln_f.weight, p.ln_f.bias, config.layer_norm_epsilon), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(T)
    unembedding = p.wte.weight if config.tie_word_embeddings else p.lm_head.weight
    return tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")  # .T is a view: no copy of W_te


def transformer_block(x, p, config: GPT2Config, at: Tape, kv: LayerCache | None, bias=None):
    """Pre-LayerNorm block: x + attention(LN(x)), then x + MLP(LN(x)). Every family's block takes (x, its
    weights, the config, the block's tape, its KV cache, the mask's bias) in this order, then its own extras."""
    eps = config.layer_norm_epsilon
    h = at.stage("ln_1", layer_norm(x, p.ln_1.weight, p.ln_1.bias, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.attn, config, at, kv, bias), "T D")
    h = at.stage("ln_2", layer_norm(x, p.ln_2.weight, p.ln_2.bias, eps), "T D")
    return at.stage("resid_post", x + mlp(h, p.mlp, config, at), "T D")


def attention(h, p, config: GPT2Config, at: Tape, kv: LayerCache | None, bias=None):
    """Causal multi-head self-attention from the fused c_attn projection; `bias` adds the padding mask to the causal one."""
    qkv = at.matmul("qkv", h, p.c_attn.weight, "T D, D 3D -> T 3D", bias=p.c_attn.bias)
    q, k, v = at.stage("split_heads", split_heads(qkv, config.n_head), "H T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "H t dh")
    # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(z), "T D")
    return at.matmul("out", z, p.c_proj.weight, "T D, D D -> T D", bias=p.c_proj.bias)


def attend(q, K, V, bias, config: GPT2Config, at: Tape):
    """Each query's mix of the values, weighted by softmax(mask(q K^T x scale)) over the keys: the causal mask,
    or `bias` where a batch's pad keys are masked too."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", scale_scores(s, config, at.layer_index or 0, out=at.scratch(s)), "H T t")
    s = at.stage("mask", mask_future(s, at.dims.past, config.n_positions, out=at.scratch(s)) if bias is None
                 else add_mask(s, bias, out=at.scratch(s)), "H T t")  # fmt: skip
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", a, V, "H T t, H t dh -> H T dh")


def mlp(h, p, config: GPT2Config, at: Tape):
    u = at.matmul("mlp.up", h, p.c_fc.weight, "T D, D F -> T F", bias=p.c_fc.bias)
    g = at.stage("mlp.act", ACTIVATIONS[config.activation_function](u), "T F")
    return at.matmul("mlp.down", g, p.c_proj.weight, "T F, F D -> T D", bias=p.c_proj.bias)


def attention_scale(config: GPT2Config, layer: int) -> float:
    """1/sqrt(dh) (scale_attn_weights), further divided by layer + 1 (scale_attn_by_inverse_layer_idx)."""
    factor = 1.0 / sqrt(config.d_head) if config.scale_attn_weights else 1.0
    return factor / (layer + 1) if config.scale_attn_by_inverse_layer_idx else factor


def scale_scores(s, config: GPT2Config, layer: int, out=None):
    factor = attention_scale(config, layer)
    return s if factor == 1.0 else np.multiply(s, s.dtype.type(factor), out=out)
