"""validate's float64 truth for the Gemma family: transformers' own model, with the steps it computes in float32 even
in a float64 model recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

As for the Llama family (llama/reference.py, whose replacement modules this reuses): Gemma's RMSNorm casts its input
to float32 (`x.float()`) and scales by (1 + w.float()) there, and the rotary tables are computed in float32, per layer
type in Gemma 3 (its sliding layers' base is their own). One more in Gemma 2, whose attention transformers runs
eagerly (its soft-cap has no SDPA kernel): the softmax of the scores is taken in float32 (`softmax(..., dtype=
torch.float32)`). The reference runs that attention with the same steps and the softmax in float64. The embedding
scale is a float64 sqrt(D) in a float64 model: nothing to do there.
"""

from __future__ import annotations

from ..llama.reference import float64_throughout as llama_float64_throughout

NOTE = (
    "  (transformers' float64 Gemma computes RMSNorm, the rotary tables and Gemma 2's attention softmax in "
    "float32;\n  its reference here has them in float64, as families/gemma/reference.py explains)"
)
FLOAT64_ATTENTION = "minitransformer_float64_eager"


def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, its RMSNorm and rotary modules' forward with float64
    ones, and its eager attention with one whose softmax is float64."""
    norms = 4 + 2 * model.config.qk_norm
    llama_float64_throughout(reference, model, torch, norms_per_layer=norms, gain=lambda module: 1.0 + module.weight)
    if reference.config._attn_implementation == "eager":
        _register_float64_attention(torch)
        reference.set_attn_implementation(FLOAT64_ATTENTION)


def _register_float64_attention(torch) -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    def eager_float64(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None, **kwargs):
        """transformers' Gemma eager attention (modeling_gemma2.eager_attention_forward), its softmax in the
        scores' dtype rather than float32."""
        groups = module.num_key_value_groups
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
        weights = torch.matmul(query, key.transpose(2, 3)) * scaling
        if softcap is not None:
            weights = torch.tanh(weights / softcap) * softcap
        if attention_mask is not None:
            weights = weights + attention_mask
        weights = torch.softmax(weights, dim=-1)
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    AttentionInterface.register(FLOAT64_ATTENTION, eager_float64)
    AttentionMaskInterface.register(FLOAT64_ATTENTION, eager_mask)
