"""Mixtral's forward pass, as transformers' MixtralForCausalLM computes it: the Llama family's block (Mistral's
attention, with its sliding window where the config sets one) whose MLP is a sparse mixture of experts.

Against llama/forward.py, one difference, the MLP (`mixture`):
- a router, a product like any other: router logits = h W_router [T, E];
- p = softmax of the E logits, the k largest kept and renormalised to sum to 1: the gates
  (transformers takes the softmax over all E, then the top k, then divides by their sum; the same as a
  softmax over the k chosen logits, computed here as transformers does so that the floats agree);
- each expert e, a SwiGLU MLP (w1 gate, w3 up, w2 down), computes only the rows of the Te tokens routed to
  it: gather, the three products, then its outputs times the gates added back to those tokens' rows.
Every token's rows are computed by exactly k experts, so a layer's expert MACs are T k x 3 D F whichever
experts the router chose; which ones it chose is each record's breakdown (Tape.experts).
"""

from __future__ import annotations

from types import SimpleNamespace

from ...engine.tape import Tape
from ..blocks import PreNorm
from ..decoder import Decoder
from ..llama.forward import attention
from ..moe import softmax_router, swiglu_experts
from .config import MixtralConfig


def mixture(h, p: SimpleNamespace, config: MixtralConfig, at: Tape):
    """The sparse MoE MLP: the router picks k of E experts per token, and each expert computes its tokens' rows."""
    E = config.n_experts
    chosen, gates = softmax_router(h, p.gate.weight, config.top_k, at)

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.w1.weight, w.w3.weight, w.w2.weight  # gate, up, down

    return swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at)


# Token ids [T] (or [B, T]) -> logits [R, V], as the Llama family's: its decoder and pre-norm block, with the
# mixture of experts in the MLP's place (the checkpoint's block_sparse_moe).
mixtral = Decoder(
    PreNorm(attention, mixture, names=("input_layernorm", "self_attn", "post_attention_layernorm", "block_sparse_moe"))
)
