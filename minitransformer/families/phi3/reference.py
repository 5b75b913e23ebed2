"""validate's float64 truth for the Phi-3 family: transformers' own model, with its RMSNorm and rotary tables
recomputed in float64 as for the Llama family (families/llama/reference.py says why), the frequencies Phi-3's
(the first rd numbers of each head; LongRoPE's short or long factors, picked per call by the largest position)."""

from __future__ import annotations

import numpy as np

from ..llama import reference as llama_reference
from .forward import inverse_frequencies

NOTE = ("  (transformers' float64 Phi-3 computes RMSNorm and the rotary tables in float32; its reference here\n"
        "  has them in float64, as families/llama/reference.py explains)")  # fmt: skip


def float64_throughout(reference, model, torch) -> None:
    """The Llama family's float64 RMSNorm and rotary modules, with Phi-3's frequencies for each call's positions."""
    config = model.config

    def frequencies(position_ids, layer_type) -> np.ndarray:
        long = config.rope_scaling is not None and int(position_ids.max()) + 1 > config.original_max_position_embeddings
        return inverse_frequencies(config, np.dtype(np.float64), long)

    llama_reference.float64_throughout(reference, model, torch, frequencies=frequencies)
