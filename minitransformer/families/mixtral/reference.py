"""validate's float64 truth for Mixtral: the Llama family's (families/llama/reference.py: RMSNorm and the rotary
tables in float64), and one step more that transformers computes in float32 whatever the model's dtype: the router's
softmax (MixtralTopKRouter: `softmax(router_logits.float())`), whose top-k gates then weigh the experts' float64
outputs. (Its default experts, torch's grouped_mm, take no float64 at all: the reference runs transformers' eager
loop over the experts.) Here the router computes its softmax, top k and renormalisation in the model's dtype."""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = (
    "  (transformers' float64 Mixtral computes RMSNorm, the rotary tables and the router's softmax in float32; "
    "its\n  reference here has them in float64, as families/mixtral/reference.py explains)"
)


def float64_throughout(reference, model, torch, norms_per_layer: int = 2, norms: int | None = None) -> None:
    """The Llama family's float64 RMSNorm and rotary modules, and a float64 router, on this instance only (Qwen3-MoE's
    too: its router renormalises the top k only under norm_topk_prob, and its dense layers have none; MiniMax's, whose
    layers' norms differ: `norms`, as the Llama family's reads it)."""
    llama_float64_throughout(reference, model, torch, norms_per_layer=norms_per_layer, norms=norms)
    # transformers' default experts (torch's grouped_mm) take no float64: its own loop over the experts does
    if hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")

    def router(module, hidden_states):
        hidden_states = hidden_states.reshape(-1, module.hidden_dim)
        router_logits = torch.nn.functional.linear(hidden_states, module.weight)
        probs = torch.softmax(router_logits, dim=-1)  # in the model's dtype, not float32
        top, indices = torch.topk(probs, module.top_k, dim=-1)
        if getattr(module, "norm_topk_prob", True):
            top = top / top.sum(dim=-1, keepdim=True)
        return router_logits, top, indices

    routers = [m for m in reference.modules() if type(m).__name__.endswith("TopKRouter")]
    sparse = model.config.n_layer - len(getattr(model.config, "dense_layers", ()))
    if len(routers) != sparse:
        raise UserError(
            f"validate in float64 recomputes the router of transformers' {type(reference).__name__} in "
            f"float64, and found {len(routers)} routers for {sparse} layers with experts"
        )
    for module in routers:
        module.forward = types.MethodType(router, module)
