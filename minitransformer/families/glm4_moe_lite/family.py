"""GLM-4.7-Flash (transformers' Glm4MoeLiteForCausalLM): DeepSeek-V3 as it is, its multi-head latent attention, its
router, routed and shared experts and its checkpoint names, with GLM's defaults; which layers have experts is
mlp_layer_types (by default the first dense, the rest sparse), not first_k_dense_replace, which this class has not."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import own_kv_heads
from ..deepseek_v3.config import DeepseekConfig
from ..deepseek_v3.family import ATTENTION, MLP, SYMBOLS, DeepseekFormulas
from ..deepseek_v3.reference import deepseek_like
from ..deepseek_v32.config import mlp_layer_types
from ..glm4_moe.family import ROUTING
from ..keys import LAYER_COUNT, POSITIVE, SCALE, SIZE, TOKENS, Fixed, Refusal, eps, key, unnoted
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed


def other_dense_layers(first_k, hf: dict) -> bool:
    """A file's first_k_dense_replace (transformers reads none here) that says other layers are dense than
    mlp_layer_types, or its default, makes them."""
    layers = unnoted(hf, "num_hidden_layers", 47)
    if type(first_k) is not int or type(layers) is not int:
        return first_k is not None
    kinds = unnoted(hf, "mlp_layer_types") or ["dense"] + ["sparse"] * (layers - 1)
    return list(kinds) != ["dense"] * min(first_k, layers) + ["sparse"] * max(layers - first_k, 0)


def not_dr(dims, hf: dict) -> bool:
    return "qk_rope_head_dim" in hf and dims != hf["qk_rope_head_dim"]


MLP_ONLY = "transformers reads mlp_layer_types only"


@dataclass(frozen=True)
class Glm4MoeLiteConfig(DeepseekConfig):
    """A GLM-4.7-Flash: a DeepSeek-V3 whose dense and sparse layers are mlp_layer_types', under GLM's defaults."""

    n_layer: int = key("num_hidden_layers", 47, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 20, SIZE)
    n_embd: int = key("hidden_size", 2048, SIZE)
    n_inner: int = key("intermediate_size", 10240, SIZE)
    vocab_size: int = key("vocab_size", 154880, SIZE)
    moe_inner: int = key("moe_intermediate_size", 1536, SIZE)
    q_lora_rank: int | None = key("q_lora_rank", 768, SIZE.or_null())
    qk_rope_head_dim: int = key("qk_rope_head_dim", 64, SIZE, aliases=("head_dim",))  # transformers' attribute_map
    qk_nope_head_dim: int = key("qk_nope_head_dim", 192, SIZE)
    v_head_dim: int = key("v_head_dim", 256, SIZE)
    n_experts: int = key("n_routed_experts", 64, SIZE, aliases=("num_local_experts",))
    top_k: int = key("num_experts_per_tok", 4, SIZE)
    n_group: int = key("n_group", 1, POSITIVE)
    topk_group: int = key("topk_group", 1, POSITIVE)
    first_k_dense: int = key("first_k_dense_replace", Fixed(1), dict_key=None)  # read only to refuse a disagreement
    # the multi-token-prediction layers its checkpoints may keep: not built here (no MTP part), nor a key of its
    # transformers config
    n_mtp: int = key("num_mtp_layers", Fixed(0), dict_key=None)
    routed_scaling_factor: float = key("routed_scaling_factor", 1.8, SCALE)
    n_positions: int = key("max_position_embeddings", 202752, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    model_type: str = "glm4_moe_lite"
    layer_types: tuple[str, ...] = mlp_layer_types()  # where the file has none: the first layer dense (first_k 1)

    what = "a GLM-4.7-Flash (glm4_moe_lite)"
    classes = {"glm4_moe_lite": "Glm4MoeLiteForCausalLM"}
    checkpoint_kind = "GLM-4.7-Flash model"
    refusals = (
        *ROUTING,
        Refusal("attention_bias", "is not supported"),
        Refusal("first_k_dense_replace", f"is not what mlp_layer_types says ({MLP_ONLY})", other_dense_layers),
        own_kv_heads(20),
        Refusal("head_dim", "other than qk_rope_head_dim is not supported (transformers reads it as that)", not_dr),
    )

    def is_moe(self, layer: int) -> bool:
        return self.layer_types[layer] == "moe"


# zai-org/GLM-4.7-Flash's config.json (its copies Intel/GLM-4.7-Flash-int4-AutoRound, Geodd/GLM-4.7-Flash-FP8 and
# naaviii/glm-code-next-4b agree; vllm's _glm4_moe_lite_min_config too): 47 layers (the first dense), hidden 2048,
# dense width 10240, 20 heads, q_lora_rank 768, kv_lora_rank 512, qk_nope 192 + qk_rope 64, v 256, 64 experts of 1536
# (4 a token, one group, norm_topk_prob, routed_scaling_factor 1.8), 1 shared expert, vocabulary 154880, 202752
# positions, rope_theta 1e6, rms_norm_eps 1e-5, untied, bos 0, eos [154820, 154827, 154829]: Glm4MoeLiteConfig's
# defaults but rope_theta and eos. Its multi-token-prediction layer (layer 47) is not part of the model here, nor of
# transformers'.
PRESETS = {
    "glm-4.7-flash": Glm4MoeLiteConfig(rope_theta=1e6, eos_token_id=(154820, 154827, 154829), name="glm-4.7-flash"),
}
# transformers skips GLM-4.7-Flash's multi-token-prediction layer on loading
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.47\..*"
DECODER = Decoder(PreNorm(ATTENTION, MLP), biases="", ignored=IGNORED, symbols=SYMBOLS, kind_order=("dense", "moe"))
REFERENCE = deepseek_like("GLM-4.7-Flash")
ARCHITECTURE = composed(
    "glm4_moe_lite",
    DECODER,
    DeepseekFormulas,
    REFERENCE,
    config=Glm4MoeLiteConfig,
    presets=PRESETS,
    label="GLM-4.7-Flash",
)
