"""GLM-4.5, 4.6 and 4.5-Air (transformers' Glm4MoeForCausalLM): the Llama family's grouped-query attention, with biases
on q, k and v (not o) where attention_bias, each head of q and k RMS-normed where use_qk_norm (Qwen3's), and the first
dr = dh x partial_rotary_factor numbers of each head turned (half, by default); after first_k_dense_replace dense
layers, DeepSeek-V3's mixture: its group-limited sigmoid router, its routed and shared experts, its checkpoint names."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..config import SharedExperts
from ..deepseek_v3.config import FIRST_DENSE, check_router
from ..deepseek_v3.family import MLP, DeepseekFormulas, mtp_config
from ..deepseek_v3.reference import float64_glm45
from ..keys import COUNT, FLAG, LAYER_COUNT, POSITIVE, SCALE, SIZE, TOKENS, TRUTHY, Refusal, eps, key
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mtp import MultiTokenPrediction
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys, partial_rotary

# The files' keys of the routing that Glm4MoeConfig keeps and never reads (its router is DeepSeek-V3's, always)
ROUTING = (
    Refusal("scoring_func", "is not supported (only 'sigmoid')", lambda value, hf: value != "sigmoid"),
    Refusal("topk_method", "is not supported (only 'noaux_tc')", lambda value, hf: value != "noaux_tc"),
)


@dataclass(frozen=True)
class Glm4MoeConfig(SharedExperts, LlamaConfig):
    """A GLM-4.5: grouped-query attention (head_dim its own where given, else D / H), the first dr numbers of each
    head turned; dense layers of width F first, then k of E routed experts of width Fe beside n_shared_experts."""

    n_layer: int = key("num_hidden_layers", 46, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 96, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE)
    n_inner: int = key("intermediate_size", 10944, SIZE)  # the dense layers' MLP width
    vocab_size: int = key("vocab_size", 151552, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    n_positions: int = key("max_position_embeddings", 131072, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    partial_rotary_factor: float = 0.5
    qkv_bias: bool = key("attention_bias", False, FLAG)  # on q, k and v; o_proj never has one
    use_qk_norm: bool = key("use_qk_norm", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS)
    model_type: str = "glm4_moe"
    moe_inner: int = key("moe_intermediate_size", 1408, SIZE)  # each expert's width (the shared: n_shared x it)
    n_experts: int = key("n_routed_experts", 128, SIZE, aliases=("num_local_experts",))
    top_k: int = key("num_experts_per_tok", 8, SIZE)
    n_shared_experts: int = key("n_shared_experts", 1, SIZE)
    n_group: int = key("n_group", 1, POSITIVE)
    topk_group: int = key("topk_group", 1, POSITIVE)
    first_k_dense: int = key("first_k_dense_replace", 1, FIRST_DENSE)
    norm_topk_prob: bool = key("norm_topk_prob", True, TRUTHY)
    routed_scaling_factor: float = key("routed_scaling_factor", 1.0, SCALE)
    # the multi-token-prediction layers after the main model's (layers 46 or 92), drafting where asked (count --mtp)
    n_mtp: int = key("num_mtp_layers", 1, COUNT, aliases=("num_nextn_predict_layers",), dict_key=None)

    what = "a GLM-4.5 (glm4_moe)"
    classes = {"glm4_moe": "Glm4MoeForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES, refused=("pretraining_tp",), top_level=True, share=partial_rotary(0.5)),)
    refusals = (*ROUTING,)

    def validate(self) -> None:
        super().validate()
        check_router(self)

    def rope(self, layer: int = 0) -> Rope:
        """The first dr = int(dh x partial_rotary_factor) numbers of each head turn."""
        return Rope(int(self.d_head * self.partial_rotary_factor), self.rope_theta, self.rope_scaling, self.n_positions)

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {"dr": self.rope().turned, "Fe": self.moe_inner, "Fs": self.d_shared}

    def is_moe(self, layer: int) -> bool:
        return layer >= self.first_k_dense

    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        """ "dense" for the first first_k_dense_replace layers (a gated MLP), "moe" after (experts)."""
        return tuple("moe" if self.is_moe(i) else "dense" for i in range(self.n_layer))


# zai-org's GLM-4.5 family: rope_theta 1e6, half of each 128-wide head turned, biases on q, k and v, vocabulary 151552,
# rms_norm_eps 1e-5, untied, pad 151329 and eos [151329, 151336, 151338], one group (n_group, topk_group 1), one shared
# expert, 8 experts a token renormalised. GLM-4.5-Air (the config.json of its derivatives PrimeIntellect/INTELLECT-3-
# Base and INTELLECT-3 refs/pr/2, zai-org's keys and values): 46 layers, hidden 4096, 96 heads, 8 key/value heads, no
# q/k norms, dense width 10944 in 1 layer, 128 experts of 1408, routed_scaling_factor 1.0, 131072 positions. GLM-4.5
# (Delta-Vector/GLM4.5-Scattermoe's re-packaging, every shape key GLM-4.7's; NVIDIA Megatron-Bridge's GLM 4.5 page):
# 92 layers, hidden 5120, 96 heads, 8 key/value heads, q/k norms, dense width 12288 in 3 layers, 160 experts of 1536,
# routed_scaling_factor 2.5, 131072 positions; GLM-4.6 (RedHatAI/GLM-4.6-NVFP4's config.json; GLM-4.7's,
# zai-org/GLM-4.7 refs/pr/49, is the same) the same with 202752. Their multi-token-prediction layer (layer 46 or 92 of
# the checkpoint: num_nextn_predict_layers 1) drafts beside the main model where asked (count --mtp).
EOS = (151329, 151336, 151338)
GLM = dict(head_dim=128, partial_rotary_factor=0.5, qkv_bias=True, rope_theta=1e6, norm_eps=1e-5, eos_token_id=EOS)
GLM45 = dict(GLM, use_qk_norm=True, first_k_dense=3, moe_inner=1536, n_experts=160, routed_scaling_factor=2.5)
PRESETS = {
    "glm-4.5-air": preset(Glm4MoeConfig, "glm-4.5-air", 46, 96, 8, 4096, 10944, 151552, 131072, **GLM),
    "glm-4.5": preset(Glm4MoeConfig, "glm-4.5", 92, 96, 8, 5120, 12288, 151552, 131072, **GLM45),
    "glm-4.6": preset(Glm4MoeConfig, "glm-4.6", 92, 96, 8, 5120, 12288, 151552, 202752, **GLM45),
}


@dataclass(frozen=True)
class Attention(GroupedQueryAttention):
    """Grouped-query attention, each head of q and k RMS-normed before the rotation where the config's use_qk_norm."""

    qk_norm: str = PER_HEAD

    def qk_norm_of(self, config: Any) -> str:
        return self.qk_norm if config.use_qk_norm else ""


# transformers skips GLM-4.5's and GLM-4.5-Air's multi-token-prediction layers on loading (layers 92 and 46); they
# are read beside the main model, as DeepSeek-V3's (families/parts/mtp.py)
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.(46|92)\..*"
BLOCK = PreNorm(Attention(), MLP)
MORE = (
    ", dr rotated numbers of a head, E routed experts, k a token, Te tokens routed to expert e, Fe expert width, "
    "Fs shared experts' width"
)
MTP = MultiTokenPrediction(BLOCK, mtp_config)
DECODER = Decoder(BLOCK, ignored=IGNORED, kind_order=("dense", "moe"), mtp=MTP, symbols=SYMBOLS + MORE)


# validate's float64 truth (deepseek_v3/reference.py's float64_glm45): transformers computes RMSNorm, the rotary
# tables and the router in float32 even in a float64 model (Glm4MoeTopkRouter keeps its weight and correction bias
# float32); the reference has them in float64, the router in the model's dtype, and runs the eager loop over the
# experts (grouped_mm takes no float64).
NOTE = (
    "  (transformers' float64 GLM-4.5 computes RMSNorm, the rotary tables and the router in float32; its\n"
    "  reference here has them in float64, as families/glm4_moe/family.py explains)"
)
RECORD = dict(float64_reference=float64_glm45, float64_note=NOTE, config=Glm4MoeConfig, presets=PRESETS)
ARCHITECTURE = composed("glm4_moe", DECODER, DeepseekFormulas, label="GLM-4.5", **RECORD)
