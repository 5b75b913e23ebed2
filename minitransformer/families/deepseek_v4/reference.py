"""validate's float64 truth for DeepSeek-V4: transformers' float64 model as it is (a first version: the pieces
transformers keeps in float32 whatever the dtype are not yet recomputed in float64 here)."""

from __future__ import annotations

NOTE = "  (transformers' float64 DeepSeek-V4 keeps its hyper-connections, norms and sinks in float32)"


def float64_throughout(reference, model, torch) -> None:
    """Nothing replaced yet: transformers' model in float64, its float32 modules as they are."""
