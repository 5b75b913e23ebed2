"""validate's float64 truth for ERNIE 4.5 and its mixture of experts: transformers' own model, with the steps it computes
in float32 whatever the model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing
else imports this).

Those steps (modeling_ernie4_5.py, modeling_ernie4_5_moe.py): the Llama family's two (families/llama/reference.py:
RMSNorm and the rotary tables, which ERNIE's rotary module even hands out in float32), the rotation itself
(apply_rotary_pos_emb turns q.float() and k.float() and casts back), and in the mixture the router (Ernie4_5_Moe-
TopKRouter: the logits of hidden_states.float() and weight.float(), their softmax, the choice with the correction bias
and the renormalisation, autocast off). The reference replaces, on this instance only, the norms and the rotary module
with float64 ones, each attention's rotation with one in its dtype (its own forward otherwise), and each router with
one in the model's dtype (and runs transformers' eager loop over the experts, as torch's grouped_mm takes no float64).
"""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import float64_rotation
from ..llama.reference import float64_throughout as llama_float64_throughout
from ..qwen3moe.config import SPARSE

NOTE = (
    "  (transformers' float64 ERNIE 4.5 computes RMSNorm, the rotary tables, the rotation and a mixture's router in "
    "float32;\n  its reference here has them in float64, as families/ernie4_5/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """The Llama family's float64 RMSNorm and rotary modules, the rotation in the model's dtype, a float64 router."""
    config = model.config
    llama_float64_throughout(reference, model, torch, norms_per_layer=2)
    turned = float64_rotation(reference, torch, halved=True)
    routers = float64_routers(reference, torch)
    moe = sum(kind == SPARSE for kind in config.layer_types) if config.n_experts else 0
    if turned != config.n_layer or routers != moe:
        import transformers

        raise UserError(
            f"validate in float64 recomputes the rotation and routers of transformers' {type(reference).__name__} "
            f"in float64, and transformers {transformers.__version__} does not lay them out as it expects (found "
            f"{turned} attentions and {routers} routers, expected {config.n_layer} and {moe}); upgrade transformers"
        )


def float64_routers(reference, torch) -> int:
    """Every ERNIE router (Ernie4_5_MoeTopKRouter) in the model's dtype, its weights and correction bias too, and
    transformers' eager loop over the experts; how many."""

    def router(module, hidden_states):
        logits = torch.nn.functional.linear(hidden_states, module.weight)
        probs = torch.softmax(logits, dim=1)
        _, chosen = torch.topk(probs + module.moe_statics.e_score_correction_bias.squeeze(), module.top_k, dim=-1)
        gates = torch.gather(probs, dim=-1, index=chosen)
        return logits, gates / torch.clamp(gates.sum(dim=-1, keepdim=True), min=module.norm_min), chosen

    found = 0
    for module in reference.modules():
        if type(module).__name__ == "Ernie4_5_MoeTopKRouter":
            module.weight.data = module.weight.data.to(torch.float64)
            bias = module.moe_statics.e_score_correction_bias
            bias.data = bias.data.to(torch.float64)
            module.forward = types.MethodType(router, module)
            found += 1
    if found and hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")
    return found
