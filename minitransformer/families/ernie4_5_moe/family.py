"""ERNIE 4.5's mixture of experts (transformers' Ernie4_5_MoeForCausalLM): ERNIE 4.5's attention (rotary on
neighbouring pairs, use_bias) and, in the layers moe_layer_start_index, moe_layer_end_index and moe_layer_interval
name, k of E SwiGLU experts beside always-on shared experts in place of the MLP:
- the router: p = softmax(h W_router) over the E experts, in float32; the k experts of largest p + b (b the correction
  bias, moe_statics, only to choose: a Parameter transformers counts); their p divided by max(their sum, moe_norm_min);
- the shared experts: one SwiGLU of width moe_num_shared_experts x moe_intermediate_size on every token, biased where
  use_bias (none where moe_num_shared_experts is 0);
- the logits have a bias where use_bias (lm_head.bias, even where the weights are tied).
The other layers have the dense SwiGLU of intermediate_size. As Qwen3-MoE's, F is an expert's width and Fd the dense
MLP's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from ..ernie4_5 import reference
from ..ernie4_5.family import Ernie45Config
from ..keys import COUNT, FLAG, POSITIVE_NUMBER, SIZE, Kind, key
from ..llama.config import preset
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.moe import Mixture, MlpByKind, SharedExpert, SoftmaxRouter
from ..qwen3moe.config import DENSE, SPARSE
from ..qwen3moe.family import EXPERTS, SYMBOLS, DenseMLP, Qwen3MoeFormulas

INDEX = replace(COUNT, shape=True)  # a count or index that says which layers have experts, how many shared
LAST = Kind("a layer index, or -1 (the last layer)", lambda n: type(n) is int and n >= -1, shape=True)


@dataclass(frozen=True)
class Ernie45MoeConfig(Ernie45Config):
    n_kv_head: int = key("num_key_value_heads", 4, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", None, SIZE.or_null())  # not Ernie4_5_MoeConfig's: D / H where absent
    n_inner: int = key("moe_intermediate_size", kind=SIZE)  # each expert's width (F), which a file must give
    dense_inner: int = key("intermediate_size", 12288, SIZE)  # the dense layers' MLP (Fd)
    n_experts: int = key("moe_num_experts", 64, SIZE, aliases=("num_experts",))
    top_k: int = key("moe_k", 6, SIZE, aliases=("num_experts_per_tok",))
    n_shared_experts: int = key("moe_num_shared_experts", 2, INDEX)
    moe_start: int = key("moe_layer_start_index", 1, INDEX)
    moe_end: int = key("moe_layer_end_index", -1, LAST)
    moe_interval: int = key("moe_layer_interval", 1, SIZE)
    norm_min: float = key("moe_norm_min", 1e-12, POSITIVE_NUMBER)  # the least sum the k chosen p are divided by
    lm_head_bias: bool = key("use_bias", False, FLAG)  # the logits' bias: use_bias too
    model_type: str = "ernie4_5_moe"

    what = "an ERNIE 4.5 mixture of experts"
    classes = {"ernie4_5_moe": "Ernie4_5_MoeForCausalLM"}

    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        """Experts in layer i where (i + 1) is a multiple of moe_layer_interval, from moe_layer_start_index through
        moe_layer_end_index (-1: the last layer), as Ernie4_5_MoeDecoderLayer places them; a dense MLP elsewhere."""
        end = self.n_layer - 1 if self.moe_end == -1 else self.moe_end
        experts = [(i + 1) % self.moe_interval == 0 and self.moe_start <= i <= end for i in range(self.n_layer)]
        return tuple(SPARSE if moe else DENSE for moe in experts)

    @property
    def d_shared(self) -> int:
        """The shared experts' width: one SwiGLU of moe_num_shared_experts experts' widths (0: none)."""
        return self.n_shared_experts * self.n_inner

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {"Fs": self.d_shared}


# ERNIE-4.5-21B-A3B-PT's config.json as GitHub transcriptions quote it (llm_memory_calculator's ERNIE_45_21B_A3B, Ascend
# atb_llm's test configs) and as transformers' Ernie4_5_MoeConfig, whose docstring names it, defaults: layer 0 dense,
# 64 experts of 1,536 (6 a token) and 2 shared in every other, tied, rope_theta 500,000, no biases.
A3B = dict(head_dim=128, dense_inner=12288, moe_end=27)
PRESETS = {
    "ernie-4.5-21b-a3b": preset(Ernie45MoeConfig, "ernie-4.5-21b-a3b", 28, 20, 4, 2560, 1536, 103424, 131072, **A3B)
}
ROUTER = SoftmaxRouter(correction="moe_statics.e_score_correction_bias", floor="norm_min")
SHARED = SharedExpert(width="d_shared", bias="mlp_bias")
ROUTED = replace(EXPERTS, combined=("moe.routed_out",))  # Qwen3-MoE's, their sum before the shared experts' is added
MLP = MlpByKind({DENSE: DenseMLP(), SPARSE: Mixture(ROUTER, ROUTED, SHARED, note="a sparse layer: k experts of E")})
SYMBOLS_MOE = SYMBOLS + ", Fs the shared experts' (moe_num_shared_experts F)"
BLOCK = PreNorm(GroupedQueryAttention(interleaved=True), MLP)
DECODER = Decoder(BLOCK, symbols=SYMBOLS_MOE, kind_order=(DENSE, SPARSE), logits_bias="lm_head_bias")
RECORD = dict(config=Ernie45MoeConfig, presets=PRESETS, label="ERNIE 4.5 MoE")
ARCHITECTURE = composed("ernie4_5_moe", DECODER, Qwen3MoeFormulas, reference, **RECORD)
