"""Gated attention (Qwen3.5's full-attention layers; Qwen3-Next's are the same): grouped-query attention whose q_proj
makes, for each head, its q and a gate as wide (`q_gate_split`); q and k RMS-normed per head with gains 1 + w; only
the first dr = head_dim x partial_rotary_factor numbers of each head rotated (rotary.py's rotate_partial, at
config.rope(layer)); the attention core of parts/attention.py; the heads' output multiplied by sigmoid(gate) before
o_proj (`gate`). Biases on q, k, v and o where the config's attention_bias.

A layer's products with weights, per position: D 2 H dh (q and its gate), 2 D Hkv dh (k, v), H dh D (out); and 2 H
dh a (query, key) pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...engine.ops import merge_heads, sigmoid, split_into_heads, ungroup_heads
from ...engine.stages import ATTENTION_PROJECTIONS, Stage, by_op
from ...engine.tape import Tape
from ..rotary import rotate_partial
from .attention import GroupedQueryAttention, attend, bias_of, cache_stages
from .blocks import LayerInputs
from .norms import RMSNorm
from .part import Part, Products, Tensor, Tensors, linear, plus

QK_NORM = RMSNorm(one_plus=True)  # q and k, each head over its dh numbers


@dataclass(frozen=True)
class GatedAttention(Part):
    """Causal grouped-query attention with a sigmoid gate on its output (see the module's docstring), of a config
    with n_head, n_kv_head, d_head, attention_bias and the rotary tables of its layer."""

    kinds = {**GroupedQueryAttention.kinds, "attention_q": "attention query and gate weights W_q [H*2*dh, D]"}

    def stages(self, config: Any) -> dict[str, Stage]:
        """Its projections (q's with the gate's), the split, the q and k norms, the rotation, the gate; the cache, the
        heads merged and the output projection are the attention's (parts/attention.py's cache_stages)."""
        bias = config.attention_bias
        return by_op(
            Stage("q", ("attn.q_proj",), "matmul", "[q gate] = h W_q  (each head's q and a gate as wide)",
                  "h [T, D], W_q [D, H*2*dh]", ATTENTION_PROJECTIONS),
            Stage("q_gate_split", ("attn.q", "attn.gate"), "reshape", "q -> H heads of dh; the gates [T, H*dh]",
                  "[q gate] [T, H*2*dh]"),
            Stage("k", ("attn.k_proj",), "matmul", f"k = h W_k{plus(bias, 'k')}  (Hkv heads: narrower than q when Hkv < H)",
                  "h [T, D], W_k [D, Hkv*dh]", ATTENTION_PROJECTIONS),
            Stage("v", ("attn.v_proj",), "matmul", f"v = h W_v{plus(bias, 'v')}", "h [T, D], W_v [D, Hkv*dh]",
                  ATTENTION_PROJECTIONS),
            Stage("split_heads", ("attn.k", "attn.v"), "reshape", "k, v -> Hkv heads of dh",
                  "q [T, H*dh], k, v [T, Hkv*dh]"),
            Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains 1 + w)",
                  "q [H, T, dh]"),
            Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains 1 + w)",
                  "k [Hkv, T, dh]"),
            Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate",
                  "q, k = RoPE(the first dr numbers of each head): each pair turned by position x frequency",
                  "q [H, T, dh], k [Hkv, T, dh]"),
            *cache_stages(bias).values(),
            Stage("gate", ("attn.gated",), "multiply", "Z = Z * sigmoid(gate)  (each number by its own gate)",
                  "Z, gate [T, H*dh]"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        H, Hkv, dh = config.n_head, config.n_kv_head, config.d_head
        qg = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*2*dh -> T H*2*dh", bias=bias_of(p.q_proj))
        q, gate = at.stage("q_gate_split", split_query_and_gate(qg, H, dh), "H T dh; T H*dh")
        k = at.matmul("k", h, p.k_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.k_proj))
        v = at.matmul("v", h, p.v_proj.weight.T, "T D, D Hkv*dh -> T Hkv*dh", bias=bias_of(p.v_proj))
        k, v = at.stage("split_heads", (split_into_heads(k, Hkv), split_into_heads(v, Hkv)), "Hkv T dh; Hkv T dh")
        q = at.stage("q_norm", QK_NORM(q, p.q_norm, config), "H T dh")
        k = at.stage("k_norm", QK_NORM(k, p.k_norm, config), "Hkv T dh")
        turned = (rotate_partial(q, *inputs.rotary), rotate_partial(k, *inputs.rotary))
        q, k = at.stage("rope", turned, "H T dh; Hkv T dh")
        K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "Hkv t dh")
        z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
        z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T H*dh")
        z = at.stage("gate", z * sigmoid(gate), "T H*dh")  # each number by its own gate: no dot products
        w_o, b_o = self.output_projection(p)
        return at.matmul("out", z, w_o, "T H*dh, H*dh D -> T D", bias=b_o)

    def output_projection(self, p: SimpleNamespace):
        """W_o [H*dh, D] as the output product reads it, and its bias (or None): its rows head by head, so that head h's
        share of the branch is z_h W_o[h] (direct logit attribution splits the branch so)."""
        return p.o_proj.weight.T, bias_of(p.o_proj)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_proj [H 2 dh, D] (q and the gate), k_proj and v_proj [Hkv dh, D], o_proj [D, H dh], with biases where
        attention_bias; q_norm and k_norm's gains [dh]."""
        D, dh, b = config.n_embd, config.d_head, config.attention_bias
        q, kv = config.n_head * dh, config.n_kv_head * dh
        return {
            **linear("q_proj", 2 * q, D, b, "attention_q"),
            **linear("k_proj", kv, D, b, "attention_k"),
            **linear("v_proj", kv, D, b, "attention_v"),
            **linear("o_proj", D, q, b, "attention_out"),
            "q_norm.weight": Tensor((dh,), "norms"),
            "k_norm.weight": Tensor((dh,), "norms"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, H, dh, Hkv = config.n_embd, config.n_head, config.d_head, config.n_kv_head
        return {
            "q": (B * T * 2 * H * dh, D),  # h [T, D] x W_q [D, H 2 dh]: q and its gate
            "k": (B * T * Hkv * dh, D),
            "v": (B * T * Hkv * dh, D),
            "scores": (B * H * T * t, dh),  # per query head Q [T, dh] x K^T [dh, t]: its group's K, not a copy
            "mix": (B * H * T * dh, t),  # per query head A [T, t] x V [t, dh]
            "out": (B * T * D, H * dh),  # Z [T, H dh] x W_o [H dh, D]
        }


def split_query_and_gate(qg, n_head: int, d_head: int):
    """[..., T, H 2 dh], each head's q then its gate -> q [..., H, T, dh] and the gates [..., T, H dh] (views)."""
    *lead, T, _ = qg.shape
    heads = qg.reshape(*lead, T, n_head, 2 * d_head)
    return heads[..., :d_head].swapaxes(-3, -2), heads[..., d_head:].reshape(*lead, T, n_head * d_head)
