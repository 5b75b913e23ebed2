"""The OLMo 2 forward pass, as transformers' Olmo2ForCausalLM computes it, written as its difference from the Llama
family's (families/llama/forward.py), whose MLP, attention core, biases and rotary frequencies it reuses:

- no norm before attention or the MLP: each branch reads the residual stream x itself, and its output is
  RMS-normalised before it is added back (x = x + RMSNorm(attention(x)), x = x + RMSNorm(MLP(x)));
- q and k are RMS-normalised over their whole projections (H dh and Hkv dh numbers, one gain each), before they are
  split into heads and rotated.
"""

from __future__ import annotations

from types import SimpleNamespace

from ...engine.ops import rms_norm, rotate, split_into_heads
from ...engine.tape import Tape
from ..blocks import LayerInputs, rms
from ..decoder import Decoder
from ..llama.forward import attend_to_cache, bias_of, mlp
from .config import Olmo2Config


def decoder_block(x, p: SimpleNamespace, config: Olmo2Config, at: Tape, inputs: LayerInputs):
    """Post-norm branches: x + RMSNorm(attention(x)), then x + RMSNorm(MLP(x))."""
    o = attention(x, p.self_attn, config, at, inputs)
    o = at.stage("post_attn_norm", rms(o, p.post_attention_layernorm, config), "T D")
    x = at.stage("resid_mid", x + o, "T D")
    m = mlp(x, p.mlp, config, at)
    m = at.stage("post_mlp_norm", rms(m, p.post_feedforward_layernorm, config), "T D")
    return at.stage("resid_post", x + m, "T D")


def attention(x, p: SimpleNamespace, config: Olmo2Config, at: Tape, inputs: LayerInputs):
    """Llama's grouped-query attention on x itself, with q and k RMS-normalised whole before the split."""
    H, Hkv, eps = config.n_head, config.n_kv_head, config.norm_eps
    q = at.matmul("q", x, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=bias_of(p.q_proj))
    k = at.matmul("k", x, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
    v = at.matmul("v", x, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
    q = at.stage("q_norm", rms_norm(q, p.q_norm.weight, eps), "T H*dh")  # over all H dh numbers, gains [H dh]
    k = at.stage("k_norm", rms_norm(k, p.k_norm.weight, eps), "T Hkv*dh")
    split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
    q, k, v = at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")
    q, k = at.stage("rope", (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs)


# Token ids [T] (or [B, T]) -> logits [R, V]: the Llama family's decoder around OLMo 2's blocks.
olmo2 = Decoder(decoder_block)
