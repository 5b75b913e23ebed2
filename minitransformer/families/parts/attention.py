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

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import (
    add_mask,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    rotate,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, product, step
from ...engine.tape import Tape
from .part import Part, Products, Tensor, Tensors, linear, plus

# The mask's equation: the future alone, or the window too (on the sliding_attention layers only, where others have
# none).
MASK = "S[i, j] = -inf where j is in i's future"
WINDOW_MASK = "S[i, j] = -inf where j is in i's future or more than the window behind"
SOME_LAYERS = "  (the window: sliding_attention layers only)"


def mask_equation(config: Any) -> str:
    """The mask's equation for a config: its window, and on which layers, where it has one."""
    if config.sliding_window is None:
        return MASK
    return WINDOW_MASK + (SOME_LAYERS if len(set(config.layer_types)) > 1 else "")


# attend(q, K, V, bias, config, tape) -> z: the scores, their scale and mask, the softmax and the mix of one chunk of
# query rows against the keys it sees (in_row_chunks runs it on each chunk).
Attend = Callable[..., np.ndarray]


def attend(q, K, V, bias, config: Any, at: Tape, mask: str = MASK):
    """Each query's mix of its group's values, weighted by softmax(q K^T x scale + bias) over the keys (any config that
    has n_kv_head and d_head)."""
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = at.matmul(product("scores", "attn.qk", "S = Q K^T  (each query head against the K of its group)",
                          "Q [Hkv, G, T, dh], K^T [Hkv, 1, dh, t]", ATTENTION_SCORES),
                  Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")  # fmt: skip
    s = at.stage(step("scale", "scale", "attn.scaled", "S = S / sqrt(dh)", "S [H, T, t]"),
                 scale_scores(ungroup_heads(s), config, at), "H T t")  # fmt: skip
    s = at.stage(
        step("mask", "mask", "attn.scores", mask, "S [H, T, t]"), add_mask(s, bias, out=at.scratch(s)), "H T t"
    )
    a = at.stage(step("softmax", "softmax", "attn.weights", "A = softmax(S) over j", "S [H, T, t]"),
                 softmax(s, out=at.scratch(s)), "H T t")  # fmt: skip
    return at.matmul(product("mix", "attn.mix", "Z = A V  (each query head with the V of its group)",
                             "A [Hkv, G, T, t], V [Hkv, 1, t, dh]", ATTENTION_SCORES),
                     group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")  # fmt: skip


def attend_to_cache(q, k, v, p: SimpleNamespace, config: Any, at: Tape, inputs, core: Attend | None = None):
    """The turned q and k and v through the cache; each query's mix of its group's values (`core`: by default
    `attend` with the config's mask), in chunks of query rows, each against the keys it can see (a long prompt skips
    most of its future); the heads merged and projected back, o = Z W_o."""
    cached = inputs.cache.append(k, v) if inputs.cache is not None else (k, v)
    K, V = at.stage(step("cache", "cache", "attn.keys attn.values",
                         "K, V of the t attended positions (new rows written to the cache)", "k, v [Hkv, T, dh]"),
                    cached, "Hkv t dh")  # fmt: skip
    mask = mask_equation(config)
    core = core or (lambda q, K, V, bias, config, at: attend(q, K, V, bias, config, at, mask))
    z = at.in_row_chunks(lambda q, K, V, bias, at: core(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage(step("reshape", "merge_heads", "attn.z", "Z -> [T, H*dh]", "Z [H, T, dh]"),
                 merge_heads(ungroup_heads(z)), "T H*dh")  # fmt: skip
    return at.matmul(product("out", "attn.out", f"o = Z W_o{plus(config.o_bias, 'o')}", "Z [T, H*dh], W_o [H*dh, D]",
                             ATTENTION_PROJECTIONS),
                     z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=bias_of(p.o_proj))  # fmt: skip


def scale_scores(s, config: Any, at: Tape):
    """S / sqrt(dh), in place where nobody watches."""
    return np.multiply(s, constant(s, config.d_head**-0.5), out=at.scratch(s))


def bias_of(linear: SimpleNamespace):
    """A linear layer's bias, None where it has none."""
    return getattr(linear, "bias", None)


# What a q and k norm normalises over: each head's dh numbers (Qwen3), or the whole projection (OLMo 2).
PER_HEAD, WHOLE = "per head", "whole"


@dataclass(frozen=True)
class GroupedQueryAttention(Part):
    """Causal grouped-query attention with rotary positions (the Llama family's): q = h W_q, k = h W_k, v = h W_v (Hkv
    <= H heads of dh for k and v), RoPE on q and k, the attention core, o = Z W_o; biases where the config has them.

    `qk_norm`: q and k RMS-normed before the rotation, PER_HEAD (Qwen3: each head over its dh numbers, after the split,
    gains [dh]) or WHOLE (OLMo 2: over the whole projection, before the split, gains [H dh] and [Hkv dh]).
    `reads`: the symbol of what it reads, h (a pre-norm's output) or x (the stream itself: OLMo 2 has no pre-norms)."""

    qk_norm: str = ""
    reads: str = "h"
    eps: str = "rms_norm_eps"
    kinds = {
        "attention_q": "attention query weights W_q [H*dh, D]",
        "attention_k": "attention key weights W_k [Hkv*dh, D]",
        "attention_v": "attention value weights W_v [Hkv*dh, D]",
        "attention_out": "attention output weights W_o [D, H*dh]",
    }

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        H, Hkv, eps, x = config.n_head, config.n_kv_head, getattr(config, self.eps), self.reads
        b = config.qkv_bias
        stream = {"reads_stream": True} if x == "x" else {}
        q = at.matmul(product("q", "attn.q_proj", f"q = {x} W_q{plus(b, 'q')}", f"{x} [T, D], W_q [D, H*dh]",
                              ATTENTION_PROJECTIONS, **stream),
                      h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=bias_of(p.q_proj))  # fmt: skip
        k = at.matmul(product("k", "attn.k_proj", f"k = {x} W_k{plus(b, 'k')}  (Hkv heads: narrower than q when Hkv < H)",
                              f"{x} [T, D], W_k [D, Hkv*dh]", ATTENTION_PROJECTIONS, **stream),
                      h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))  # fmt: skip
        v = at.matmul(product("v", "attn.v_proj", f"v = {x} W_v{plus(b, 'v')}", f"{x} [T, D], W_v [D, Hkv*dh]",
                              ATTENTION_PROJECTIONS, **stream),
                      h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))  # fmt: skip
        if self.qk_norm == WHOLE:
            q = at.stage(step("norm", "q_norm", "attn.q_normed", "q = RMSNorm_q(q)  (over all H*dh numbers, gains [H*dh])",
                              "q [T, H*dh]"), rms_norm(q, p.q_norm.weight, eps), "T H*dh")  # fmt: skip
            k = at.stage(step("norm", "k_norm", "attn.k_normed",
                              "k = RMSNorm_k(k)  (over all Hkv*dh numbers, gains [Hkv*dh])", "k [T, Hkv*dh]"),
                         rms_norm(k, p.k_norm.weight, eps), "T Hkv*dh")  # fmt: skip
        q, k, v = at.stage(step("reshape", "split_heads", "attn.q attn.k attn.v",
                                "q -> H heads of dh; k, v -> Hkv heads of dh", "q [T, H*dh], k, v [T, Hkv*dh]"),
                           (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv)),
                           "H T dh; Hkv T dh; Hkv T dh")  # fmt: skip
        if self.qk_norm == PER_HEAD:
            q = at.stage(step("norm", "q_norm", "attn.q_normed", "q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])",
                              "q [H, T, dh]"), rms_norm(q, p.q_norm.weight, eps), "H T dh")  # fmt: skip
            k = at.stage(step("norm", "k_norm", "attn.k_normed", "k = RMSNorm_k(k)  (each head over its dh numbers, gains [dh])",
                              "k [Hkv, T, dh]"), rms_norm(k, p.k_norm.weight, eps), "Hkv T dh")  # fmt: skip
        q, k = at.stage(step("rotate", "rope", "attn.q_rot attn.k_rot",
                             "q, k = RoPE(q, k): each pair of numbers turned by position x frequency",
                             "q [H, T, dh], k [Hkv, T, dh]"),
                        (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")  # fmt: skip
        return attend_to_cache(q, k, v, p, config, at, inputs)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_proj, k_proj, v_proj [H dh or Hkv dh, D] and o_proj [D, H dh], each with its bias where the config has
        them; then the q and k norms' gains where it has them."""
        D, dh, q, kv, b = (
            config.n_embd,
            config.d_head,
            config.n_head * config.d_head,
            config.n_kv_head * config.d_head,
            config.qkv_bias,
        )
        tensors = {**linear("q_proj", q, D, b, "attention_q"), **linear("k_proj", kv, D, b, "attention_k"),
                   **linear("v_proj", kv, D, b, "attention_v"), **linear("o_proj", D, q, config.o_bias, "attention_out")}  # fmt: skip
        if self.qk_norm:
            widths = (dh, dh) if self.qk_norm == PER_HEAD else (q, kv)
            tensors |= {"q_norm.weight": Tensor((widths[0],), "norms"), "k_norm.weight": Tensor((widths[1],), "norms")}
        return tensors

    def attention_vs_weights(self, c: Any, mlp: Any) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys against its products with weights (this
        attention's and a gated MLP's three), the ratio in symbols, and the sizes it needs."""
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
