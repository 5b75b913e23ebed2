"""validate's float64 truth for Nemotron-H: transformers' own model, with what it computes in float32 whatever the
model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

In a float64 NemotronH, transformers keeps in float32: the Mamba layers' scan, gated norm and A (as Mamba-2's:
families/mamba2/reference.py recomputes those, the scan position by position), its RMSNorms, the logits
(`.float()`), and the router: its weight and correction bias are kept in float32 (_keep_in_fp32_modules_strict)
and its logits, sigmoid and choice are computed in float32. Here the router is DeepSeek-V3's float64 replacement
(families/deepseek_v3/reference.py computes the same router), its weights upcast; the experts run transformers'
eager loop (its grouped_mm takes no float64). Attention is transformers' own in float64 (SDPA, as validate loads
it; eager attention's softmax would be float32).
"""

from __future__ import annotations

import types

from ...errors import UserError
from ..mamba2.reference import float64_logits, float64_mixers, float64_norms

NOTE = (
    "  (transformers' float64 Nemotron-H computes its norms, its Mamba scans, its router and its logits in float32;\n"
    "  its reference here computes them in float64, as families/nemotron_h/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    c = model.config
    mixers = float64_mixers(reference, torch)
    norms = float64_norms(reference, torch)
    routers = float64_routers(reference, torch)
    want = (c.layer_types.count("mamba"), c.n_layer + 1, c.layer_types.count("moe"))
    if (mixers, norms, routers) != want:
        raise UserError(
            f"validate in float64 recomputes parts of transformers' {type(reference).__name__} in float64, "
            f"and found {mixers} Mamba mixers, {norms} norms and {routers} routers where the config has "
            f"{want[0]}, {want[1]} and {want[2]}"
        )
    if hasattr(reference, "set_experts_implementation") and routers:
        reference.set_experts_implementation("eager")
    float64_logits(reference, reference.model, torch)


def float64_routers(reference, torch) -> int:
    """Every router in its model's dtype (float64 here), as transformers' NemotronHTopkRouter computes it in
    float32; how many."""

    def router(module, hidden_states):
        hidden_states = hidden_states.view(-1, module.hidden_dim)
        router_logits = torch.nn.functional.linear(hidden_states, module.weight.to(hidden_states.dtype))
        scores = router_logits.sigmoid()
        biased = scores + module.e_score_correction_bias.to(scores.dtype)
        groups = biased.view(-1, module.num_group, module.num_experts // module.num_group)
        group_scores = groups.topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=module.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, module.num_group, module.num_experts // module.num_group)
        biased = biased.masked_fill(~score_mask.reshape(-1, module.num_experts).bool(), float("-inf"))
        indices = torch.topk(biased, k=module.top_k, dim=-1, sorted=False)[1]
        weights = scores.gather(1, indices)
        if module.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return router_logits, weights * module.routed_scaling_factor, indices

    found = 0
    for module in reference.modules():
        if type(module).__name__.endswith("TopkRouter"):
            module.weight.data = module.weight.data.to(torch.float64)
            module.e_score_correction_bias.data = module.e_score_correction_bias.data.to(torch.float64)
            module.forward = types.MethodType(router, module)
            found += 1
    return found
