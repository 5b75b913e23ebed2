"""The OLMo 2 forward pass, as transformers' Olmo2ForCausalLM computes it, written as its difference from the Llama
family's (families/llama/forward.py), whose MLP, attention core, biases and rotary frequencies it reuses:

- no norm before attention or the MLP: each branch reads the residual stream x itself, and its output is
  RMS-normalised before it is added back (x = x + RMSNorm(attention(x)), x = x + RMSNorm(MLP(x)));
- q and k are RMS-normalised over their whole projections (H dh and Hkv dh numbers, one gain each), before they are
  split into heads and rotated.
"""

from __future__ import annotations

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    merge_heads,
    rms_norm,
    rotate,
    split_into_heads,
    ungroup_heads,
)
from ...engine.tape import Tape
from ..llama.forward import _bias, attend, decoder, mlp
from .config import Olmo2Config


def olmo2(ids, p, config: Olmo2Config, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only (as llama.llama)."""
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder_block(x, p, config: Olmo2Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Post-norm branches: x + RMSNorm(attention(x)), then x + RMSNorm(MLP(x))."""
    eps = config.rms_norm_eps
    o = attention(x, p.self_attn, config, at, kv, bias, rotary)
    o = at.stage("post_attn_norm", rms_norm(o, p.post_attention_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + o, "T D")
    m = mlp(x, p.mlp, config, at)
    m = at.stage("post_mlp_norm", rms_norm(m, p.post_feedforward_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + m, "T D")


def attention(x, p, config: Olmo2Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Llama's grouped-query attention on x itself, with q and k RMS-normalised whole before the split."""
    H, Hkv, eps = config.n_head, config.n_kv_head, config.rms_norm_eps
    q = at.matmul("q", x, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=_bias(p.q_proj))
    k = at.matmul("k", x, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.k_proj))
    v = at.matmul("v", x, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.v_proj))
    q = at.stage("q_norm", rms_norm(q, p.q_norm.weight, eps), "T H*dh")  # over all H dh numbers, gains [H dh]
    k = at.stage("k_norm", rms_norm(k, p.k_norm.weight, eps), "T Hkv*dh")
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    q, k = at.stage("rope", (rotate(q, *rotary), rotate(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=_bias(p.o_proj))
