"""validate's float64 truth for DeepSeek-V3: the Llama family's (families/llama/reference.py: RMSNorm, four a layer
here with q_a_layernorm and kv_a_layernorm, and the rotary tables over the dr rotary dimensions in float64), and the
router, which transformers computes in float32 whatever the model's dtype (DeepseekV3TopkRouter: the logits of
`hidden_states.type(torch.float32)` and `self.weight.type(torch.float32)`, their sigmoid, the choice and the weights):
here in the model's dtype. Its default experts (torch's grouped_mm) take no float64: the reference runs transformers'
eager loop over the experts."""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import float64_throughout as llama_float64_throughout


def note(family: str) -> str:
    """validate's words on the float64 reference of a family whose float32 steps are DeepSeek-V3's."""
    return (
        f"  (transformers' float64 {family} computes RMSNorm, the rotary tables and the router in float32; its\n"
        "  reference here has them in float64, as families/deepseek_v3/reference.py explains)"
    )


def deepseek_like(family: str) -> types.SimpleNamespace:
    """This reference for a family that computes what DeepSeek-V3 computes (GLM-4.7-Flash), as parts/family.py's
    composed takes one: float64_throughout, and the note naming the family."""
    return types.SimpleNamespace(float64_throughout=float64_throughout, NOTE=note(family))


NOTE = note("DeepSeek-V3")


def float64_throughout(reference, model, torch) -> None:
    """The Llama family's float64 RMSNorm and rotary modules, and a float64 router, on this instance only."""
    c = model.config
    norms = 2 + (c.q_lora_rank is not None) + 1  # input, post-attention, q_a (if any) and kv_a layernorms
    llama_float64_throughout(reference, model, torch, norms_per_layer=norms)  # cos/sin's factor: attention_scaling
    if hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")

    routers = float64_routers(reference, torch)
    moe_layers = sum(c.is_moe(i) for i in range(c.n_layer))
    if routers != moe_layers:
        raise UserError(
            f"validate in float64 recomputes the router of transformers' {type(reference).__name__} in "
            f"float64, and found {routers} routers for {moe_layers} layers with experts"
        )


def float64_glm45(reference, model, torch) -> None:
    """GLM-4.5's (families/glm4_moe/family.py: the Llama family's attention before DeepSeek-V3's mixture): the Llama
    family's float64 reference (its q and k norms where use_qk_norm) and the routers below, in transformers' eager loop
    over the experts."""
    c = model.config
    llama_float64_throughout(reference, model, torch, norms_per_layer=2 + 2 * c.use_qk_norm)
    reference.set_experts_implementation("eager")
    moe = sum(map(c.is_moe, range(c.n_layer)))
    if float64_routers(reference, torch) != moe:
        raise UserError(
            f"validate in float64 found other than {moe} routers in transformers' {type(reference).__name__}"
        )


def float64_routers(reference, torch) -> int:
    """Every group-limited sigmoid router (transformers' ...TopkRouter: DeepSeek-V3's, Nemotron-H's) in its model's
    dtype, float64 here, where transformers computes it in float32, its weights upcast; how many."""

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
