"""The Llama family's forward pass (Llama 2 and 3, Mistral, Qwen2), as transformers' LlamaForCausalLM computes it.

Read it beside families/gpt2/forward.py: the block has the same shape (x + attention(norm(x)), then x + MLP(norm(x)):
blocks.PreNorm, which both hand their parts to), and these are the differences, each on its own line below:

- RMSNorm instead of LayerNorm: rescale by the root mean square, no centring, no bias;
- no position table: q and k are rotated by their positions (RoPE, families/rotary.py) just before the scores;
- q, k and v are three products, and k and v have Hkv <= H heads (grouped-query attention): each
  group of G = H / Hkv query heads reads the same keys and values, which are neither copied nor
  recomputed per head; the scores are [Hkv, G, T, dh] x [Hkv, 1, dh, t], the 1 broadcast;
- a sliding window (Mistral) limits each query to the last W positions, and the cache hands back
  only those, so attention past the window costs window-sized products;
- a gated MLP: three products, act(h W_gate) * (h W_up), then W_down;
- no biases unless the config asks for them (Qwen2: on q, k and v).

The pass is the decoder (families/decoder.py) around the pre-norm block of these parts, `attention` and `mlp`
(family.py: Decoder(PreNorm(attention, mlp))). They are the parts most families build on: Qwen3 hands the same block
its own attention, Mixtral its mixture of experts.

Weights are stored as transformers' nn.Linear holds them, [out, in]; `W.T` is a view, no copy.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import (
    ACTIVATIONS,
    add_mask,
    constant,
    group_heads,
    merge_heads,
    rotate,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.tape import Tape
from ..blocks import LayerInputs
from ..config import ModelConfig
from .config import LlamaConfig

# attend(q, K, V, bias, config, tape) -> z: the scores, their scale and mask, the softmax and the mix of one chunk of
# query rows against the keys it sees (in_row_chunks runs it on each chunk).
Attend = Callable[..., np.ndarray]


def attention(h, p: SimpleNamespace, config: LlamaConfig, at: Tape, inputs: LayerInputs):
    """Causal grouped-query attention with rotary positions."""
    q, k, v = heads(h, p, config, at)
    q, k = at.stage("rope", (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs)


def heads(h, p: SimpleNamespace, config: LlamaConfig, at: Tape):
    """q = h W_q, k = h W_k and v = h W_v, split into H, Hkv and Hkv heads of dh."""
    H, Hkv = config.n_head, config.n_kv_head
    q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=bias_of(p.q_proj))
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
    split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
    return at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")


def attend(q, K, V, bias, config: ModelConfig, at: Tape):
    """Each query's mix of its group's values, weighted by softmax(q K^T x scale + bias) over the keys (any family's
    config: it reads n_kv_head and d_head; the GPT-NeoX family's attention calls it too)."""
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def attend_to_cache(
    q, k, v, p: SimpleNamespace, config: ModelConfig, at: Tape, inputs: LayerInputs, attend: Attend = attend
):
    """The turned q and k and v through the cache; each query's mix of its group's values (`attend`: by default the
    Llama family's), in chunks of query rows, each against the keys it can see (a long prompt skips most of its
    future); the heads merged and projected back, o = Z W_o."""
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=bias_of(p.o_proj))


def mlp(h, p: SimpleNamespace, config: Any, at: Tape):
    """The gated MLP: act(h W_gate) * h W_up, then W_down (any config with a hidden_act: the dense layers of the
    mixtures of experts take it too)."""
    g = at.matmul("mlp.gate", h, p.gate_proj.weight.T, "T D, D F -> T F", bias=bias_of(p.gate_proj))
    u = at.matmul("mlp.up", h, p.up_proj.weight.T, "T D, D F -> T F", bias=bias_of(p.up_proj))
    a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
    a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
    return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D", bias=bias_of(p.down_proj))


def scale_scores(s, config: ModelConfig, at: Tape):
    return np.multiply(s, constant(s, config.d_head**-0.5), out=at.scratch(s))


def bias_of(linear: SimpleNamespace):
    """A linear layer's bias, None where it has none."""
    return getattr(linear, "bias", None)
