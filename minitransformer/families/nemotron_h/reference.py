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

from ...errors import UserError
from ..deepseek_v3.reference import float64_routers
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
