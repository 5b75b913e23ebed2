"""validate's float64 truth for Qwen3-MoE: the Llama family's (families/llama/reference.py: RMSNorm, Qwen3's q and k
norms among them, and the rotary tables in float64), and one step more that transformers computes in float32 whatever
the model's dtype: the router's softmax (Qwen3MoeTopKRouter: `softmax(router_logits, dtype=torch.float)`), its top k
and, under norm_topk_prob, their renormalisation, cast back to the model's dtype. (Its default experts, torch's
grouped_mm, take no float64: the reference runs transformers' eager loop over the experts.) Here the router computes
them in the model's dtype."""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = ("  (transformers' float64 Qwen3-MoE computes RMSNorm, its q and k norms, the rotary tables and the router's "
        "softmax\n  in float32; its reference here has them in float64, as families/qwen3moe/reference.py explains)")  # fmt: skip


def float64_throughout(reference, model, torch) -> None:
    """The Llama family's float64 RMSNorm (four a layer) and rotary modules, and a float64 router, on this instance."""
    llama_float64_throughout(reference, model, torch, norms_per_layer=4)  # ln_1, ln_2, q_norm, k_norm
    if hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")

    def router(module, hidden_states):
        hidden_states = hidden_states.reshape(-1, module.hidden_dim)
        router_logits = torch.nn.functional.linear(hidden_states, module.weight)
        probs = torch.softmax(router_logits, dim=-1)  # in the model's dtype, not float32
        top, indices = torch.topk(probs, module.top_k, dim=-1)
        if module.norm_topk_prob:
            top = top / top.sum(dim=-1, keepdim=True)
        return router_logits, top, indices

    routers = [m for m in reference.modules() if type(m).__name__.endswith("TopKRouter")]
    sparse = model.config.n_layer - len(model.config.dense_layers)
    if len(routers) != sparse:
        raise UserError(f"validate in float64 recomputes the router of transformers' {type(reference).__name__} in "
                        f"float64, and found {len(routers)} routers for {sparse} sparse layers")  # fmt: skip
    for module in routers:
        module.forward = types.MethodType(router, module)
