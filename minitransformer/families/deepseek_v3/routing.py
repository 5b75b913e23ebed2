"""DeepSeek-V3's choice of experts (transformers' DeepseekV3TopkRouter): group-limited top-k over the sigmoid
scores plus the correction bias. The bias only chooses; the weights are the unbiased scores (forward.weigh). Both
choices, of the groups and of the experts in them, are the tape's top k (engine/selection.py: equal scores, the
lowest index first), in the ledger as router.groups and router.choose."""

from __future__ import annotations

import numpy as np

from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from .config import DeepseekConfig


def choose(scores, correction_bias, config: DeepseekConfig, at: Tape):
    """The k experts of each token [..., k]: with s' = s + b, the topk_group of the n_group groups (E / n_group
    experts each) whose two largest s' sum highest, then the k largest s' among those groups' experts."""
    k = config.top_k
    if isinstance(scores, ShapeOnly):
        return at.top_k("router.choose", scores, k)
    E, G = config.n_experts, config.n_group
    biased = scores + correction_bias.astype(scores.dtype)
    groups = biased.reshape(*biased.shape[:-1], G, E // G)
    best_two = -np.sort(-groups, axis=-1)[..., :2].sum(axis=-1)  # [..., G]
    kept = at.top_k("router.groups", best_two, config.topk_group)
    mask = np.zeros(best_two.shape, dtype=bool)
    np.put_along_axis(mask, kept, True, axis=-1)
    allowed = np.where(np.repeat(mask, E // G, axis=-1), biased, -np.inf)
    return at.top_k("router.choose", allowed, k)
