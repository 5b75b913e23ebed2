"""validate's float64 truth for MiniMax-M2 (families/minimax_m2/family.py says what it recomputes in float64, and
why)."""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = (
    "  (transformers' float64 MiniMax-M2 computes RMSNorm, the rotary tables and the router's sigmoid in float32; its\n"
    "  reference here has them in float64, as families/minimax_m2/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    llama_float64_throughout(reference, model, torch, norms_per_layer=4)
    reference.set_experts_implementation("eager")

    def router(module, hidden_states, correction_bias):
        logits = torch.nn.functional.linear(hidden_states.reshape(-1, module.hidden_dim), module.weight)
        scores = logits.sigmoid()
        chosen = torch.topk(scores + correction_bias, module.top_k, dim=-1, sorted=False)[1]
        gates = scores.gather(1, chosen)
        return logits, gates / gates.sum(dim=-1, keepdim=True), chosen

    routers = [m for m in reference.modules() if type(m).__name__ == "MiniMaxM2TopKRouter"]
    if len(routers) != model.config.n_layer:
        raise UserError(
            f"validate in float64 found {len(routers)} MiniMax-M2 routers for {model.config.n_layer} layers"
        )
    for module in routers:
        module.forward = types.MethodType(router, module)
