"""The Gemma family's forward pass (Gemma 2, Gemma 3's text model), as transformers' Gemma2ForCausalLM and
Gemma3ForCausalLM compute it.

Read it beside llama/forward.py, whose projections, rotation and gated MLP it takes as they are; the differences,
each on its own line below:

- the embeddings are multiplied by sqrt(D) (`embed_scale`, in the pass's dtype: float32 rounds sqrt(D), as
  transformers' buffer does);
- every RMSNorm scales by (1 + w), not w;
- four norms a block: the attention's output and the MLP's output are each normed before their residual add
  (`post_attn_norm`, `post_mlp_norm`), beside the usual norms before them (`ln_1`, `ln_2`);
- Gemma 3 norms each head of q and k (`q_norm`, `k_norm`) before rotating them, and rotates its sliding layers
  by a base of their own;
- the scores are scaled by query_pre_attn_scalar^-1/2 and, where the config says (Gemma 2), soft-capped,
  c tanh(S / c), before the mask (`softcap`);
- layers alternate a sliding window and full attention: each layer's mask is its own window's (tape.layer(i)
  carries it);
- the logits may be soft-capped as the scores are (`final_softcap`).
"""

from __future__ import annotations

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    add_mask,
    attention_bias,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    rotary_tables,
    rotate,
    slot_positions,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..llama.forward import _bias, inverse_frequencies, mlp
from .config import SLIDING, GemmaConfig, local_rope


def gemma(ids, p, config: GemmaConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only."""
    d = tape.dims
    x = tape.stage("embed", p.embed_tokens.weight[ids], "T D")
    x = tape.stage("embed_scale", np.multiply(x, constant(x, config.n_embd**0.5)), "T D")
    shape_only = isinstance(x, ShapeOnly)
    rotaries: dict = {}  # the rotary tables of each layer type (Gemma 3's sliding layers have their own base)
    biases: dict = {}  # the mask of each window (None: full attention), the same for every head
    for i, block in enumerate(p.layers):
        layer = tape.layer(i)  # its dims carry its window
        e, kind = layer.dims, config.attention_types[i]
        if kind not in rotaries:
            rotaries[kind] = _rotary(config if kind != SLIDING else local_rope(config), d, x, pads)
        if e.window not in biases:
            biases[e.window] = (
                None if shape_only else attention_bias(e.past, e.start, e.T, e.t, e.window, x.dtype, pads)
            )
        kv = cache.layer(i) if cache is not None else None
        x = decoder_block(x, block, config, layer, kv, biases[e.window], rotaries[kind])
    h = tape.stage("ln_f", gemma_norm(x, p.norm.weight, config.rms_norm_eps), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(d.T)
    unembedding = p.embed_tokens.weight if config.tie_word_embeddings else p.lm_head.weight
    logits = tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")
    if config.final_logit_softcapping is not None:
        logits = tape.stage("final_softcap", softcap(logits, config.final_logit_softcapping), "R V")
    return logits


def _rotary(config: GemmaConfig, d, x, pads):
    """cos and sin of this pass's positions at the config's frequencies ([T, dh], or [B, 1, T, dh] with pads);
    shape-only stand-ins when counting."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly((d.T, d.dh)), ShapeOnly((d.T, d.dh))
    at = slot_positions(d.past, d.T, pads)  # [T], or [B, T]: then [B, 1, T, dh] tables, one for every head
    return rotary_tables(at if pads is None else at[:, None], inverse_frequencies(config, x.dtype))


def decoder_block(x, p, config: GemmaConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """x + norm(attention(norm(x))), then x + norm(MLP(norm(x))): each branch normed on its way in and out."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", gemma_norm(x, p.input_layernorm.weight, eps), "T D")
    a = attention(h, p.self_attn, config, at, kv, bias, rotary)
    a = at.stage("post_attn_norm", gemma_norm(a, p.post_attention_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + a, "T D")
    h = at.stage("ln_2", gemma_norm(x, p.pre_feedforward_layernorm.weight, eps), "T D")
    m = mlp(h, p.mlp, config, at)
    m = at.stage("post_mlp_norm", gemma_norm(m, p.post_feedforward_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + m, "T D")


def attention(h, p, config: GemmaConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Llama's grouped-query attention with rotary positions; Gemma 3 norms each head of q and k first."""
    H, Hkv = config.n_head, config.n_kv_head
    q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=_bias(p.q_proj))
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.v_proj))
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    if config.qk_norm:
        q = at.stage("q_norm", gemma_norm(q, p.q_norm.weight, config.rms_norm_eps), "H T dh")
        k = at.stage("k_norm", gemma_norm(k, p.k_norm.weight, config.rms_norm_eps), "Hkv T dh")
    q, k = at.stage("rope", (rotate(q, *rotary), rotate(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=_bias(p.o_proj))


def attend(q, K, V, bias, config: GemmaConfig, at: Tape):
    """softmax(cap(q K^T / sqrt(query_pre_attn_scalar)) + bias) V, for each query head with its group's keys."""
    Hkv = config.n_kv_head
    s = at.matmul("scores", group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :],
                  "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")  # fmt: skip
    s = ungroup_heads(s)
    s = at.stage("scale", np.multiply(s, constant(s, config.query_pre_attn_scalar**-0.5), out=at.scratch(s)), "H T t")
    if config.attn_logit_softcapping is not None:
        s = at.stage("softcap", softcap(s, config.attn_logit_softcapping, out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def gemma_norm(x, weight, eps: float):
    """RMSNorm scaled by (1 + w): Gemma stores each gain less one (a zero weight keeps the normed x)."""
    return rms_norm(x, weight + constant(weight, 1.0), eps)


def softcap(s, cap: float, out=None):
    """cap tanh(s / cap): every number kept within (-cap, cap), nearly unchanged where it is small."""
    c = constant(s, cap)
    capped = np.divide(s, c, out=out)
    capped = np.tanh(capped, out=capped)
    return np.multiply(capped, c, out=capped)
