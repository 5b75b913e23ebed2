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

from ...engine.kvcache import KVCache, LayerCache
from ...engine.ops import rms_norm, softmax
from ...engine.tape import Tape
from ..llama.forward import attention, decoder
from ..moe import swiglu_experts, top_k
from .config import MixtralConfig


def mixtral(ids, p, config: MixtralConfig, cache: KVCache | None, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T]) -> logits [R, V], as llama.llama computes them, with mixture-of-experts blocks."""
    return decoder(ids, p, config, cache, tape, all_positions, pads, decoder_block)


def decoder_block(x, p, config: MixtralConfig, at: Tape, kv: LayerCache | None, bias, rotary):
    """Pre-RMSNorm block: x + attention(RMSNorm(x)), then x + mixture of experts(RMSNorm(x))."""
    eps = config.rms_norm_eps
    h = at.stage("ln_1", rms_norm(x, p.input_layernorm.weight, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.self_attn, config, at, kv, bias, rotary), "T D")
    h = at.stage("ln_2", rms_norm(x, p.post_attention_layernorm.weight, eps), "T D")
    return at.stage("resid_post", x + mixture(h, p.block_sparse_moe, config, at), "T D")


def mixture(h, p, config: MixtralConfig, at: Tape):
    """The sparse MoE MLP: the router picks k of E experts per token, and each expert computes its tokens' rows."""
    E, k = config.n_experts, config.top_k
    logits = at.matmul("router", h, p.gate.weight.T, "T D, D E -> T E")
    probs = at.stage("router.softmax", softmax(logits), "T E")
    chosen, top = at.stage("router.topk", top_k(probs, k), "T k")
    gates = at.stage("router.renorm", top / top.sum(axis=-1, keepdims=True), "T k")

    def weights(e: int):
        w = getattr(p.experts, str(e))
        return w.w1.weight, w.w3.weight, w.w2.weight  # gate, up, down

    return swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at)
