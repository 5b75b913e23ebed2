"""validate's float64 truth for gpt-oss: what transformers computes in float32 whatever the model's dtype, recomputed
in float64 on this instance of its model (families/llama/reference.py says why): RMSNorm (GptOssRMSNorm casts to
float32) and the rotary tables (float32 frequencies and angles, then x the attention factor). gpt-oss's rotary
module hands out tables of dh/2 angles (its rotation splits q and k into halves), not the Llama family's dh, so its
forward is replaced here with one of those. The sinks' softmax and the router's run in the model's dtype already;
transformers' default experts (grouped_mm) take no float64, so its eager loop over the experts runs them."""

from __future__ import annotations

import types
from inspect import signature

import numpy as np

from ...errors import UserError
from ..llama.reference import float64_throughout as llama_float64_throughout
from ..rotary import inverse_frequencies

NOTE = (
    "  (transformers' float64 gpt-oss computes RMSNorm and the rotary tables in float32; its reference here has "
    "them\n  in float64, as families/gpt_oss/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """The Llama family's float64 RMSNorm, and gpt-oss's rotary tables of dh/2 float64 angles x the attention factor."""
    llama_float64_throughout(reference, model, torch)  # its RMSNorm; its rotary forward is replaced below
    if hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")
    inv_freq = torch.from_numpy(np.array(inverse_frequencies(model.config.rope(), np.dtype(np.float64))))

    def rotary(module, x, position_ids, layer_type=None):
        angles = position_ids[..., None].to(torch.float64) * inv_freq  # [.., T, dh/2]: not doubled
        scaling = module.attention_scaling
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)

    found = 0
    for module in reference.modules():
        if type(module).__name__.endswith("RotaryEmbedding") and list(signature(module.forward).parameters)[:2] == [
            "x",
            "position_ids",
        ]:  # transformers' forward(x, position_ids), or the Llama family's replacement of it
            module.forward = types.MethodType(rotary, module)
            found += 1
    if not found:
        raise UserError(
            f"validate in float64 recomputes the rotary tables of transformers' {type(reference).__name__} "
            f"in float64 and found no rotary module to replace; upgrade transformers"
        )
