"""Qwen3-MoE in the table of families (transformers' Qwen3MoeForCausalLM): Qwen3's attention (q and k RMS-normed per
head) in the Llama family's pre-norm block, whose MLP is, layer by layer (config.layer_types), a mixture of experts
or a dense gated MLP (families/parts/moe.py's MlpByKind):
- a sparse layer's: the softmax router picks k of E experts for each token, its top k divided by their sum only under
  norm_topk_prob (transformers: softmax in float32, top k, renormalised if asked, cast to the model's dtype); each
  expert, a SwiGLU MLP of width F (moe_intermediate_size), computes the rows of its Te tokens;
- a dense layer's (mlp_only_layers, or not a multiple of decoder_sparse_step): the gated MLP of width intermediate_size
  (its tape sizes F so);
- a sliding window, where use_sliding_window sets one, is every layer's (one mask).

Its checkpoint is Qwen's (what transformers 5 writes with save_pretrained: it holds the experts fused in memory and
converts on loading and saving): a sparse layer's mlp.gate [E, D] and mlp.experts.{e}.gate_proj, up_proj [F, D] and
down_proj [D, F]; a dense layer's gate_proj, up_proj and down_proj of intermediate_size."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..mixtral.family import SYMBOLS as MIXTRAL_SYMBOLS
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.mlps import GatedMLP
from ..parts.moe import Mixture, MlpByKind, SoftmaxRouter, SwiGLUExperts
from ..parts.norms import RMSNorm
from . import reference
from .config import DENSE, PRESETS, SPARSE, Qwen3MoeConfig


@dataclass(frozen=True)
class DenseMLP(GatedMLP):
    """The gated MLP of a dense layer, intermediate_size wide (F in its shapes, Fd beside the experts' F)."""

    width: str = "dense_inner"
    kinds = {
        "mlp_gate": "dense layers' MLP gate weights W_gate [F, D] (F = intermediate_size)",
        "mlp_up": "dense layers' MLP up weights W_up [F, D]",
        "mlp_down": "dense layers' MLP down weights W_down [D, F]",
    }

    def flops_terms(self, c: Any) -> tuple[str, str, str]:
        return "6 D Fd for the weights (layer 0: a dense MLP of Fd)", "1.5 D Fd", f"Fd = {c.dense_inner:,}"


@dataclass(frozen=True)
class Norm(RMSNorm):
    kinds = {"norms": "RMSNorm gains (q_norm and k_norm included)"}


EXPERTS = SwiGLUExperts(
    described=(
        "experts' gate weights W_gate [F, D], E a sparse layer",
        "experts' up weights W_up [F, D], E a sparse layer",
        "experts' down weights W_down [D, F], E a sparse layer",
    )
)
MLP = MlpByKind(
    {
        SPARSE: Mixture(SoftmaxRouter(renormalise="norm_topk_prob"), EXPERTS, note="a sparse layer: k experts of E"),
        DENSE: DenseMLP(),
    }
)
SYMBOLS = (
    MIXTRAL_SYMBOLS
    + "; F is an expert's width (moe_intermediate_size), and the dense MLP's (intermediate_size) in its "
    "layers"
)
QWEN3_MOE = Decoder(
    PreNorm(GroupedQueryAttention(qk_norm=PER_HEAD), MLP, Norm()), Norm(), symbols=SYMBOLS, kind_order=(DENSE, SPARSE)
)


class Qwen3MoeFormulas(DecoderFormulas):
    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """Every kind of layer's products, one of each: a sparse layer's router and experts, and where some layers are
        dense, their MLP's; and the logits."""
        kinds = config.layer_types
        ops: dict[str, tuple[int, int]] = {}
        for kind in dict.fromkeys(kinds):
            ops |= self.decoder.products(config, T, t, B, kinds.index(kind), R)
        return ops


# Its variant: a dense first layer, which no preset has.
A3B = PRESETS["qwen3-30b-a3b"]
ARCHITECTURE = composed(
    "qwen3_moe",
    QWEN3_MOE,
    Qwen3MoeFormulas,
    config=Qwen3MoeConfig,
    presets=PRESETS,
    label="Qwen3-MoE",
    reference=reference,
    variants=(replace(A3B, layer_types=(DENSE, *A3B.layer_types[1:])),),
)
