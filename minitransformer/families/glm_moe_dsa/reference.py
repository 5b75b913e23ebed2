"""validate's float64 truth for GLM-5 (families/glm_moe_dsa/family.py says what it recomputes in float64, and why)."""

from __future__ import annotations

from ..deepseek_v3 import reference as deepseek_v3_reference
from ..deepseek_v32.reference import float64_indexers

NOTE = (
    "  (transformers' float64 GLM-5 computes RMSNorm, the rotary tables, the router and the indexer in float32; its\n"
    "  reference here has them in float64, as families/glm_moe_dsa/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import apply_rotary_pos_emb_interleave

    deepseek_v3_reference.float64_throughout(reference, model, torch)
    own = sum(source is None for source in model.config.topk_sources)
    float64_indexers(reference, torch, apply_rotary_pos_emb_interleave, own)
