"""validate's float64 truth for GLM-4.5 (families/glm4_moe/family.py says what it recomputes in float64, and why)."""

from __future__ import annotations

from ...errors import UserError
from ..deepseek_v3.reference import float64_routers
from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = (
    "  (transformers' float64 GLM-4.5 computes RMSNorm, the rotary tables and the router in float32; its\n"
    "  reference here has them in float64, as families/glm4_moe/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    c = model.config
    llama_float64_throughout(reference, model, torch, norms_per_layer=2 + 2 * c.use_qk_norm)
    reference.set_experts_implementation("eager")
    moe = sum(map(c.is_moe, range(c.n_layer)))
    if float64_routers(reference, torch) != moe:
        raise UserError(
            f"validate in float64 found other than {moe} routers in transformers' {type(reference).__name__}"
        )
