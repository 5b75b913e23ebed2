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

Attention itself (scores, scale, mask, softmax, mix) is the Llama family's, reused as it is; the rotary tables are
families/rotary.py's.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...engine.ops import ACTIVATIONS, split_into_heads
from ...engine.tape import Tape
from ..blocks import LayerInputs, PreNorm
from ..decoder import Decoder
from ..llama.forward import attend_to_cache
from ..rotary import rotate_partial
from .config import Phi3Config


def attention(h, p: SimpleNamespace, config: Phi3Config, at: Tape, inputs: LayerInputs):
    """Grouped-query attention whose q, k and v are one product, cut apart; RoPE on the first rd of each head."""
    H, Hkv, dh = config.n_head, config.n_kv_head, config.d_head
    qkv = at.matmul("qkv", h, p.qkv_proj.weight.T, "T D, D H*dh+2*Hkv*dh -> T H*dh+2*Hkv*dh")
    q, k, v = qkv[..., : H * dh], qkv[..., H * dh : (H + Hkv) * dh], qkv[..., (H + Hkv) * dh :]
    split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
    q, k, v = at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")
    q, k = at.stage("rope", (rotate_partial(q, *inputs.rotary), rotate_partial(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs)


def mlp(h, p: SimpleNamespace, config: Phi3Config, at: Tape):
    """The gated MLP whose gate and up are one product, cut in two (gate first): act(g) * u, then W_down."""
    F = config.d_ff
    gu = at.matmul("mlp.gate_up", h, p.gate_up_proj.weight.T, "T D, D 2F -> T 2F")
    g, u = at.stage("mlp.split", (gu[..., :F], gu[..., F:]), "T F")
    a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
    a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
    return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D")


# Token ids [T] (or [B, T]) -> logits [R, V]: the Llama family's decoder and pre-norm block, with these parts; the
# rotary tables (rotary.py's LongRoPE: short or long factors by the pass's largest position) turn rd numbers a head.
phi3 = Decoder(PreNorm(attention, mlp))
