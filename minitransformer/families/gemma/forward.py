"""The Gemma family's forward pass (Gemma 2, Gemma 3's text model), as transformers' Gemma2ForCausalLM and
Gemma3ForCausalLM compute it.

Read it beside llama/forward.py, whose projections, attention core and gated MLP it takes as they are (its block is
the pre-norm block's difference: four norms); the differences, each on its own line below:

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

from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import add_mask, constant, group_heads, rms_norm, rotate, softmax, ungroup_heads
from ...engine.tape import Tape
from ..blocks import LayerInputs
from ..decoder import Decoder
from ..llama.forward import attend_to_cache, heads, mlp
from .config import GemmaConfig


def embed(ids, p: SimpleNamespace, config: GemmaConfig, tape: Tape, pads=None):
    """x = W_te[ids] sqrt(D): the lookup, scaled in the pass's dtype (float32 rounds sqrt(D), as transformers'
    buffer does)."""
    x = tape.stage("embed", p.embed_tokens.weight[ids], "T D")
    return tape.stage("embed_scale", np.multiply(x, constant(x, config.n_embd**0.5)), "T D")


def decoder_block(x, p: SimpleNamespace, config: GemmaConfig, at: Tape, inputs: LayerInputs):
    """x + norm(attention(norm(x))), then x + norm(MLP(norm(x))): each branch normed on its way in and out."""
    h = at.stage("ln_1", gemma_norm(x, p.input_layernorm, config), "T D")
    a = attention(h, p.self_attn, config, at, inputs)
    a = at.stage("post_attn_norm", gemma_norm(a, p.post_attention_layernorm, config), "T D")
    x = at.stage("resid_mid", x + a, "T D")
    h = at.stage("ln_2", gemma_norm(x, p.pre_feedforward_layernorm, config), "T D")
    m = mlp(h, p.mlp, config, at)
    m = at.stage("post_mlp_norm", gemma_norm(m, p.post_feedforward_layernorm, config), "T D")
    return at.stage("resid_post", x + m, "T D")


def attention(h, p: SimpleNamespace, config: GemmaConfig, at: Tape, inputs: LayerInputs):
    """Llama's grouped-query attention with rotary positions, and Gemma's scores; Gemma 3 norms each head of q and k
    first."""
    q, k, v = heads(h, p, config, at)
    if config.qk_norm:
        q = at.stage("q_norm", gemma_norm(q, p.q_norm, config), "H T dh")
        k = at.stage("k_norm", gemma_norm(k, p.k_norm, config), "Hkv T dh")
    q, k = at.stage("rope", (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs, attend)


def attend(q, K, V, bias, config: GemmaConfig, at: Tape):
    """softmax(cap(q K^T / sqrt(query_pre_attn_scalar)) + bias) V, for each query head with its group's keys."""
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = ungroup_heads(at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t"))
    s = at.stage("scale", np.multiply(s, constant(s, config.query_pre_attn_scalar**-0.5), out=at.scratch(s)), "H T t")
    if config.attn_logit_softcapping is not None:
        s = at.stage("softcap", softcap(s, config.attn_logit_softcapping, out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def gemma_norm(x, w: SimpleNamespace, config: Any):
    """RMSNorm scaled by (1 + w): Gemma stores each gain less one (a zero weight keeps the normed x). Any config with
    a norm_eps (Qwen3.5's norms are Gemma's)."""
    return rms_norm(x, w.weight + constant(w.weight, 1.0), config.norm_eps)


def softcap(s, cap: float, out=None):
    """cap tanh(s / cap): every number kept within (-cap, cap), nearly unchanged where it is small."""
    c = constant(s, cap)
    capped = np.divide(s, c, out=out)
    capped = np.tanh(capped, out=capped)
    return np.multiply(capped, c, out=capped)


def final_softcap(logits, config: GemmaConfig, tape: Tape):
    """The logits soft-capped as the scores are, where the config says (final_logit_softcapping)."""
    if config.final_logit_softcapping is None:
        return logits
    return tape.stage("final_softcap", softcap(logits, config.final_logit_softcapping), "R V")


# Token ids [T] (or [B, T]) -> logits [R, V]: the scaled embedding, Gemma's blocks (each layer with its window's mask
# and its layer type's rotary tables: Gemma 3's sliding layers turn at a base of their own), the (1 + w) final norm,
# the logits and their soft-cap.
gemma = Decoder(decoder_block, gemma_norm, embed, after_logits=final_softcap)
