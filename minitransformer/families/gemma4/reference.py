"""validate's float64 truth for Gemma 4: transformers' own model, with the steps it computes in float32 even in a
float64 model recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

As for the Llama family (llama/reference.py, whose replacements this reuses): Gemma 4's RMSNorm casts its input to
float32 (`hidden_states.float()`) and scales by w.float() there (v's norm and the router's have no gains), and the
rotary tables are computed in float32, per layer type (the full layers' proportional frequencies are the config's,
rotary.inverse_frequencies). One more where the layers have experts: the router's softmax is taken in float32
(`softmax(..., dtype=torch.float32)`); the reference runs the router with the same steps and the softmax in float64,
and transformers' eager loop over the experts (torch's grouped_mm takes no float64).
The embedding scales are float64 square roots in a float64 model: nothing to do there.
"""

from __future__ import annotations

import types

from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = (
    "  (transformers' float64 Gemma 4 computes RMSNorm, the rotary tables and its router's softmax in float32;\n"
    "  its reference here has them in float64, as families/gemma4/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, its RMSNorm and rotary modules' forward with float64
    ones: four norms a block and q's, k's and v's where the layer computes its keys, the per-layer branch's and the
    per-layer inputs' where the model has them, and the final one."""
    c = model.config
    own = sum(c.kv_source(i) is None for i in range(c.n_layer))
    per_layer = (c.n_layer + 1) if c.per_layer_width else 0
    experts = 4 * c.n_layer if c.moe else 0  # three around the experts and the router's
    norms = 5 * c.n_layer + 2 * own + per_layer + experts + 1

    def gain(module):
        return module.weight if module.with_scale else 1.0

    llama_float64_throughout(reference, model, torch, gain=gain, norms=norms)
    routers = [module for module in reference.modules() if type(module).__name__ == "Gemma4TextRouter"]
    for module in routers:
        module.forward = types.MethodType(_float64_router(torch), module)
    if routers:
        reference.set_experts_implementation("eager")


def _float64_router(torch):
    def forward(module, hidden_states):
        """transformers' Gemma4TextRouter.forward, its softmax in the model's dtype rather than float32."""
        hidden_states = module.norm(hidden_states) * module.scale * module.scalar_root_size
        probabilities = torch.softmax(module.proj(hidden_states), dim=-1)
        weights, index = torch.topk(probabilities, k=module.config.top_k_experts, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return probabilities, weights * module.per_expert_scale[index], index

    return forward
