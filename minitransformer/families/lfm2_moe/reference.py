"""validate's float64 truth for LFM2-MoE: LFM2's (RMSNorm and the rotary tables in float64; its router's sigmoid is in
the model's dtype already), and transformers' eager loop over the experts (torch's grouped_mm takes no float64)."""

from __future__ import annotations

from ..lfm2.reference import float64_throughout as lfm2_float64
from ..llama.reference import note

NOTE = note("LFM2-MoE")


def float64_throughout(reference, model, torch) -> None:
    lfm2_float64(reference, model, torch)
    reference.set_experts_implementation("eager")
