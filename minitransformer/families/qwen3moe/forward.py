"""The Qwen3-MoE forward pass, as transformers' Qwen3MoeForCausalLM computes it, written as its difference from
Qwen3's (families/qwen3/forward.py: its attention, q and k normalised per head) and Mixtral's (families/mixtral/forward.py:
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

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import rms_norm, softmax
from ...engine.tape import Tape
from ..llama.forward import decoder, mlp
from ..moe import swiglu_experts, top_k
from ..qwen3.forward import attention
from .config import Qwen3MoeConfig


def qwen3_moe(ids, p, config: Qwen3MoeConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V], as qwen3.qwen3 computes them, with sparse and dense blocks."""
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder_block(x, p, config: Qwen3MoeConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block: x + Qwen3 attention(RMSNorm(x)), then x + (experts or dense MLP)(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")  # type: ignore[arg-type]
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    if at.layer_index in config.dense_layers:  # the dense MLP, F = intermediate_size
        return at.stage("resid_post", x + mlp(h, p.mlp, config, at.with_sizes(F=config.dense_inner)), "T D")
    return at.stage("resid_post", x + mixture(h, p.mlp, config, at), "T D")


def mixture(h, p, config: Qwen3MoeConfig, at: Tape):
    """The sparse MoE MLP: the router picks k of E experts per token, and each expert computes its tokens' rows."""
    E, k = config.n_experts, config.top_k
    logits = at.matmul("router", h, p.gate.weight.T, "T D, D E -> T E")
    probs = at.stage("router.softmax", softmax(logits), "T E")
    chosen, gates = at.stage("router.topk", top_k(probs, k), "T k")
    if config.norm_topk_prob:
        gates = at.stage("router.renorm", gates / gates.sum(axis=-1, keepdims=True), "T k")

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.gate_proj.weight, w.up_proj.weight, w.down_proj.weight

    return swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at)
