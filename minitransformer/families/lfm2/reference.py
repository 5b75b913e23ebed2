"""validate's float64 truth for LFM2: the Llama family's reference (families/llama/reference.py: RMSNorm and the
rotary tables in float64), with LFM2's count of norms."""

from __future__ import annotations

from ..llama.reference import float64_throughout as llama_float64
from ..llama.reference import note

NOTE = note("LFM2")


def float64_throughout(reference, model, torch) -> None:
    """Two norms a layer, two more (q and k) in each attention layer (LFM2-MoE's too), and the final one."""
    attention = sum(not kind.startswith("conv") for kind in model.config.layer_types)  # LFM2-MoE's conv_dense too
    llama_float64(reference, model, torch, norms=2 * model.config.n_layer + 2 * attention + 1)
