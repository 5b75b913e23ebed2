"""Mixtral's config, read from a Hugging Face config.json (transformers' MixtralConfig), and the presets of the
published Mixtral models, from each model's config.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import UserError
from .. import rotary
from ..config import check_dtype, check_experts, check_model_type, llama_keys
from ..llama.config import LlamaConfig, preset

MIXTRAL_MODEL_TYPES = ("mixtral",)
# MixtralConfig's defaults for what a config.json leaves out
DEFAULTS = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "intermediate_size": 14336,
            "vocab_size": 32000, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
            "rms_norm_eps": 1e-5, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip


@dataclass(frozen=True)
class MixtralConfig(LlamaConfig):
    """A Mixtral: Mistral's attention (grouped-query, rotary, a sliding window where set) and, in place of the MLP,
    E SwiGLU experts of width F (n_inner) of which a router picks k per token (n_experts, top_k)."""

    n_experts: int = 8  # num_local_experts: E
    top_k: int = 2  # num_experts_per_tok: k
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1e6
    bos_token_id: int | None = 1
    eos_token_id: int | tuple[int, ...] | None = 2
    model_type: str = "mixtral"
    name: str = field(default="mixtral", compare=False)

    family = "mixtral"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_experts(self)
        if self.qkv_bias or self.o_bias or self.mlp_bias:
            raise UserError("a Mixtral has no biases")

    def to_hf_dict(self) -> dict:
        return super().to_hf_dict() | {"num_local_experts": self.n_experts, "num_experts_per_tok": self.top_k,
                                       "sliding_window": self.sliding_window}  # fmt: skip

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "mixtral") -> MixtralConfig:
        """Read a transformers MixtralConfig dict (as config.json holds it), with MixtralConfig's defaults."""
        model_type = check_model_type(hf, MIXTRAL_MODEL_TYPES, f"a Mixtral ({', '.join(MIXTRAL_MODEL_TYPES)})")
        check_dtype(hf)
        rope = rotary.read({"rope_theta": 1e6, **hf})  # MixtralConfig's default theta is 1e6
        rotary.refuse_partial(hf, rope, ("pretraining_tp", "partial_rotary_factor"))
        # Options transformers' Mixtral has that change inference and are not computed here: refused by name.
        # (router_jitter_noise acts only in training, output_router_logits and router_aux_loss_coef only add outputs
        # and a loss: the logits are the same.)
        if hf.get("layer_types"):
            raise UserError("config layer_types (Mixtral layers of mixed attention) is not supported")
        for key in ("attention_bias", "mlp_bias"):
            if hf.get(key):
                raise UserError(f"config {key}=true is not supported (transformers' Mixtral has no biases)")
        return cls(
            **llama_keys(hf, DEFAULTS, rope),
            sliding_window=hf.get("sliding_window"),
            n_experts=hf.get("num_local_experts", 8),
            top_k=hf.get("num_experts_per_tok", 2),
            model_type=model_type,
            name=name,
        )

    @property
    def active_experts(self) -> int:
        """The experts one token's pass reads in each layer: k of E."""
        return self.top_k


# The published Mixtral models, from each one's config.json on the Hugging Face hub: mistralai/Mixtral-8x7B-v0.1 (and
# -Instruct-v0.1), 32 layers, d 4096, 32 heads, 8 KV heads, 8 experts of 14336, 2 per token, vocabulary 32000, rope_theta
# 1e6, 32768 positions, no sliding window; mistralai/Mixtral-8x22B-v0.1, 56 layers, d 6144, 48 heads, 8 KV heads, 8
# experts of 16384, 2 per token, vocabulary 32000 (32768 in the later -Instruct-v0.1), rope_theta 1e6, 65536 positions,
# no sliding window.
PRESETS: dict[str, MixtralConfig] = {
    "mixtral-8x7b": preset(MixtralConfig, "mixtral-8x7b", 32, 32, 8, 4096, 14336, 32000, 32768),
    "mixtral-8x22b": preset(MixtralConfig, "mixtral-8x22b", 56, 48, 8, 6144, 16384, 32000, 65536),
}
