"""validate's float64 truth for Jamba: transformers' own model, with what it computes in float32 whatever the model's
dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

In a float64 model transformers' Jamba keeps in float32: its RMSNorms (the input cast to float32; the mixers' norms
of dt, B and C too), the Mamba-1 mixers' A, D, Δ B x and scan (`.float()` of each: families/mamba/reference.py
recomputes the mixer's steps in float64, position by position) and the router's softmax (`dtype=torch.float`). Here
each is the model's dtype's; the experts run transformers' eager loop (its grouped_mm takes no float64). A pass of
the reference keeps no cache (validate compares whole prompts).
"""

from __future__ import annotations

from ...errors import UserError
from ..llama.reference import patched
from ..mamba.reference import float64_mixers, float64_norms

NOTE = (
    "  (transformers' float64 Jamba computes its norms, its Mamba-1 scans and its router's softmax in float32; its\n"
    "  reference here computes them in float64, as families/jamba/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    c = model.config
    reference.config.use_cache = False  # whole prompts: no cache for the mixers to keep
    mixers, norms = float64_mixers(reference, torch), float64_norms(reference, torch)
    routers = float64_routers(reference, torch)
    if hasattr(reference, "set_experts_implementation") and routers:
        reference.set_experts_implementation("eager")
    mamba = sum(kind.startswith("mamba") for kind in c.layer_types)
    want = (mamba, 2 * c.n_layer + 1 + 3 * mamba, sum(kind == "moe" for kind in c.mlp_types))
    if (mixers, norms, routers) != want:
        raise UserError(
            f"validate in float64 recomputes parts of transformers' {type(reference).__name__} in float64, and found "
            f"{mixers} Mamba mixers, {norms} norms and {routers} routers where the config has {want[0]}, {want[1]} "
            f"and {want[2]}"
        )


def float64_routers(reference, torch) -> int:
    """Every JambaTopKRouter (a softmax over the E logits, the top k kept as they are) in its model's dtype, float64
    here, where transformers computes the softmax in float32; how many."""

    def router(module, hidden_states):
        logits = torch.nn.functional.linear(hidden_states, module.weight)
        top, chosen = torch.softmax(logits, dim=-1).topk(module.top_k, dim=-1)
        return logits, top, chosen

    return patched(reference, router, ("JambaTopKRouter",))
