"""validate's float64 truth for Qwen3-Next: Qwen3.5's (families/qwen35/reference.py), recomputing the same steps."""

from __future__ import annotations

from ..qwen35.reference import float64_throughout  # noqa: F401 - the family's record reads it here

NOTE = (
    "  (transformers' float64 Qwen3-Next computes its RMSNorms, the rotary tables, the DeltaNet's decay, delta rule "
    "and gated norm,\n  and the router's softmax, in float32; its reference here has them in float64, as "
    "families/qwen35/reference.py explains)"
)
