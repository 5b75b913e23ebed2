"""The Qwen3-MoE forward pass, as transformers' Qwen3MoeForCausalLM computes it, written as its difference from
Qwen3's (families/qwen3/attention.py: its attention, q and k normalised per head) and Mixtral's (families/mixtral/forward.py:
the experts through Tape.experts, each on the tokens routed to it):

- the MLP of a sparse layer is a mixture of experts (`mixture`): router logits r = h W_router [T, E],
  p = softmax(r) over the E experts, the k largest kept; only under norm_topk_prob are they divided by their sum
  (transformers: softmax in float32, top k, renormalised if asked, cast to the model's dtype); each expert e, a
  SwiGLU MLP of width F (moe_intermediate_size), computes the rows of its Te tokens, weighted by their gates;
- the MLP of a dense layer (mlp_only_layers, or not a multiple of decoder_sparse_step) is the Llama family's gated
  MLP of width intermediate_size: its products read F as that width (the layer's tape sizes F so);
- a sliding window, where use_sliding_window sets one, is every layer's (one mask).
"""

from __future__ import annotations

from types import SimpleNamespace

from ...engine.tape import Tape
from ..blocks import PreNorm
from ..decoder import Decoder
from ..llama import forward as llama
from ..moe import softmax_router, swiglu_experts
from ..qwen3.attention import attention
from .config import Qwen3MoeConfig


def mlp(h, p: SimpleNamespace, config: Qwen3MoeConfig, at: Tape):
    """A dense layer's gated MLP (F = intermediate_size, the layer's tape sizes F so), a sparse layer's experts."""
    if at.layer_index in config.dense_layers:
        return llama.mlp(h, p, config, at.with_sizes(F=config.dense_inner))
    return mixture(h, p, config, at)


def mixture(h, p: SimpleNamespace, config: Qwen3MoeConfig, at: Tape):
    """The sparse MoE MLP: the router picks k of E experts per token, and each expert computes its tokens' rows."""
    E = config.n_experts
    chosen, gates = softmax_router(h, p.gate.weight, config.top_k, at, config.norm_topk_prob)

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.gate_proj.weight, w.up_proj.weight, w.down_proj.weight

    return swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at)


# Token ids [T] (or [B, T]) -> logits [R, V], as Qwen3's: the Llama family's decoder and pre-norm block, with Qwen3's
# attention and, in the MLP's place, experts or a dense MLP.
qwen3_moe = Decoder(PreNorm(attention, mlp))
