"""validate's float64 truth for Qwen3-MoE: the Llama family's (families/llama/reference.py: RMSNorm, Qwen3's q and k
norms among them, and the rotary tables in float64), and one step more that transformers computes in float32 whatever
the model's dtype: the router's softmax (Qwen3MoeTopKRouter: `softmax(router_logits, dtype=torch.float)`), its top k
and, under norm_topk_prob, their renormalisation, cast back to the model's dtype. (Its default experts, torch's
grouped_mm, take no float64: the reference runs transformers' eager loop over the experts.) Here the router computes
them in the model's dtype."""

from __future__ import annotations

from functools import partial

from ..mixtral.reference import float64_throughout as mixtral_float64_throughout

NOTE = (
    "  (transformers' float64 Qwen3-MoE computes RMSNorm, its q and k norms, the rotary tables and the router's "
    "softmax\n  in float32; its reference here has them in float64, as families/qwen3moe/reference.py explains)"
)

# Mixtral's reference (families/mixtral/reference.py), with four RMSNorms a layer: ln_1, ln_2, q_norm and k_norm.
float64_throughout = partial(mixtral_float64_throughout, norms_per_layer=4)
