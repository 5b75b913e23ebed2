"""gpt-oss's config: each field under its config.json key with transformers' GptOssConfig default, and the presets of
the published gpt-oss models, from each model's config.json.

Against Mixtral's config (families/mixtral/config.py): biases on q, k, v and o (attention_bias, true by default),
a router with a bias, experts with biases and a clamped SwiGLU (swiglu_limit, swiglu_alpha), one learned sink logit
per head, sliding-window layers alternating with full ones (layer_types), and YaRN rotary positions by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import FULL, SLIDING, check_windows
from ..keys import FLAG, LAYER_COUNT, POSITIVE_NUMBER, SIZE, TOKENS, WINDOW, Fixed, eps, key, layer_kinds, quantized
from ..llama.config import LlamaConfig, preset
from ..rotary import YARN_ROPE_TYPES, RopeKeys

# GptOssConfig's rope when config.json gives none: YaRN, 32 x the 4,096 positions it was trained on.
TRAINED = {"original_max_position_embeddings": 4096}
DEFAULT_ROPE = dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0, truncate=False, **TRAINED)


def alternating(n_layer: int) -> tuple[str, ...]:
    """GptOssConfig's layer_types when config.json gives none: sliding, full, sliding, full, ..."""
    return tuple(SLIDING if (i + 1) % 2 else FULL for i in range(n_layer))


@dataclass(frozen=True)
class GptOssConfig(LlamaConfig):
    """A gpt-oss decoder: grouped-query attention with biases and a learned sink per head, a sliding window on the
    layers `layer_types` names, and in place of the MLP E experts (clamped SwiGLU, width F, with biases) of which a
    router with a bias picks k per token, weighted by a softmax over the k chosen logits."""

    n_layer: int = key("num_hidden_layers", 36, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 64, SIZE)
    n_embd: int = key("hidden_size", 2880, SIZE)
    n_inner: int = key("intermediate_size", 2880, SIZE)
    vocab_size: int = key("vocab_size", 201088, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 64, SIZE.or_null())  # null: D / H
    n_positions: int = key("max_position_embeddings", 131072, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    hidden_act: str = key("hidden_act", Fixed("silu"))  # its experts' clamped SwiGLU is its own, whatever this says
    rope_theta: float = 150000.0
    qkv_bias: bool = key("attention_bias", True, FLAG)
    o_bias: bool = key("attention_bias", True, FLAG)
    sliding_window: int | None = key("sliding_window", 128, WINDOW)
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS)
    model_type: str = "gpt_oss"
    n_experts: int = key("num_local_experts", 128, SIZE)  # E
    top_k: int = key("num_experts_per_tok", 4, SIZE)  # k
    swiglu_alpha: float = key("swiglu_alpha", 1.702, POSITIVE_NUMBER)
    swiglu_limit: float = key("swiglu_limit", 7.0, POSITIVE_NUMBER)
    # None: GptOssConfig's, alternating (sliding first)
    layer_types: tuple[str, ...] = key(
        "layer_types",
        None,
        layer_kinds(FULL, SLIDING),
        dict_key=None,
        rule=lambda hf, fields: alternating(fields["n_layer"]),
    )

    what = "a gpt-oss"
    classes = {"gpt_oss": "GptOssForCausalLM"}
    groups = (
        RopeKeys(
            YARN_ROPE_TYPES, refused=("pretraining_tp", "partial_rotary_factor"), top_level=True, default=DEFAULT_ROPE
        ),
    )
    # Options GptOssConfig has that change no logits: router_aux_loss_coef and output_router_logits (a loss and an
    # output), attention_dropout (training only).
    refusals = (
        quantized(
            " weights, as the published gpt-oss checkpoints store their experts in MXFP4",
            "dequantize to bfloat16 first",
        ),
    )
    dict_last = ("d_head", "d_ff", "layer_types")

    def validate(self) -> None:
        check_windows(self)
        super().validate()


# The published gpt-oss models, from the config.json of openai/gpt-oss-20b and openai/gpt-oss-120b: d 2,880, 64 heads
# of 64, 8 key/value heads, experts of width 2,880, 4 per token, vocabulary 201,088, 131,072 positions (YaRN factor 32
# over 4,096, beta_fast 32, beta_slow 1, not truncated, rope_theta 150,000), a window of 128 on every other layer
# (sliding first), swiglu_limit 7, rms_norm_eps 1e-5, attention biases, untied embeddings, eos 200002; each one's
# layers and experts.
YARN_32 = tuple(sorted({**DEFAULT_ROPE, "factor": 32.0}.items()))
GPT_OSS = dict(rope_scaling=YARN_32, eos_token_id=200002)
PRESETS: dict[str, GptOssConfig] = {
    name: preset(GptOssConfig, name, L, 64, 8, 2880, 2880, 201088, 131072, n_experts=E, **GPT_OSS)
    for name, L, E in (("gpt-oss-20b", 24, 32), ("gpt-oss-120b", 36, 128))
}
