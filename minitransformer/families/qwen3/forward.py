"""The Qwen3 forward pass, as transformers' Qwen3ForCausalLM computes it, written as its difference from the Llama
family's (families/llama/forward.py), whose MLP, attention core, biases and rotary frequencies it reuses:

- after q and k are split into heads, each head's q and k is RMS-normalised over its dh numbers, with gains of
  dh shared by every head (q_norm, k_norm), and only then rotated;
- head_dim is its own number, not D / H (Qwen3-0.6B: D 1,024, 16 heads of 128);
- a sliding window, where the config has one, applies to the layers it names (each layer's tape carries its
  window, and the mask is that window's).
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
from .config import Qwen3Config


def qwen3(ids, p, config: Qwen3Config, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V], as llama.llama, each layer with its own window's mask."""
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder_block(x, p, config: Qwen3Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block, as Llama's: x + attention(RMSNorm(x)), then x + MLP(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + mlp(h, p.mlp, config, at), "T D")


def attention(h, p, config: Qwen3Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Llama's grouped-query attention, with q and k RMS-normalised per head between the split and the rotation."""
    H, Hkv, eps = config.n_head, config.n_kv_head, config.rms_norm_eps
    q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=_bias(p.q_proj))
    k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.k_proj))
    v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=_bias(p.v_proj))
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    q = at.stage("q_norm", rms_norm(q, p.q_norm.weight, eps), "H T dh")  # over each head's dh, gains [dh]
    k = at.stage("k_norm", rms_norm(k, p.k_norm.weight, eps), "Hkv T dh")
    q, k = at.stage("rope", (rotate(q, *rotary), rotate(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=_bias(p.o_proj))
