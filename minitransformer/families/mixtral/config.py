"""Mixtral's config: each field under its config.json key with transformers' MixtralConfig default, and the presets of
the published Mixtral models, from each model's config.json."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ..keys import LAYER_COUNT, SIZE, TOKENS, WINDOW, Refusal, eps, key
from ..llama.config import LlamaConfig, preset
from ..rotary import YARN_ROPE_TYPES, RopeKeys


@dataclass(frozen=True)
class MixtralConfig(LlamaConfig):
    """A Mixtral: Mistral's attention (grouped-query, rotary, a sliding window where set) and, in place of the MLP,
    E SwiGLU experts of width F (n_inner) of which a router picks k per token (n_experts, top_k)."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE)
    n_inner: int = key("intermediate_size", 14336, SIZE)
    vocab_size: int = key("vocab_size", 32000, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    n_positions: int = key("max_position_embeddings", 4096 * 32, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    rope_theta: float = 1e6
    sliding_window: int | None = key("sliding_window", None, WINDOW)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "mixtral"
    n_experts: int = key("num_local_experts", 8, SIZE)  # E
    top_k: int = key("num_experts_per_tok", 2, SIZE)  # k

    what = "a Mixtral"
    classes = {"mixtral": "MixtralForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES, refused=("pretraining_tp", "partial_rotary_factor"), top_level=True),)
    # Options transformers' Mixtral has that change inference and are not computed here. (router_jitter_noise acts
    # only in training, output_router_logits and router_aux_loss_coef only add outputs and a loss: the logits are the
    # same.)
    refusals = (
        Refusal("layer_types", "(Mixtral layers of mixed attention) is not supported"),
        Refusal("attention_bias", "is not supported (transformers' Mixtral has no biases)"),
        Refusal("mlp_bias", "is not supported (transformers' Mixtral has no biases)"),
    )

    def validate(self) -> None:
        super().validate()
        if self.qkv_bias or self.o_bias or self.mlp_bias:
            raise UserError("a Mixtral has no biases")


# The published Mixtral models, from each one's config.json on the Hugging Face hub: mistralai/Mixtral-8x7B-v0.1 (and
# -Instruct-v0.1), 32 layers, d 4096, 32 heads, 8 KV heads, 8 experts of 14336, 2 per token, vocabulary 32000, rope_theta
# 1e6, 32768 positions, no sliding window; mistralai/Mixtral-8x22B-v0.1, 56 layers, d 6144, 48 heads, 8 KV heads, 8
# experts of 16384, 2 per token, vocabulary 32000 (32768 in the later -Instruct-v0.1), rope_theta 1e6, 65536 positions,
# no sliding window.
PRESETS: dict[str, MixtralConfig] = {
    "mixtral-8x7b": preset(MixtralConfig, "mixtral-8x7b", 32, 32, 8, 4096, 14336, 32000, 32768),
    "mixtral-8x22b": preset(MixtralConfig, "mixtral-8x22b", 56, 48, 8, 6144, 16384, 32000, 65536),
}
