"""validate's float64 truth for the Llama family: transformers' own model, with the two steps it computes in float32
even in a float64 model recomputed in float64 (needs torch and transformers, as validate does; nothing else
imports this but the families' records, which name it)."""

from __future__ import annotations

import inspect
import types

import numpy as np

from ...errors import UserError
from .. import rotary


def patched(reference, forward, classes: tuple[str, ...]) -> int:
    """Every module of the reference whose class's name ends with one of `classes` made to run `forward`; how many."""
    found = 0
    for module in reference.modules():
        if type(module).__name__.endswith(classes):
            module.forward = types.MethodType(forward, module)
            found += 1
    return found


def note(family: str) -> str:
    """validate's words on the float64 reference of a family whose only float32 steps are the Llama family's."""
    return (
        f"  (transformers' float64 {family} computes RMSNorm and the rotary tables in float32; its reference "
        "here\n  has them in float64, as families/llama/reference.py explains)"
    )


def qk_note(family: str) -> str:
    """The same words where the family's attention norms each head's q and k (Qwen3's, OLMo 2's)."""
    return (
        f"  (transformers' float64 {family} computes RMSNorm, its q and k norms included, and the rotary tables in "
        "float32;\n  its reference here has them in float64, as families/llama/reference.py explains)"
    )


def llama_like(words: str, norms_per_layer: int = 2, norms=None, eager_experts: bool = False) -> types.SimpleNamespace:
    """The float64 reference of a family whose only float32 steps are the Llama family's, as parts/family.py's
    composed takes one: float64_throughout with the family's RMSNorms a layer (4 with q and k norms, or sandwich norms)
    or `norms(config)` in the model (where its layers differ: LFM2's), transformers' eager loop over the experts where
    `eager_experts` (torch's grouped_mm takes no float64), and validate's note (`words`: note's or qk_note's)."""

    def throughout(reference, model, torch) -> None:
        counted = None if norms is None else norms(model.config)
        float64_throughout(reference, model, torch, norms_per_layer=norms_per_layer, norms=counted)
        if eager_experts:
            reference.set_experts_implementation("eager")

    return types.SimpleNamespace(float64_throughout=throughout, NOTE=words)


NOTE = note("Llama family")


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
# config's, computed in float64 (rotary.inverse_frequencies), not float32 roundings of them. And the transformers
# model it is checked against runs those two steps in float64: its RMSNorm modules without the cast, its rotary
# modules with angles position x (the float64 frequencies) in float64. transformers makes frequencies only in
# float32, so these are ours; tests/families/test_float64_fixtures.py checks them against transformers' own to float32 precision
# for every rope type. Everything else is transformers' own float64: embeddings, projections and their biases,
# how cos and sin turn q and k, grouped-query attention, the sliding window's mask, SDPA, the MLP, the head.
def float64_throughout(reference, model, torch, norms_per_layer: int = 2, gain=None, norms: int | None = None) -> None:
    """Replace, on this instance of transformers' model only, the forward of its RMSNorm and rotary modules with
    float64 ones (see above). For a family laid out as the Llama family is: `norms_per_layer`, how many RMSNorms a
    layer has (Qwen3's q and k norms make 4), or `norms`, how many the model has (where its layers differ: LFM2's q
    and k norms are its attention layers' only); `gain(module)`, an RMSNorm's scale (w; Gemma's 1 + w). The rotary
    modules' frequencies are the config's, for each call's layer type and positions (float64_frequencies)."""
    scale = gain or (lambda module: module.weight)

    def rms_norm(module, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        eps = module.variance_epsilon if hasattr(module, "variance_epsilon") else module.eps
        return scale(module) * (hidden_states * torch.rsqrt(variance + eps))

    replaced = patched(reference, rms_norm, ("RMSNorm",))
    rotaries = float64_rotary(reference, float64_frequencies(model.config), torch)
    if replaced != (norms_per_layer * model.config.n_layer + 1 if norms is None else norms) or not rotaries:
        import transformers

        raise UserError(
            f"validate in float64 recomputes the RMSNorm and rotary tables of transformers' "
            f"{type(reference).__name__} in float64, and transformers {transformers.__version__} does not "
            f"lay them out as it expects (rotary forward(x, position_ids)); upgrade transformers"
        )


def float64_frequencies(config):
    """frequencies(position_ids, layer_type): the float64 frequencies of the config's rope for the layers of that
    type (Gemma 3's sliding layers have their own base; a type the config does not name, its first layer's that has
    rotary positions: SmolLM3's NoPE layers have none), and for those positions (LongRoPE's long factors past the
    original context, as transformers picks them per call)."""
    float64 = np.dtype(np.float64)

    def frequencies(position_ids, layer_type):
        types = config.layer_types
        layers = [types.index(layer_type)] if layer_type in types else range(len(types))
        rope = next(rope for rope in map(config.rope, layers) if rope is not None)
        return rotary.inverse_frequencies(rope, float64, rotary.is_long(rope, int(position_ids.max()) + 1))

    return frequencies


def float64_rotary(reference, frequencies, torch, repeated: bool = False) -> int:
    """Replace, on this instance of transformers' model only, the forward of its rotary modules with one whose angles
    are position x `frequencies(position_ids, layer_type)` (float64 frequencies, each used twice as transformers
    lays them out: [f, f], or each repeated in place where `repeated`, Cohere2's) in float64; how many it replaced
    (none where an older transformers caches its tables by sequence length). The GPT-NeoX family's reference
    (families/neox/reference.py) replaces its rotary tables with this too."""

    def rotary(module, x, position_ids, layer_type=None):
        inv_freq = torch.from_numpy(np.array(frequencies(position_ids, layer_type)))
        angles = position_ids[..., None].to(torch.float64) * inv_freq
        angles = angles.repeat_interleave(2, dim=-1) if repeated else torch.cat((angles, angles), dim=-1)
        # its attention factor (YaRN's; 1 for the others), the layer type's where each type has its rope (OLMo 3)
        scaling = getattr(module, f"{layer_type}_attention_scaling", getattr(module, "attention_scaling", 1.0))
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)

    found = 0
    for module in reference.modules():
        if type(module).__name__.endswith("RotaryEmbedding") and list(inspect.signature(module.forward).parameters) in (
            ["x", "position_ids"],
            ["x", "position_ids", "layer_type"],
        ):
            module.forward = types.MethodType(rotary, module)
            found += 1
    return found


def float64_rotation(reference, torch, halved: bool) -> int:
    """Where transformers turns q and k in float32 whatever the model's dtype (ERNIE 4.5's and Cohere2's
    apply_rotary_pos_emb: `q.float()`, `k.float()`), replace, on this instance only, each attention module's forward
    with its own code (transformers' as written) reading an apply_rotary_pos_emb that turns them in their dtype:
    q cos + rotate_half(q) sin with the module's own rotate_half, the tables' frequencies repeated in place first where
    `halved` (tables [f, f], as ERNIE's: their first half, each frequency twice). How many it replaced."""

    def apply_rotary_pos_emb(rotate_half):
        def turned(q, k, cos, sin, unsqueeze_dim=1):
            cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
            if halved:
                cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
                sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1)
            return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

        return turned

    found = 0
    for module in reference.modules():
        forward = inspect.unwrap(type(module).forward)
        if type(module).__name__.endswith("Attention") and "apply_rotary_pos_emb" in forward.__code__.co_names:
            names = dict(forward.__globals__)
            names["apply_rotary_pos_emb"] = apply_rotary_pos_emb(names["rotate_half"])
            own = types.FunctionType(
                forward.__code__, names, forward.__name__, forward.__defaults__, forward.__closure__
            )
            own.__kwdefaults__ = forward.__kwdefaults__
            module.forward = types.MethodType(own, module)
            found += 1
    return found
