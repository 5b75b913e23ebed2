"""GPT-2, as GPT2LMHeadModel computes it at inference: the pre-norm block (LayerNorm) of its own attention and MLP,
between the embedding with its learned positions and the tied unembedding.

Its own parts, against the Llama family's (families/parts/): q, k and v come from one fused product, c_attn [D, 3D]
(a Conv1D: its weights are stored [in, out], so x W needs no transpose), split [3, H, dh]; every head has its own keys
and values; positions are a learned table added to the embedding, not rotations; the MLP is two products around an
activation (GELU by default); every product has a bias. The scale is 1/sqrt(dh) unless scale_attn_weights is off, and
divided by layer + 1 where scale_attn_by_inverse_layer_idx.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import sqrt
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS, add_mask, merge_heads, slot_positions, softmax, split_heads
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, MLP, Stage, by_op
from ...engine.tape import Tape
from ..parts.attention import MULTI_HEAD_CACHE, fused_multi_head_products, multi_head_vs_weights
from ..parts.blocks import LayerInputs, PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.norms import LayerNorm
from ..parts.part import Part, Products, Tensor, Tensors
from .config import PRESETS, GPT2Config

# GPT-2's attention's stages and its MLP's (every GPT-2 has the same).
ATTENTION = by_op(
    Stage(
        "qkv", ("attn.qkv",), "matmul", "[Q K V] = h W_qkv + b_qkv", "h [T, D], W_qkv [D, 3D]", ATTENTION_PROJECTIONS
    ),
    Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "Q, K, V -> H heads of dh", "[T, 3D]"),
    MULTI_HEAD_CACHE,
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (per head)", "Q [H, T, dh], K^T [H, dh, t]", ATTENTION_SCORES),
    Stage("scale", ("attn.scaled",), "scale", "S = S * scale  (1/sqrt(dh) unless configured otherwise)", "S [H, T, t]"),
    Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
    Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A V  (per head)", "A [H, T, t], V [H, t, dh]", ATTENTION_SCORES),
    Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, D]", "Z [H, T, dh]"),
    Stage("out", ("attn.out",), "matmul", "o = Z W_o + b_o", "Z [T, D], W_o [D, D]", ATTENTION_PROJECTIONS),
)
MLP_STAGES = by_op(
    Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up + b_up", "h [T, D], W_up [D, F]", MLP),
    Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
    Stage("mlp.down", ("mlp.down",), "matmul", "m = g W_down + b_down", "g [T, F], W_down [F, D]", MLP),
)


@dataclass(frozen=True)
class LearnedPositions(Part):
    """x = W_te[ids] + W_pe[positions]. A left-padded row's positions start at its first real token; its pad slots
    sit at negative positions and read row 0 of W_pe: no real query sees them."""

    kinds = {"token_embedding": "token embedding W_te [V, D]", "position_embedding": "position embedding W_pe [P, D]"}

    def stages(self, config: GPT2Config) -> dict[str, Stage]:
        return by_op(Stage("embed", ("embed",), "lookup", "x = W_te[ids] + W_pe[positions]", "ids [T]"))

    def __call__(self, ids, p: SimpleNamespace, config: GPT2Config, tape: Tape, pads=None):
        tape, d = tape.declaring(self.declared(config)), tape.dims
        positions = slice(d.past, d.past + d.T) if pads is None else np.maximum(slot_positions(d.past, d.T, pads), 0)
        return tape.stage("embed", p.wte.weight[ids] + p.wpe.weight[positions], "T D")

    def tensors(self, config: GPT2Config, layer: int = 0) -> Tensors:
        D = config.n_embd
        return {
            "wte.weight": Tensor((config.vocab_size, D), "token_embedding"),
            "wpe.weight": Tensor((config.n_positions, D), "position_embedding"),
        }


@dataclass(frozen=True)
class FusedAttention(Part):
    """Causal multi-head self-attention from the fused c_attn projection; the mask of a padded batch adds the pad keys
    to the future."""

    kinds = {
        "attention_qkv": "attention Q, K, V weights W_qkv [D, 3D]",
        "attention_out": "attention output weights W_o [D, D]",
    }

    def stages(self, config: GPT2Config) -> dict[str, Stage]:
        return ATTENTION

    def __call__(self, h, p: SimpleNamespace, config: GPT2Config, at: Tape, inputs: LayerInputs):
        at = at.declaring(ATTENTION)
        qkv = at.matmul("qkv", h, p.c_attn.weight, "T D, D 3D -> T 3D", bias=p.c_attn.bias)
        q, k, v = at.stage("split_heads", split_heads(qkv, config.n_head), "H T dh")
        K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh")
        # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
        z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
        z = at.stage("merge_heads", merge_heads(z), "T D")
        w_o, b_o = self.output_projection(p)
        return at.matmul("out", z, w_o, "T D, D D -> T D", bias=b_o)

    def output_projection(self, p: SimpleNamespace):
        """W_o [D, D] (a Conv1D's, [in, out] as stored) as the output product reads it, and its bias (or None): its rows head by head, so that head h's
        share of the branch is z_h W_o[h] (direct logit attribution splits the branch so)."""
        return p.c_proj.weight, p.c_proj.bias

    def tensors(self, config: GPT2Config, layer: int = 0) -> Tensors:
        D = config.n_embd
        return {
            "c_attn.weight": Tensor((D, 3 * D), "attention_qkv"),
            "c_attn.bias": Tensor((3 * D,), "biases"),
            "c_proj.weight": Tensor((D, D), "attention_out"),
            "c_proj.bias": Tensor((D,), "biases"),
        }

    def products(self, config: GPT2Config, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return fused_multi_head_products(config, T, t, B)

    def attention_vs_weights(self, c: GPT2Config, mlp: Any) -> tuple[str, str, str]:
        return multi_head_vs_weights(c)


def attend(q, K, V, bias, config: GPT2Config, at: Tape):
    """Each query's mix of the values, weighted by softmax(mask(q K^T x scale)) over the keys: the causal mask, and a
    padded batch's pad keys."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", scale_scores(s, config, at.layer_index or 0, out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", a, V, "H T t, H t dh -> H T dh")


def attention_scale(config: GPT2Config, layer: int) -> float:
    """1/sqrt(dh) (scale_attn_weights), further divided by layer + 1 (scale_attn_by_inverse_layer_idx)."""
    factor = 1.0 / sqrt(config.d_head) if config.scale_attn_weights else 1.0
    return factor / (layer + 1) if config.scale_attn_by_inverse_layer_idx else factor


def scale_scores(s, config: GPT2Config, layer: int, out=None):
    factor = attention_scale(config, layer)
    return s if factor == 1.0 else np.multiply(s, s.dtype.type(factor), out=out)


@dataclass(frozen=True)
class Mlp(Part):
    """u = h W_up + b_up, g = act(u), m = g W_down + b_down (GELU by default: activation_function)."""

    kinds = {"mlp_up": "MLP up weights W_up [D, F]", "mlp_down": "MLP down weights W_down [F, D]"}

    def stages(self, config: GPT2Config) -> dict[str, Stage]:
        return MLP_STAGES

    def __call__(self, h, p: SimpleNamespace, config: GPT2Config, at: Tape):
        at = at.declaring(MLP_STAGES)
        u = at.matmul("mlp.up", h, p.c_fc.weight, "T D, D F -> T F", bias=p.c_fc.bias)
        g = at.stage("mlp.act", ACTIVATIONS[config.activation_function](u), "T F")
        return at.matmul("mlp.down", g, p.c_proj.weight, "T F, F D -> T D", bias=p.c_proj.bias)

    def tensors(self, config: GPT2Config, layer: int = 0) -> Tensors:
        D, F = config.n_embd, config.d_ff
        return {
            "c_fc.weight": Tensor((D, F), "mlp_up"),
            "c_fc.bias": Tensor((F,), "biases"),
            "c_proj.weight": Tensor((F, D), "mlp_down"),
            "c_proj.bias": Tensor((D,), "biases"),
        }

    def products(self, config: GPT2Config, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F = config.n_embd, config.d_ff
        return {
            "mlp.up": (B * T * F, D),
            "mlp.down": (B * T * D, F),
        }  # h [T, D] x W_up [D, F], g [T, F] x W_down [F, D]


NORM = LayerNorm()
SYMBOLS = (
    "T new positions, t attended (past + T), D d_model, H heads, dh = D/H, F MLP width, V vocabulary, R logit rows"
)
GPT2 = Decoder(
    PreNorm(FusedAttention(), Mlp(), NORM, names=("ln_1", "attn", "ln_2", "mlp")),
    NORM,
    LearnedPositions(),
    embedding="wte",
    layers="h",
    final_norm="ln_f",
    prefix="transformer.",
    ignored=r"h\.\d+\.attn\.(bias|masked_bias)",
    biases="biases of the four linear layers",
    symbols=SYMBOLS,
)

ARCHITECTURE = composed("gpt2", GPT2, config=GPT2Config, presets=PRESETS, own_tokenizer=False, heads_in_headers=False)
