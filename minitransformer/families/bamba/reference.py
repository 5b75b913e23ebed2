"""validate's float64 truth for the Mamba-2 hybrids with attention, Bamba, Granite 4.0-H and Falcon-H1: transformers'
own model, with what it computes in float32 whatever the model's dtype recomputed in float64 (needs torch and
transformers, as validate does; nothing else imports this).

In a float64 model transformers keeps in float32: the RMSNorms (the input cast to float32), the Mamba-2 mixers' scan,
gated norm and A (families/mamba2/reference.py recomputes those, the scan position by position), the rotary tables
(families/llama/reference.py's), Granite's router (its logits `.float()`, their top k and softmax in float32) and
Falcon-H1's mup_vector (made in float32 from the multipliers, then cast: each a float32 rounding of the config's). Here
each is the model's dtype's, its multipliers the config's; Granite's experts run transformers' eager loop (its
grouped_mm takes no float64). A pass of the reference keeps no cache (validate compares whole prompts).
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ..llama.reference import float64_frequencies, float64_rotary, patched
from ..mamba2.reference import float64_mixers, float64_norms
from ..parts.mamba2 import segments

MIXERS = ("BambaMixer", "GraniteMoeHybridMambaLayer", "FalconH1Mixer")
NOTE = (
    "  (transformers' float64 model computes its norms, its Mamba-2 scans, its rotary tables (and Granite's router,\n"
    "  Falcon-H1's multipliers of in_proj) in float32; its reference here computes them in float64, as\n"
    "  families/bamba/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    c = model.config
    reference.config.use_cache = False  # whole prompts: no cache for the mixers to keep
    mixers = float64_mixers(reference, torch, MIXERS)
    norms = float64_norms(reference, torch)
    ropes = any(c.rope(i) is not None for i in range(c.n_layer))
    rotaries = float64_rotary(reference, float64_frequencies(c), torch) if ropes else 0
    routers = float64_routers(reference, torch)
    if c.in_proj_multipliers is not None:
        mup = torch.from_numpy(segments(np.zeros(1, np.float64), c))
        for module in reference.modules():
            if hasattr(module, "mup_vector"):
                module.mup_vector = mup
    if hasattr(reference, "set_experts_implementation") and routers:
        reference.set_experts_implementation("eager")
    mamba = sum(kind != "full_attention" for kind in c.layer_types)  # a Mamba-2 mixer in every other layer
    want = (mamba, 2 * c.n_layer + 1, bool(ropes), c.n_layer if c.n_experts else 0)
    if (mixers, norms, bool(rotaries), routers) != want:
        raise UserError(
            f"validate in float64 recomputes parts of transformers' {type(reference).__name__} in float64, and found "
            f"{mixers} Mamba mixers, {norms} norms, {rotaries} rotary modules and {routers} routers where the config "
            f"has {want[0]}, {want[1]}, {int(want[2])} and {want[3]}"
        )


def float64_routers(reference, torch) -> int:
    """Every router of Granite's kind (the top k of the logits, a softmax over those k) in its model's dtype, float64
    here, where transformers computes it in float32; how many."""

    def router(module, hidden_states):
        logits = torch.nn.functional.linear(hidden_states, module.weight)
        top, chosen = logits.topk(module.top_k, dim=-1)
        return logits, torch.softmax(top, dim=-1), chosen

    return patched(reference, router, ("GraniteMoeHybridTopKRouter",))
