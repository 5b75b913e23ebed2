"""gpt-oss's config, read from a Hugging Face config.json (transformers' GptOssConfig and its defaults), and the
presets of the published gpt-oss models, from each model's config.json.

Against Mixtral's config (families/mixtral/config.py): biases on q, k, v and o (attention_bias, true by default),
a router with a bias, experts with biases and a clamped SwiGLU (swiglu_limit, swiglu_alpha), one learned sink logit
per head, sliding-window layers alternating with full ones (layer_types), and YaRN rotary positions by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import UserError
from .. import rotary
from ..config import (
    SLIDING,
    check_dtype,
    check_experts,
    check_layer_kinds,
    check_model_type,
    check_positive,
    llama_keys,
)
from ..llama.config import LlamaConfig, preset
from ..rotary import YARN_ROPE_TYPES

GPT_OSS_MODEL_TYPES = ("gpt_oss",)
# GptOssConfig's defaults for what a config.json leaves out
DEFAULTS = {"num_hidden_layers": 36, "num_attention_heads": 64, "hidden_size": 2880, "intermediate_size": 2880,
            "vocab_size": 201088, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5, "hidden_act": "silu"}  # fmt: skip
# GptOssConfig's rope when config.json gives none: YaRN, 32 x the 4,096 positions it was trained on.
DEFAULT_ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}  # fmt: skip


def alternating(n_layer: int) -> tuple[str, ...]:
    """GptOssConfig's layer_types when config.json gives none: sliding, full, sliding, full, ..."""
    return tuple(SLIDING if (i + 1) % 2 else "full_attention" for i in range(n_layer))


@dataclass(frozen=True)
class GptOssConfig(LlamaConfig):
    """A gpt-oss decoder: grouped-query attention with biases and a learned sink per head, a sliding window on the
    layers `layer_kinds` names, and in place of the MLP E experts (clamped SwiGLU, width F, with biases) of which a
    router with a bias picks k per token, weighted by a softmax over the k chosen logits."""

    n_experts: int = 128  # num_local_experts: E
    top_k: int = 4  # num_experts_per_tok: k
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    layer_kinds: tuple[str, ...] | None = None  # transformers' layer_types; None: alternating (sliding first)
    head_dim: int | None = 64
    rms_norm_eps: float = 1e-5
    rope_theta: float = 150000.0
    qkv_bias: bool = True
    o_bias: bool = True
    sliding_window: int | None = 128
    n_positions: int = 131072
    model_type: str = "gpt_oss"
    name: str = field(default="gpt_oss", compare=False)

    family = "gpt_oss"
    json_keys = LlamaConfig.json_keys | {"layer_kinds": "layer_types"}
    rope_types = YARN_ROPE_TYPES

    def __post_init__(self) -> None:
        super().__post_init__()
        check_experts(self)
        if self.qkv_bias != self.o_bias or self.mlp_bias:
            raise UserError("a gpt-oss has biases on q, k, v and o alike (attention_bias) and no MLP biases")
        self.require_positive_number("swiglu_alpha", "swiglu_limit")
        kinds = self.layer_types
        check_layer_kinds(kinds, self.n_layer)
        if self.sliding_window is None and SLIDING in kinds:
            raise UserError("config layer_types has sliding_attention layers but sliding_window is null")

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.layer_kinds if self.layer_kinds is not None else alternating(self.n_layer)

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if self.layer_types[layer] == SLIDING else None

    def prefix(self, n_layer: int) -> GptOssConfig:
        return replace(self, n_layer=n_layer, layer_kinds=self.layer_types[:n_layer])

    @property
    def active_experts(self) -> int:
        """The experts one token's pass reads in each layer: k of E."""
        return self.top_k

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("layer_kinds")
        d["layer_types"] = list(self.layer_types)  # transformers' name, which reports read
        return d

    def to_hf_dict(self) -> dict:
        hf = super().to_hf_dict() | {
            "num_local_experts": self.n_experts, "num_experts_per_tok": self.top_k, "swiglu_limit": self.swiglu_limit,
            "layer_types": list(self.layer_types), "sliding_window": self.sliding_window,
            "attention_bias": self.qkv_bias,
        }  # fmt: skip
        if self.swiglu_alpha != 1.702:  # transformers' own, which its config.json does not name
            hf["swiglu_alpha"] = self.swiglu_alpha
        return hf

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "gpt_oss") -> GptOssConfig:
        """Read a transformers GptOssConfig dict (as config.json holds it), with GptOssConfig's defaults."""
        model_type = check_model_type(hf, GPT_OSS_MODEL_TYPES, f"a gpt-oss ({', '.join(GPT_OSS_MODEL_TYPES)})")
        if hf.get("quantization_config"):
            method = (
                hf["quantization_config"].get("quant_method") if isinstance(hf["quantization_config"], dict) else None
            )
            raise UserError(
                f"config quantization_config ({method or 'quantized'} weights, as the published gpt-oss "
                f"checkpoints store their experts in MXFP4) is not supported: dequantize to bfloat16 "
                f"first"
            )
        check_dtype(hf)
        theta = hf.get("rope_theta") if hf.get("rope_theta") is not None else 150000.0  # GptOssConfig.default_theta
        if hf.get("rope_scaling") or hf.get("rope_parameters"):
            rope = rotary.read({**hf, "rope_theta": theta}, YARN_ROPE_TYPES)
        else:
            rope = rotary.read({"rope_parameters": DEFAULT_ROPE, "rope_theta": theta}, YARN_ROPE_TYPES)
        rotary.refuse_partial(hf, rope, ("pretraining_tp", "partial_rotary_factor"))
        # Options GptOssConfig has that change no logits: hidden_act (its experts' SwiGLU is its own),
        # router_aux_loss_coef and output_router_logits (a loss and an output), attention_dropout (training only).
        bias = hf.get("attention_bias", True)
        if not isinstance(bias, bool):
            raise UserError(f"config attention_bias must be true or false, not {bias!r}")
        n_layer = hf.get("num_hidden_layers", 36)
        check_positive("num_hidden_layers", n_layer)
        kinds = hf.get("layer_types")
        if kinds is None:
            kinds = alternating(n_layer)
        if not isinstance(kinds, (list, tuple)):
            raise UserError(f"config layer_types must be a list, not {kinds!r}")
        window = hf.get("sliding_window", 128)
        if window is not None and SLIDING not in kinds:
            window = None  # no layer uses it
        keys = llama_keys(hf, DEFAULTS, rope) | {"hidden_act": "silu"}  # its experts' clamped SwiGLU is its own
        return cls(
            **keys,
            qkv_bias=bias,
            o_bias=bias,
            sliding_window=window,
            layer_kinds=tuple(kinds),
            n_experts=hf.get("num_local_experts", 128),
            top_k=hf.get("num_experts_per_tok", 4),
            swiglu_alpha=hf.get("swiglu_alpha", 1.702),
            swiglu_limit=hf.get("swiglu_limit", 7.0),
            model_type=model_type,
            name=name,
        )


# The published gpt-oss models, from the config.json of openai/gpt-oss-20b and openai/gpt-oss-120b: d 2,880, 64 heads
# of 64, 8 key/value heads, experts of width 2,880, 4 per token, vocabulary 201,088, 131,072 positions (YaRN factor 32
# over 4,096, beta_fast 32, beta_slow 1, not truncated, rope_theta 150,000), a window of 128 on every other layer
# (sliding first), swiglu_limit 7, rms_norm_eps 1e-5, attention biases, untied embeddings, eos 200002; each one's
# layers and experts.
GPT_OSS: dict[str, Any] = {"head_dim": 64, "rms_norm_eps": 1e-5, "rope_theta": 150000.0, "sliding_window": 128,
                           "rope_scaling": tuple(sorted({**DEFAULT_ROPE, "factor": 32.0}.items())), "top_k": 4,
                           "swiglu_limit": 7.0, "eos_token_id": 200002}  # fmt: skip
PRESETS: dict[str, GptOssConfig] = {
    name: preset(GptOssConfig, name, L, 64, 8, 2880, 2880, 201088, 131072, layer_kinds=alternating(L), n_experts=E,
                 **GPT_OSS)
    for name, L, E in (("gpt-oss-20b", 24, 32), ("gpt-oss-120b", 36, 128))
}  # fmt: skip
