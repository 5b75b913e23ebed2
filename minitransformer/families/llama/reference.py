"""validate's float64 truth for the Llama family: transformers' own model, with the two steps it computes in float32
even in a float64 model recomputed in float64 (needs torch and transformers, as validate does; nothing else
imports this)."""

from __future__ import annotations

import types
from inspect import signature

import numpy as np

from ...errors import UserError
from .forward import inverse_frequencies

NOTE = ("  (transformers' float64 Llama family computes RMSNorm and the rotary tables in float32; its reference "
        "here\n  has them in float64, as families/llama/reference.py explains)")  # fmt: skip


# What transformers computes in float32 even in a float64 model, and why the reference computes it in float64.
#
# GPT-2: nothing (its reorder_and_upcast_attn path, eager attention only, is not taken). The Llama family
# (modeling_llama.py and the Mistral and Qwen2 copies): two steps.
# - RMSNorm casts its input to float32 (`hidden_states.to(torch.float32)`), normalises there and casts back.
# - The rotary embedding computes its inverse frequencies in float32 (the rope init functions make them so) and
#   its angles `position_ids.float() * inv_freq.float()` and their cos and sin in float32, then casts the tables
#   to the model's dtype.
# Measured on the fixtures, these leave transformers' float64 logits 1.5e-7 to 3.8e-7 x max|logit| from a float64
# computation: about 40% of the distance of a float32 pass from it, so no truth to measure float32 against, and
# 150 to 380 times the 1e-9 of the check. Mirroring them in our float64 pass would not reach 1e-9 either: torch's float32
# rsqrt, cos and sin round differently from NumPy's (for a float32 angle, torch's cos differs from the correctly
# rounded one in 5% of cases), so the two would still differ by float32 roundings.
#
# So the float64 truth is our float64 pass with no float32 step at all, RoPE included: its frequencies are the
# config's, computed in float64 (llama.inverse_frequencies), not float32 roundings of them. And the transformers
# model it is checked against runs those two steps in float64: its RMSNorm modules without the cast, its rotary
# modules with angles position x (the float64 frequencies) in float64. transformers makes frequencies only in
# float32, so these are ours; tests/test_float64_hf.py checks them against transformers' own to float32 precision
# for every rope type. Everything else is transformers' own float64: embeddings, projections and their biases,
# how cos and sin turn q and k, grouped-query attention, the sliding window's mask, SDPA, the MLP, the head.
def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, the forward of its RMSNorm and rotary modules with
    float64 ones (see above)."""
    inv_freq = inverse_frequencies(model.config, np.dtype(np.float64))
    float64_norms_and_rotary(reference, model, torch, lambda module: module.weight, 2 * model.config.n_layer + 1,
                             lambda layer_type: inv_freq)  # fmt: skip


def float64_norms_and_rotary(reference, model, torch, gain, n_norms: int, frequencies) -> None:
    """float64_throughout for any family laid out as the Llama family is: gain(module) is an RMSNorm's scale (w, or
    Gemma's 1 + w), n_norms how many RMSNorm modules the model has, frequencies(layer_type) the float64 rotary
    frequencies of a layer type (None where the rotary module has one for all, forward(x, position_ids); a model
    whose layer types rotate differently has forward(x, position_ids, layer_type))."""
    tables = {}

    def rms_norm(module, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        eps = module.variance_epsilon if hasattr(module, "variance_epsilon") else module.eps
        return gain(module) * (hidden_states * torch.rsqrt(variance + eps))

    def rotary(module, x, position_ids, layer_type=None):
        if layer_type not in tables:
            tables[layer_type] = torch.from_numpy(frequencies(layer_type).copy())
        angles = position_ids[..., None].to(torch.float64) * tables[layer_type]
        angles = torch.cat((angles, angles), dim=-1)
        scaling = getattr(module, "attention_scaling", 1.0)  # 1 for the rope types we take
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)

    found = {"RMSNorm": 0, "RotaryEmbedding": 0}
    for module in reference.modules():
        kind = next((k for k in found if type(module).__name__.endswith(k)), None)
        if kind == "RotaryEmbedding" and list(signature(module.forward).parameters) not in (
            ["x", "position_ids"], ["x", "position_ids", "layer_type"]):  # fmt: skip
            kind = None  # an older transformers (tables cached by sequence length): counted as not found below
        if kind is not None:
            module.forward = types.MethodType(rms_norm if kind == "RMSNorm" else rotary, module)
            found[kind] += 1
    if found["RMSNorm"] != n_norms or not found["RotaryEmbedding"]:
        import transformers

        raise UserError(f"validate in float64 recomputes the RMSNorm and rotary tables of transformers' "
                        f"{type(reference).__name__} in float64, and transformers {transformers.__version__} does not "
                        f"lay them out as it expects (rotary forward(x, position_ids)); upgrade transformers")  # fmt: skip
