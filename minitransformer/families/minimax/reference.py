"""validate's float64 truth for MiniMax-01 (families/minimax/family.py says what it recomputes in float64, and why)."""

from __future__ import annotations

from ...errors import UserError
from ..mixtral.reference import float64_throughout as mixtral_float64_throughout
from ..parts.lightning import slope_rates
from .config import LINEAR

NOTE = (
    "  (transformers' float64 MiniMax computes RMSNorm, the rotary tables, the router's softmax and the lightning "
    "layers'\n  decays in float32; its reference here has them in float64, as families/minimax/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    c = model.config
    lightning = c.layer_types.count(LINEAR)
    mixtral_float64_throughout(reference, model, torch, norms=2 * c.n_layer + 1 + lightning)
    layers = [m for m in reference.modules() if type(m).__name__ == "MiniMaxLightningAttention"]
    if len(layers) != lightning:
        raise UserError(f"validate in float64 found {len(layers)} MiniMax lightning layers, not {lightning}")
    for module in layers:
        slopes = torch.from_numpy(slope_rates(c, module.layer_idx))[:, None, None]
        module.slope_rate = slopes
        module.query_decay, module.key_decay, module.diagonal_decay = module.decay_factors(slopes)
