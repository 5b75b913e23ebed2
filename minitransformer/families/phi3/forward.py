"""The Phi-3 family's forward pass, as transformers' Phi3ForCausalLM computes it.

Read it beside families/llama/forward.py: the block is the Llama block (RMSNorm, grouped-query attention with
rotary positions, a gated SiLU MLP, no biases), and these are the differences, each on its own line below:

- q, k and v come out of ONE product, h W_qkv (qkv_proj, [H dh + 2 Hkv dh, D]), then are cut apart: q the
  first H dh columns, k the next Hkv dh, v the last Hkv dh;
- the MLP's gate and up come out of ONE product, h W_gate_up (gate_up_proj, [2F, D]), cut in two: the gate
  the first F columns, up the last F (transformers' `chunk(2)`: gate first);
- RoPE turns only the first rd = int(dh x partial_rotary_factor) numbers of each head; the others pass;
- LongRoPE (rope_scaling "longrope", Phi-3-mini-128k and Phi-3.5): each frequency is divided by its own factor,
  the short factors while the pass's last position is within original_max_position_embeddings and the long ones
  beyond (transformers decides per call, on the largest position id), and cos and sin are multiplied by the
  attention factor.

Attention itself (scores, scale, mask, softmax, mix) is the Llama family's, reused as it is.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import (
    ACTIVATIONS,
    constant,
    merge_heads,
    rms_norm,
    rotary_tables,
    rotate,
    split_into_heads,
    ungroup_heads,
)
from ...engine.tape import Tape
from ..llama.forward import attend, decoder
from .config import Phi3Config

# `config` is the model's Phi3Config: its numbers are read here and its class named in the annotations.


def phi3(ids, p, config: Phi3Config, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only."""
    return decoder(
        ids, p, config, cache, tape, all_positions, pads, decoder_block, rotary=rotary, rotary_dims=config.rotary_dim
    )


def decoder_block(x, p, config: Phi3Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block, as Llama's: x + attention(RMSNorm(x)), then x + MLP(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + mlp(h, p.mlp, config, at), "T D")


def attention(h, p, config: Phi3Config, at: Tape, kv: LayerCache | None, bias, rotary):
    """Grouped-query attention whose q, k and v are one product, cut apart; RoPE on the first rd of each head."""
    H, Hkv, dh = config.n_head, config.n_kv_head, config.d_head
    qkv = at.matmul("qkv", h, p.qkv_proj.weight.T, "T D, D H*dh+2*Hkv*dh -> T H*dh+2*Hkv*dh")
    q, k, v = qkv[..., : H * dh], qkv[..., H * dh : (H + Hkv) * dh], qkv[..., (H + Hkv) * dh :]
    q, k, v = at.stage("split_heads", (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                       "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
    q, k = at.stage("rope", (rotate_first(q, *rotary), rotate_first(k, *rotary)), "H T dh; Hkv T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, bias)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D")


def mlp(h, p, config: Phi3Config, at: Tape):
    """The gated MLP whose gate and up are one product, cut in two (gate first): act(g) * u, then W_down."""
    F = config.d_ff
    gu = at.matmul("mlp.gate_up", h, p.gate_up_proj.weight.T, "T D, D 2F -> T 2F")
    g, u = at.stage("mlp.split", (gu[..., :F], gu[..., F:]), "T F")
    a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
    a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
    return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D")


def rotate_first(x, cos, sin):
    """RoPE on the first rd numbers of each head (rd = cos.shape[-1]); the other dh - rd pass unturned."""
    rd = cos.shape[-1]
    if rd == x.shape[-1]:
        return rotate(x, cos, sin)
    out = x.copy()
    out[..., :rd] = rotate(x[..., :rd], cos, sin)
    return out


def rotary(positions, config: Phi3Config, dtype: np.dtype):
    """cos and sin [..., T, rd] of the positions; LongRoPE picks its long factors when the largest position is past
    original_max_position_embeddings (as transformers, per call) and scales both tables by its attention factor."""
    long = config.rope_scaling is not None and int(positions.max()) + 1 > config.original_max_position_embeddings
    cos, sin = rotary_tables(positions, inverse_frequencies(config, np.dtype(dtype), long))
    if config.rope_scaling is not None:
        factor = constant(cos, config.attention_factor)
        cos, sin = cos * factor, sin * factor
    return cos, sin


@lru_cache(maxsize=16)
def inverse_frequencies(config: Phi3Config, dtype: np.dtype, long: bool = False) -> np.ndarray:
    """The rd/2 rotation frequencies 1 / theta^(2i/rd), each divided by its LongRoPE factor (short or long) where
    the config has them; in `dtype`, step for step as transformers computes them in float32."""
    c = np.dtype(dtype).type
    rd = config.rotary_dim
    powers = c(config.rope_theta) ** (np.arange(0, rd, 2, dtype=c) / c(rd))
    if config.rope_scaling is not None:
        factors = dict(config.rope_scaling)["long_factor" if long else "short_factor"]
        powers = np.asarray(factors, dtype=c) * powers
    inv_freq = c(1.0) / powers
    inv_freq.flags.writeable = False
    return inv_freq
