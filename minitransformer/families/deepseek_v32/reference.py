"""validate's float64 truth for DeepSeek-V3.2: DeepSeek-V3's (families/deepseek_v3/reference.py: RMSNorm, the
rotary tables and the router in float64), and the lightning indexer, which transformers computes in float32 whatever
the model's dtype (DeepseekV32Indexer: `q.float()`, `k.float()`, the head weights `.float()`): here in the model's
dtype. The indexer's scores only choose keys, so float32 there moves the logits only where two keys' scores are
within float32 rounding of each other at the edge of a query's top ki."""

from __future__ import annotations

import types

from ...errors import UserError
from ..deepseek_v3.reference import float64_throughout as deepseek_v3_float64_throughout

NOTE = (
    "  (transformers' float64 DeepSeek-V3.2 computes RMSNorm, the rotary tables, the router and the indexer in "
    "float32;\n  its reference here has them in float64, as families/deepseek_v32/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """DeepSeek-V3's float64 replacements, and a float64 indexer, on this instance only."""
    deepseek_v3_float64_throughout(reference, model, torch)
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import apply_rotary_pos_emb

    float64_indexers(reference, torch, apply_rotary_pos_emb, model.config.n_layer)


def float64_indexers(reference, torch, apply_rotary, expected: int) -> None:
    """Every indexer of transformers' model (DeepseekV32Indexer, GlmMoeDsaIndexer: `expected` of them) in the model's
    dtype, its rotary `apply_rotary` (transformers' apply_rotary_pos_emb, or GLM-5's interleaved one)."""

    def indexer(module, hidden_states, q_resid, position_embeddings, attention_mask, position_ids=None, cache=None):
        batch_size, seq_len, _ = hidden_states.shape
        cos, sin = position_embeddings
        rope, head = module.qk_rope_head_dim, module.head_dim
        q = module.wq_b(q_resid).view(batch_size, seq_len, module.n_heads, head)
        q_rot, q_pass = torch.split(q, [rope, head - rope], dim=-1)
        k = module.k_norm(module.wk(hidden_states)).unsqueeze(2)
        k_rot, k_pass = torch.split(k, [rope, head - rope], dim=-1)
        q_rot, k_rot = apply_rotary(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = torch.cat([q_rot, q_pass], dim=-1)
        k = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
        if cache is not None:
            k = cache.update_indexer(k, module.layer_idx)
        scores = torch.relu(torch.matmul(q, k.transpose(-1, -2).unsqueeze(1)) * module.softmax_scale)
        weights = module.weights_proj(hidden_states) * (module.n_heads**-0.5)
        index_scores = torch.matmul(weights.unsqueeze(-2), scores).squeeze(-2)
        if attention_mask.dtype == torch.bool:
            index_scores = index_scores.masked_fill(~attention_mask, float("-inf"))
        else:
            index_scores = index_scores + attention_mask
        topk = min(module.index_topk, index_scores.shape[-1])
        return index_scores.topk(topk, dim=-1).indices.to(torch.int32)

    indexers = [m for m in reference.modules() if type(m).__name__.endswith("Indexer")]
    if len(indexers) != expected:
        raise UserError(
            f"validate in float64 recomputes the indexer of transformers' {type(reference).__name__} in "
            f"float64, and found {len(indexers)} indexers for the {expected} layers that have one"
        )
    for module in indexers:
        module.weights_proj.weight.data = module.weights_proj.weight.data.to(torch.float64)
        module.forward = types.MethodType(indexer, module)
