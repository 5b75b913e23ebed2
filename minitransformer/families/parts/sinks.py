"""Attention sinks (gpt-oss's, DeepSeek-V4's): each head h has a learned logit s_h that joins every query's row of
scores as one more column before the softmax, and whose weight is then dropped: A = softmax([S | s_h])[:, :t], so a
head may give its query's weight to no key at all (its row of A sums to less than 1). No products: a column of the
scores and a softmax one wider."""

from __future__ import annotations

import numpy as np

from ...engine.shapes import ShapeOnly
from ...engine.stages import Stage

SINKS = Stage(
    "sinks",
    ("attn.with_sinks",),
    "mask",
    "S' = [S | s_h]: each head's learned sink logit s_h as one more column of every query's scores",
    "S [H, T, t], s [H]",
)
SOFTMAX = Stage(
    "softmax",
    ("attn.weights",),
    "softmax",
    "A = softmax(S') over j and the sink, the sink's column dropped (rows sum to 1 - the sink's weight)",
    "S' [H, T, t+1]",
)


def with_sinks(s, sinks):
    """[S | s_h]: the scores [..., H, T, t] with each head's sink logit as column t + 1."""
    if isinstance(s, ShapeOnly):
        return ShapeOnly((*s.shape[:-1], s.shape[-1] + 1), s.dtype)
    column = np.broadcast_to(sinks.astype(s.dtype)[:, None, None], (*s.shape[:-1], 1))
    return np.concatenate([s, column], axis=-1)
