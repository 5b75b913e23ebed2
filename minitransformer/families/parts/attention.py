"""Grouped-query attention, the Llama family's, with the variants its descendants bring (biases, q and k RMS-normed per
head or over the whole projection, a sliding window on some layers), and the attention core every attention shares:
the scores, their scale and mask, the softmax and the mix, in chunks of query rows (`attend`, `attend_to_cache`).

Against GPT-2's attention: q, k and v are three products, and k and v have Hkv <= H heads (grouped-query attention):
each group of G = H / Hkv query heads reads the same keys and values, which are neither copied nor recomputed per head;
the scores are [Hkv, G, T, dh] x [Hkv, 1, dh, t], the 1 broadcast. q and k are rotated by their positions (RoPE,
families/rotary.py) just before the scores; a sliding window limits each query to the last W positions, and the cache
hands back only those. Weights are stored as transformers' nn.Linear holds them, [out, in]; `W.T` is a view, no copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache, partial
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.kvcache import KeysValues
from ...engine.ops import (
    add_mask,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    slot_positions,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, Stage, by_op
from ...engine.tape import Tape
from ..rotary import rotate_partial
from .norms import RMSNorm
from .part import Part, Products, Tensor, Tensors, linear, plus

# The mask's equation: the future alone, or the window too (on the sliding_attention layers only, where others have
# none).
MASK = "S[i, j] = -inf where j is in i's future"
WINDOW_MASK = "S[i, j] = -inf where j is in i's future or more than the window behind"
SOME_LAYERS = "  (the window: sliding_attention layers only)"


@lru_cache(maxsize=256)
def mask_equation(config: Any) -> str:
    """The mask's equation for a config: its window, and on which layers, where it has one (where the layers' windows
    differ: kinds of layer that differ in their MLP alone have one mask)."""
    chunks = {config.layer_chunk(i) for i in range(config.n_layer)} - {None}
    if chunks:  # Llama 4's chunked layers: each query's keys in its own chunk
        return f"{MASK} or outside i's chunk of {min(chunks):,} positions  (the chunked_attention layers only)"
    if config.sliding_window is None:
        return MASK
    return WINDOW_MASK + (SOME_LAYERS if len({config.layer_window(i) for i in range(config.n_layer)}) > 1 else "")


@cache
def core_stages(mask: str = MASK, scale: str = "S = S / sqrt(dh)") -> dict[str, Stage]:
    """The attention core's stages (`attend`), its mask's equation as the config has it, its scale's as the attention
    has it."""
    return by_op(
        Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (each query head against the K of its group)",
              "Q [Hkv, G, T, dh], K^T [Hkv, 1, dh, t]", ATTENTION_SCORES),
        Stage("scale", ("attn.scaled",), "scale", scale, "S [H, T, t]"),
        Stage("mask", ("attn.scores",), "mask", mask, "S [H, T, t]"),
        Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
        Stage("mix", ("attn.mix",), "matmul", "Z = A V  (each query head with the V of its group)",
              "A [Hkv, G, T, t], V [Hkv, 1, t, dh]", ATTENTION_SCORES),
    )  # fmt: skip


@cache
def cache_stages(o_bias: bool) -> dict[str, Stage]:
    """The stages around the core (`attend_to_cache`): the cache, the heads merged, the output projection."""
    return by_op(
        Stage("cache", ("attn.keys", "attn.values"), "cache",
              "K, V of the t attended positions (new rows written to the cache)", "k, v [Hkv, T, dh]"),
        Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, H*dh]", "Z [H, T, dh]"),
        Stage("out", ("attn.out",), "matmul", f"o = Z W_o{plus(o_bias, 'o')}", "Z [T, H*dh], W_o [H*dh, D]",
              ATTENTION_PROJECTIONS),
    )  # fmt: skip


# attend(q, K, V, bias, config, tape) -> z: the scores, their scale and mask, the softmax and the mix of one chunk of
# query rows against the keys it sees (in_row_chunks runs it on each chunk).
Attend = Callable[..., np.ndarray]


def attend(q, K, V, bias, config: Any, at: Tape, stages: Mapping[str, Stage] | None = None, scale: str = ""):
    """Each query's mix of its group's values, weighted by softmax(q K^T x scale + bias) over the keys (any config that
    has n_kv_head and d_head). `stages`: its stages as a family shows them (GPT-NeoX's, per head), where not
    core_stages'; `scale`: the config's field that scales the scores in place of dh^-1/2, where one does."""
    at = at.declaring(
        stages
        or core_stages(mask_equation(config), *((f"S = {scale} S  (in place of 1 / sqrt(dh))",) if scale else ()))
    )
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at, scale), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def attend_to_cache(
    q, k, v, p: SimpleNamespace, config: Any, at: Tape, inputs, core: Attend = attend, out: str = "o_proj"
):
    """The turned q and k and v through the cache; each query's mix of its group's values (`core`: by default
    `attend`), in chunks of query rows, each against the keys it can see (a long prompt skips most of its future);
    the heads merged and projected back, o = Z W_o (`out`: W_o's module in the layer's checkpoint)."""
    at = at.declaring(cache_stages(getattr(config, "o_bias", False)))  # a config without o_bias has none (Phi-3)
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "Hkv t dh")
    z = at.in_row_chunks(lambda q, K, V, bias, at: core(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
    o_proj = getattr(p, out)
    return at.matmul("out", z, o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=bias_of(o_proj))


def scale_scores(s, config: Any, at: Tape, scale: str = ""):
    """S / sqrt(dh), or S times the config's field `scale` (Granite's attention_multiplier), in place where nobody
    watches."""
    return np.multiply(s, constant(s, getattr(config, scale) if scale else config.d_head**-0.5), out=at.scratch(s))


@cache
def scaled_by(scale: str) -> Attend:
    """The attention core with its scores scaled by the config's field `scale` in place of dh^-1/2."""
    return partial(attend, scale=scale)


def multi_head_vs_weights(c: Any) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys against the products with weights of multi-head
    attention (every head its own keys; 4 D^2 MACs a position) beside an ungated MLP of two products (2 D F), the ratio
    in symbols, and the sizes it needs (GPT-2's, GPT-NeoX's)."""
    D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
    six = " = t / 6D" if c.d_ff == 4 * c.n_embd else ""
    return "4 D t FLOPs against 8 D^2 + 4 D F for the weights", f"t / (2D + F){six}", f"{D}, {F}"


# The cache of multi-head attention (GPT-2's, GPT-NeoX's): every head its own K and V.
MULTI_HEAD_CACHE = Stage(
    "cache",
    ("attn.keys", "attn.values"),
    "cache",
    "K, V of all t positions (new rows written to the cache)",
    "k, v [H, T, dh]",
)


def fused_multi_head_products(config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
    """The products of multi-head attention from one fused [D, 3D] projection (GPT-2's, GPT-NeoX's)."""
    D, H, dh = config.n_embd, config.n_head, config.d_head
    return {
        "qkv": (B * T * 3 * D, D),  # h [T, D] x W_qkv [D, 3D]
        "scores": (B * H * T * t, dh),  # per head Q [T, dh] x K^T [dh, t]
        "mix": (B * H * T * dh, t),  # per head A [T, t] x V [t, dh]
        "out": (B * T * D, D),  # Z [T, D] x W_o [D, D]
    }


def bias_of(linear: SimpleNamespace):
    """A linear layer's bias, None where it has none."""
    return getattr(linear, "bias", None)


# What a q and k norm normalises over: each head's dh numbers (Qwen3), or the whole projection (OLMo 2); or each head's
# dh numbers with no gains after the rotation, on the layers that turn q and k (Llama 4's L2 norm: an RMSNorm without
# weights, whatever transformers calls it)
PER_HEAD, WHOLE, UNWEIGHTED = "per head", "whole", "unweighted, after the rotation"
QK_NORMS = {
    WHOLE: (
        Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (over all H*dh numbers, gains [H*dh])", "q [T, H*dh]"),
        Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (over all Hkv*dh numbers, gains [Hkv*dh])",
              "k [T, Hkv*dh]"),
    ),
    PER_HEAD: (
        Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])",
              "q [H, T, dh]"),
        Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains [dh])",
              "k [Hkv, T, dh]"),
    ),
    UNWEIGHTED: (
        Stage("q_norm", ("attn.q_normed",), "norm", "q = q / sqrt(mean(q^2) + eps)  (each head over its dh numbers, "
              "no gains, after the rotation: RoPE layers only)", "q [H, T, dh]"),
        Stage("k_norm", ("attn.k_normed",), "norm", "k = k / sqrt(mean(k^2) + eps)  (each head over its dh numbers, "
              "no gains, after the rotation: RoPE layers only)", "k [Hkv, T, dh]"),
    ),
}  # fmt: skip

# Llama 4's attention temperature tuning on its layers without rotary positions: each query scaled up by the log of its
# position's multiple of floor_scale, so that a far query's scores sharpen (arXiv 2501.19399)
TEMPERATURE = Stage(
    "q_temperature",
    ("attn.q_tempered",),
    "scale",
    "q = q (1 + attn_scale log(1 + floor((p + 1) / floor_scale)))  (p the query's position; NoPE layers only)",
    "q [H, T, dh]",
)


def temperatures(config: Any, past: int, T: int, pads, dtype) -> np.ndarray:
    """1 + attn_scale log1p(floor((p + 1) / floor_scale)) for each query's position p ([T, 1], or [B, 1, T, 1] for a
    left-padded batch: each row's positions from its first token, so that a row equals its prompt alone)."""
    positions = np.maximum(slot_positions(past, T, pads), 0)  # a pad slot's (negative) as the first token's
    scales = 1.0 + config.attn_scale * np.log1p(np.floor((positions + 1) / config.floor_scale))
    scales = scales.astype(dtype)[..., None]
    return scales if pads is None else scales[:, None]


# The rotation of q and k (a family whose rotary differs says so in its equation: Phi-3's partial LongRoPE), of the
# first dr numbers of each head where the rope turns fewer than dh (MiniMax-M2's, GLM-4.5's partial rotary), on the
# layers that have rotary positions where some have none (config.rope(layer) None: SmolLM3's NoPE layers), at each
# kind of layer's own rope where they differ (OLMo 3's YaRN on its full layers alone).
TURNED = "q, k = RoPE(q, k): each pair of numbers turned by position x frequency"
ROPE = Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", TURNED, "q [H, T, dh], k [Hkv, T, dh]")
SOME_ROTARY = "  (RoPE layers only: NoPE layers have no positions)"
INTERLEAVED = "q, k = RoPE(q, k): each neighbouring pair (2i, 2i+1) turned in place by position x frequency i"
OWN_ROPES = "  (each kind of layer at its own rope)"


def rope_stage(config: Any, interleaved: bool = False) -> Stage:
    """The rotation's stage: which pairs turn (the halves, or neighbours in place), over how many numbers of a head
    where not all (partial_rotary_factor), on which layers where only some have rotary positions, and that the
    layers' ropes differ where they do; of the layers that attend (a hybrid's others have no positions)."""
    ropes = [config.rope(i) for i in range(config.n_layer) if isinstance(config.layer_cache(i), KeysValues)]
    turned = next((rope.turned for rope in ropes if rope is not None), config.d_head)
    equation = INTERLEAVED if interleaved else TURNED
    if turned < config.d_head:
        equation += f", on the first {turned} of each head's {config.d_head} numbers (the rest pass)"
    if len({rope is None for rope in ropes}) > 1:
        equation += SOME_ROTARY
    if len(set(ropes) - {None}) > 1:
        equation += OWN_ROPES
    return ROPE if equation == TURNED else replace(ROPE, equation=equation)


def key_scale(field: str) -> Stage:
    """k times the config's `field` (Falcon-H1's key_multiplier), before the rotation."""
    equation = f"k = {field} k  (before the rotation: the cache keeps k so)"
    return Stage("k_scale", ("attn.k_scaled",), "scale", equation, "k [T, Hkv*dh]")


@dataclass(frozen=True)
class GroupedQueryAttention(Part):
    """Causal grouped-query attention with rotary positions (the Llama family's): q = h W_q, k = h W_k, v = h W_v (Hkv
    <= H heads of dh for k and v), RoPE on q and k, the attention core, o = Z W_o; biases where the config has them.
    q and k are turned in the layers whose config.rope(layer) is a rope, and not at all where it is None (SmolLM3's
    NoPE layers; every layer of Nemotron-H, whose Mamba layers carry the order): the decoder hands those no tables.

    `qk_norm`: q and k RMS-normed before the rotation, PER_HEAD (Qwen3: each head over its dh numbers, after the split,
    gains [dh]) or WHOLE (OLMo 2: over the whole projection, before the split, gains [H dh] and [Hkv dh]).
    `reads`: the symbol of what it reads, h (a pre-norm's output) or x (the stream itself: OLMo 2 has no pre-norms).
    `one_plus`: the q and k norms' gains are stored less one (1 + w: Gemma 3's). `core`: the attention core over the
    keys (`attend`; Gemma's scales and soft-caps its scores otherwise). `interleaved`: RoPE turns neighbouring pairs
    (2i, 2i+1) in place, not the halves (GLM-4's, ERNIE 4.5's, Cohere2's; rotary.rotate_partial); on the first
    Rope.turned numbers of each head, all of them or a share (GLM-4's half). `names`: where a layer's checkpoint keeps
    W_o and the q and k norms (LFM2's: out_proj, q_layernorm, k_layernorm). `key_scale`: the config's field that k
    is multiplied by before the rotation (Falcon-H1's key_multiplier); `scale`: the config's field that scales the
    scores in place of dh^-1/2 (Granite's attention_multiplier). Llama 4's: `qk_norm` UNWEIGHTED (q and k over each
    head's dh numbers without gains, after the rotation, in the layers that turn them) where the config's flag
    `qk_norm_flag` says (use_qk_norm); `temperature`: q scaled by its position's temperature (`temperatures`) in the
    layers without rotary positions, where the config's attn_temperature_tuning says."""

    qk_norm: str = ""
    reads: str = "h"
    one_plus: bool = False
    core: Attend = attend
    interleaved: bool = False
    names: tuple[str, str, str] = ("o_proj", "q_norm", "k_norm")
    key_scale: str = ""
    scale: str = ""
    qk_norm_flag: str = ""
    temperature: bool = False
    kinds = {
        "attention_q": "attention query weights W_q [H*dh, D]",
        "attention_k": "attention key weights W_k [Hkv*dh, D]",
        "attention_v": "attention value weights W_v [Hkv*dh, D]",
        "attention_out": "attention output weights W_o [D, H*dh]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        """Its projections, the split into heads, the q and k norms where it has them, the rotation."""
        x, b, reads_x = self.reads, (lambda n: plus(config.qkv_bias, n)), self.reads == "x"
        norms = QK_NORMS.get(self.qk_norm_of(config), ())
        return by_op(
            Stage("q", ("attn.q_proj",), "matmul", f"q = {x} W_q{b('q')}", f"{x} [T, D], W_q [D, H*dh]",
                  ATTENTION_PROJECTIONS, reads_stream=reads_x),
            Stage("k", ("attn.k_proj",), "matmul", f"k = {x} W_k{b('k')}  (Hkv heads: narrower than q when Hkv < H)",
                  f"{x} [T, D], W_k [D, Hkv*dh]", ATTENTION_PROJECTIONS, reads_stream=reads_x),
            Stage("v", ("attn.v_proj",), "matmul", f"v = {x} W_v{b('v')}", f"{x} [T, D], W_v [D, Hkv*dh]",
                  ATTENTION_PROJECTIONS, reads_stream=reads_x),
            *((key_scale(self.key_scale),) if self.key_scale else ()),
            *(norms if self.qk_norm != UNWEIGHTED else ()),
            Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "q -> H heads of dh; k, v -> Hkv heads of dh",
                  "q [T, H*dh], k, v [T, Hkv*dh]"),
            rope_stage(config, self.interleaved),
            *(norms if self.qk_norm == UNWEIGHTED else ()),
            *((TEMPERATURE,) if self.temperature else ()),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        H, Hkv, qk_norm = config.n_head, config.n_kv_head, self.qk_norm_of(config)
        q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=bias_of(p.q_proj))
        k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
        v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
        q_norm, k_norm = self.names[1:]
        if self.key_scale:
            k = at.stage("k_scale", k * constant(k, getattr(config, self.key_scale)), "T Hkv*dh")
        if qk_norm == WHOLE:  # over all H dh (Hkv dh) numbers, gains [H dh] ([Hkv dh])
            q = at.stage("q_norm", self.normed(q, getattr(p, q_norm), config), "T H*dh")
            k = at.stage("k_norm", self.normed(k, getattr(p, k_norm), config), "T Hkv*dh")
        split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
        q, k, v = at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")
        if qk_norm == PER_HEAD:  # each head over its dh numbers, gains [dh]
            q = at.stage("q_norm", self.normed(q, getattr(p, q_norm), config), "H T dh")
            k = at.stage("k_norm", self.normed(k, getattr(p, k_norm), config), "Hkv T dh")
        if inputs.rotary:  # the layer's rope's cos and sin; none in a layer without rotary positions
            q, k = at.stage("rope", (self.turned(q, inputs.rotary), self.turned(k, inputs.rotary)), "H T dh; Hkv T dh")
        if qk_norm == UNWEIGHTED and inputs.rotary:  # after the rotation, no gains: the RoPE layers' alone
            q = at.stage("q_norm", rms_norm(q, constant(q, 1.0), config.norm_eps), "H T dh")
            k = at.stage("k_norm", rms_norm(k, constant(k, 1.0), config.norm_eps), "Hkv T dh")
        if self.temperature and config.attn_temperature_tuning and not inputs.rotary:  # NoPE layers' queries
            tempered = q * temperatures(config, at.dims.past, at.dims.T, inputs.pads, q.dtype)
            q = at.stage("q_temperature", tempered, "H T dh")
        return attend_to_cache(q, k, v, p, config, at, inputs, self.core_of(p), self.names[0])

    def turned(self, x, rotary: tuple):
        """x's heads turned by the layer's cos and sin: the first r of each head's numbers (r = the tables' width)."""
        cos, sin = rotary
        return rotate_partial(x, cos, sin, interleaved=self.interleaved)

    def output_projection(self, p: SimpleNamespace):
        """W_o [H*dh, D] as the output product reads it, and its bias (or None): its rows head by head, so that head h's
        share of the branch is z_h W_o[h] (direct logit attribution splits the branch so)."""
        o_proj = getattr(p, self.names[0])
        return o_proj.weight.T, bias_of(o_proj)

    def core_of(self, p: SimpleNamespace) -> Attend:
        """Its attention core over the keys of a layer's weights `p`: its `core` (its scores scaled by the config's
        `scale` where it has one), unless a variant's reads the layer's own tensors (gpt-oss's weighs each head's
        sink)."""
        return scaled_by(self.scale) if self.scale else self.core

    def qk_norm_of(self, config: Any) -> str:
        """Its q and k norms in a config (PER_HEAD, WHOLE, UNWEIGHTED, or none: ""): the part's `qk_norm`, where the
        config's `qk_norm_flag` (if it names one) is true, unless a family's config says (Gemma's: Gemma 3 has them,
        Gemma 2 not)."""
        return self.qk_norm if not self.qk_norm_flag or getattr(config, self.qk_norm_flag) else ""

    def normed(self, x, w: SimpleNamespace, config: Any):
        """A q or k norm: RMSNorm over x's last axis, gains w (1 + w where one_plus)."""
        return RMSNorm(self.one_plus)(x, w, config)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_proj, k_proj, v_proj [H dh or Hkv dh, D] and o_proj [D, H dh], each with its bias where the config has
        them; then the q and k norms' gains where it has them."""
        D, dh, b = config.n_embd, config.d_head, config.qkv_bias
        q, kv = config.n_head * dh, config.n_kv_head * dh
        tensors = {
            **linear("q_proj", q, D, b, "attention_q"),
            **linear("k_proj", kv, D, b, "attention_k"),
            **linear("v_proj", kv, D, b, "attention_v"),
            **linear(self.names[0], D, q, config.o_bias, "attention_out"),
        }
        if (qk_norm := self.qk_norm_of(config)) and qk_norm != UNWEIGHTED:  # UNWEIGHTED: no gains
            widths = (dh, dh) if qk_norm == PER_HEAD else (q, kv)
            tensors |= {f"{name}.weight": Tensor((width,), "norms") for name, width in zip(self.names[1:], widths)}
        return tensors

    def attention_vs_weights(self, c: Any, mlp: Any) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys against its products with weights (this
        attention's and a gated MLP's three, or the MLP's own terms where it states them: a mixture's, `flops_terms`),
        the ratio in symbols, and the sizes it needs."""
        terms = getattr(mlp, "flops_terms", None)
        if terms is not None:
            weights, ratio, sizes = terms(c)
            return (
                f"4 H dh t FLOPs against 4 D (H dh + Hkv dh) + {weights}",
                f"H dh t / (D (H dh + Hkv dh) + {ratio})",
                f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, {sizes}",
            )
        D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
        if c.n_kv_head == c.n_head and c.n_head * c.d_head == c.n_embd:
            return "4 D t FLOPs against 8 D^2 + 6 D F for the weights", "t / (2D + 1.5F)", f"{D}, {F}"
        return (
            "4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 6 D F for the weights",
            "H dh t / (D (H dh + Hkv dh) + 1.5 D F)",
            f"{D}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, {F}",
        )

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Grouped-query attention's products in a layer with its window (None: none)."""
        D, H, dh, Hkv = config.n_embd, config.n_head, config.d_head, config.n_kv_head
        window = config.layer_window(layer)
        ta = t if window is None else min(t, window + T - 1)  # keys attended: the window cuts the oldest
        return {
            "q": (B * T * H * dh, D),  # h [T, D] x W_q [D, H dh]
            "k": (B * T * Hkv * dh, D),  # h [T, D] x W_k [D, Hkv dh]
            "v": (B * T * Hkv * dh, D),  # h [T, D] x W_v [D, Hkv dh]
            "scores": (B * H * T * ta, dh),  # per query head Q [T, dh] x K^T [dh, t]: its group's K, not a copy
            "mix": (B * H * T * dh, ta),  # per query head A [T, t] x V [t, dh]
            "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        }
