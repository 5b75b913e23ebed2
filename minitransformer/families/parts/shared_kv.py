"""Key-value sharing (Gemma 4's, Gemma 3n's): the last layers of a model compute no keys and values of their own; each
attends with its own queries to the keys and values of an earlier layer of its kind (config.kv_source(layer)), which
that layer computed and cached in the same pass. Such a layer has no W_k, W_v and no cache: its products are q, the
scores, the mix and out; the cache holds each shared pair once (KeysValues.reads).

The attention around it is Gemma 4's: q, k and v RMS-normed per head (v without gains), no scale on the scores (the
norms set it), the values the keys' own projection on the layers where the config says K = V (attention_k_eq_v: the
full layers' one product for both, each then normed its own way); each layer's heads as its kind has them
(config.at_layer: a full layer's wider global heads).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import (
    add_mask,
    constant,
    group_heads,
    merge_heads,
    rms_norm,
    softmax,
    split_into_heads,
    ungroup_heads,
)
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, Stage, by_op
from ...engine.tape import Tape
from .attention import PER_HEAD, GroupedQueryAttention, bias_of, mask_equation
from .indexer import spans
from .part import Products, Tensor, Tensors, linear, plus

SHARED_KV = Stage("shared_kv", ("attn.keys", "attn.values"), "cache",
                  "K, V = layer j's  (a shared layer computes none: it reads those of the last earlier layer of its kind,"
                  " as the ledger's layer j)", "K, V [Hkv, t, dh]")  # fmt: skip
ROTATED = (
    "q, k = RoPE(q, k): sliding layers every pair of the head at their own base; full layers (proportional) "
    "the first partial_rotary_factor of each head's pairs, the rest unturned"
)


def sized(at: Tape, config: Any) -> Tape:
    """The layer's tape sized as its config has it (a full layer's heads, a shared layer's MLP)."""
    d = at.dims
    if (d.dh, d.Hkv, d.F) == (config.d_head, config.n_kv_head, config.d_ff):
        return at
    return replace(at, dims=replace(d, dh=config.d_head, Hkv=config.n_kv_head, F=config.d_ff, _shapes={}))


def batched(pair: tuple, at: Tape) -> tuple:
    """K and V of one sequence seen by each row of a batch (a run from a later block, patching, reads one pass's keys
    and values for all its rows: views, no copies); as they are where they have the pass's batch already."""
    want = (*at.dims.batch, *pair[0].shape[-3:])
    return pair if pair[0].shape == want else tuple(np.broadcast_to(a, (*want[:-2], *a.shape[-2:])) for a in pair)


@dataclass(frozen=True)
class SharedKVAttention(GroupedQueryAttention):
    """Gemma 4's attention (see the module): its own keys and values, or where config.kv_source(layer) names a layer,
    that layer's. `config` is the layer's (config.at_layer)."""

    qk_norm: str = PER_HEAD
    kinds = {**GroupedQueryAttention.kinds, "qk_norms": "RMSNorm gains of each head of q and k, w_q and w_k [dh]"}

    def stages(self, config: Any) -> dict[str, Stage]:
        b = lambda n: plus(config.qkv_bias, n)  # noqa: E731
        core = "(no 1 / sqrt(dh): the q and k norms set the scale)"
        return by_op(
            Stage("q", ("attn.q_proj",), "matmul", f"q = h W_q{b('q')}", "h [T, D], W_q [D, H*dh]", ATTENTION_PROJECTIONS),
            Stage("k", ("attn.k_proj",), "matmul", f"k = h W_k{b('k')}  (layers with keys and values of their own)",
                  "h [T, D], W_k [D, Hkv*dh]", ATTENTION_PROJECTIONS),
            Stage("v", ("attn.v_proj",), "matmul", f"v = h W_v{b('v')}  (none where K = V, nor on a shared layer)",
                  "h [T, D], W_v [D, Hkv*dh]", ATTENTION_PROJECTIONS),
            Stage("v_is_k", ("attn.v_proj",), "reshape",
                  "v = k  (attention_k_eq_v, the full layers: the key projection's output, before its norm and rotation)",
                  "k [T, Hkv*dh]"),
            Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "q -> H heads of dh; k, v -> Hkv heads of dh",
                  "q [T, H*dh], k, v [T, Hkv*dh]"),
            Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])",
                  "q [H, T, dh]"),
            Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains [dh])",
                  "k [Hkv, T, dh]"),
            Stage("v_norm", ("attn.v_normed",), "norm", "v = v / sqrt(mean(v^2) + eps)  (each head, no gains)",
                  "v [Hkv, T, dh]"),
            Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", ROTATED, "q [H, T, dh], k [Hkv, T, dh]"),
            Stage("cache", ("attn.keys", "attn.values"), "cache",
                  "K, V of the t attended positions (new rows written to the cache)", "k, v [Hkv, T, dh]"),
            SHARED_KV,
            Stage("scores", ("attn.qk",), "matmul", f"S = Q K^T  (each query head against the K of its group; {core})",
                  "Q [Hkv, G, T, dh], K^T [Hkv, 1, dh, t]", ATTENTION_SCORES),
            Stage("mask", ("attn.scores",), "mask", mask_equation(config), "S [H, T, t]"),
            Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
            Stage("mix", ("attn.mix",), "matmul", "Z = A V  (each query head with the V of its group)",
                  "A [Hkv, G, T, t], V [Hkv, 1, t, dh]", ATTENTION_SCORES),
            Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, H*dh]", "Z [H, T, dh]"),
            Stage("out", ("attn.out",), "matmul", f"o = Z W_o{plus(config.o_bias, 'o')}", "Z [T, H*dh], W_o [H*dh, D]",
                  ATTENTION_PROJECTIONS),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        layer = at.layer_index or 0
        H, Hkv, source = config.n_head, config.n_kv_head, config.kv_source(layer)
        q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh", bias=bias_of(p.q_proj))
        if source is None:
            k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
            if self.values_are_keys(config, layer):
                v = at.stage("v_is_k", k, "T Hkv*dh")
            else:
                v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
            split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
            q, k, v = at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")
        else:
            q = at.stage("split_heads", split_into_heads(q, H), "H T dh")
        q = at.stage("q_norm", self.normed(q, p.q_norm, config), "H T dh")
        if source is None:
            k = at.stage("k_norm", self.normed(k, p.k_norm, config), "Hkv T dh")
            v = at.stage("v_norm", rms_norm(v, constant(v, 1.0), config.norm_eps), "Hkv T dh")
            q, k = at.stage("rope", (self.turned(q, inputs.rotary), self.turned(k, inputs.rotary)), "H T dh; Hkv T dh")
            K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "Hkv t dh")
            inputs.choices[SHARED_KV.op, layer] = K, V  # for the layers that read them, later in this pass
        else:
            q = at.stage("rope", self.turned(q, inputs.rotary), "H T dh")
            K, V = at.stage("shared_kv", batched(inputs.choices[SHARED_KV.op, source], at), "Hkv t dh")
        z = at.in_row_chunks(lambda q, K, V, bias, at: self.attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
        z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
        return at.matmul("out", z, p.o_proj.weight.T, "T H*dh, H*dh D -> T D", bias=bias_of(p.o_proj))

    @staticmethod
    def attend(q, K, V, bias, config: Any, at: Tape):
        """softmax(q K^T + bias) V, for each query head with its group's keys: no scale."""
        at = at.declaring(SharedKVAttention().declared(config))
        Hkv = config.n_kv_head
        Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
        s = ungroup_heads(at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t"))
        s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
        a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
        return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")

    @staticmethod
    def values_are_keys(config: Any, layer: int) -> bool:
        """Whether the layer's values are its keys' projection (attention_k_eq_v, on the full layers)."""
        return config.k_eq_v and config.layer_window(layer) is None

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_proj, q_norm and o_proj; k_proj, v_proj (none where K = V) and k_norm where the layer computes its own
        keys and values. `config` is the model's: each layer's sizes are its own (config.at_layer)."""
        c = config.at_layer(layer)
        D, dh, b = c.n_embd, c.d_head, c.qkv_bias
        q, kv = c.n_head * dh, c.n_kv_head * dh
        tensors = {**linear("q_proj", q, D, b, "attention_q"), "q_norm.weight": Tensor((dh,), "qk_norms")}
        if c.kv_source(layer) is None:
            tensors |= linear("k_proj", kv, D, b, "attention_k")
            if not self.values_are_keys(c, layer):
                tensors |= linear("v_proj", kv, D, b, "attention_v")
            tensors["k_norm.weight"] = Tensor((dh,), "qk_norms")
        return tensors | linear("o_proj", D, q, c.o_bias, "attention_out")

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        """count's lines on key-value sharing: which layers compute and cache their own keys and values, which read
        whose, and what the cache holds a token (none where every layer has its own)."""
        L = config.n_layer
        readers: dict[int, list[int]] = {}
        for i in range(L):
            if config.kv_source(i) is not None:
                readers.setdefault(config.kv_source(i), []).append(i)
        if not readers:
            return []
        own = [i for i in range(L) if config.kv_source(i) is None]
        per_token = sum(config.layer_cache(i).numbers_per_position for i in own)
        every = sum(config.layer_cache(j).numbers_per_position for j in readers for _ in readers[j]) + per_token
        read = ", ".join(
            f"layer {layers[0]} reads layer {j}'s" if len(layers) == 1 else f"layers {spans(layers)} read layer {j}'s"
            for j, layers in readers.items()
        )
        return [
            "",
            f"Key-value sharing: {len(own)} of {L} layers compute their keys and values (k, v) and cache them; the "
            f"other {L - len(own)} compute none",
            "  and attend with their own queries over those of the last earlier layer of their kind, which shared_kv "
            "records in each",
            *textwrap.wrap(f"(num_kv_shared_layers): {read}", 114, initial_indent="    ", subsequent_indent="    "),
            f"  the cache holds each shared pair once: {per_token:,} numbers a token (at most the window's on a sliding "
            f"layer), not the {every:,} of a cache a layer",
        ]

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Its products in a layer: q, k and v where it computes its own keys and values (v none where K = V), the
        scores and mix over the keys in its window, out."""
        c = config.at_layer(layer)
        D, H, dh, Hkv = c.n_embd, c.n_head, c.d_head, c.n_kv_head
        window = c.layer_window(layer)
        ta = t if window is None else min(t, window + T - 1)
        own = c.kv_source(layer) is None
        return {
            "q": (B * T * H * dh, D),
            **({"k": (B * T * Hkv * dh, D)} if own else {}),
            **({"v": (B * T * Hkv * dh, D)} if own and not self.values_are_keys(c, layer) else {}),
            "scores": (B * H * T * ta, dh),
            "mix": (B * H * T * dh, ta),
            "out": (B * T * D, H * dh),
        }
