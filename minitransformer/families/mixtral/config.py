"""Mixtral's config, read from a Hugging Face config.json (transformers' MixtralConfig), and the presets of the
published Mixtral models, from each model's config.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import UserError
from ..config import check_positive, flag
from ..llama.config import LlamaConfig, _rope_parameters

MIXTRAL_MODEL_TYPES = ("mixtral",)


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
        for key in ("n_experts", "top_k"):
            check_positive(key, getattr(self, key))
        if self.top_k > self.n_experts:
            raise UserError(f"config num_experts_per_tok={self.top_k} exceeds num_local_experts={self.n_experts}")
        if self.qkv_bias or self.o_bias or self.mlp_bias:
            raise UserError("a Mixtral has no biases")

    def to_hf_dict(self) -> dict:
        return super().to_hf_dict() | {"num_local_experts": self.n_experts, "num_experts_per_tok": self.top_k,
                                       "sliding_window": self.sliding_window}  # fmt: skip

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "mixtral") -> MixtralConfig:
        """Read a transformers MixtralConfig dict (as config.json holds it), with MixtralConfig's defaults."""
        model_type = hf.get("model_type")
        if model_type not in MIXTRAL_MODEL_TYPES:
            raise UserError(f"config model_type={model_type!r} is not a Mixtral ({', '.join(MIXTRAL_MODEL_TYPES)})")
        dtype = hf.get("dtype", hf.get("torch_dtype"))
        if dtype not in (None, "float32", "float16", "bfloat16"):
            raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")
        rope = _rope_parameters({"rope_theta": 1e6, **hf})  # MixtralConfig's default theta is 1e6
        for key, harmless in (("pretraining_tp", (None, 1)), ("partial_rotary_factor", (None, 1, 1.0))):
            for value in (hf.get(key), rope.pop(key, None)):
                if value not in harmless:
                    raise UserError(f"config {key}={value!r} is not supported")
        # Options transformers' Mixtral has that change inference and are not computed here: refused by name.
        # (router_jitter_noise acts only in training, output_router_logits and router_aux_loss_coef only add outputs
        # and a loss: the logits are the same.)
        if hf.get("layer_types"):
            raise UserError("config layer_types (Mixtral layers of mixed attention) is not supported")
        for key in ("attention_bias", "mlp_bias"):
            if hf.get(key):
                raise UserError(f"config {key}=true is not supported (transformers' Mixtral has no biases)")
        theta = rope.pop("rope_theta")
        eos = hf.get("eos_token_id", 2)
        return cls(
            n_layer=hf.get("num_hidden_layers", 32), n_head=hf.get("num_attention_heads", 32),
            n_embd=hf.get("hidden_size", 4096), n_inner=hf.get("intermediate_size", 14336),
            vocab_size=hf.get("vocab_size", 32000), n_kv_head=hf.get("num_key_value_heads", 8),
            head_dim=hf.get("head_dim"), n_positions=hf.get("max_position_embeddings", 4096 * 32),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-5), hidden_act=hf.get("hidden_act", "silu"), rope_theta=theta,
            rope_scaling=tuple(sorted(rope.items())) if rope.get("rope_type", "default") != "default" else None,
            sliding_window=hf.get("sliding_window"), tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            n_experts=hf.get("num_local_experts", 8), top_k=hf.get("num_experts_per_tok", 2),
            bos_token_id=hf.get("bos_token_id", 1), eos_token_id=tuple(eos) if isinstance(eos, list) else eos,
            model_type=model_type, name=name,
        )  # fmt: skip

    @property
    def active_experts(self) -> int:
        """The experts one token's pass reads in each layer: k of E."""
        return self.top_k


# The published Mixtral models, from each one's config.json on the Hugging Face hub.
PRESETS: dict[str, MixtralConfig] = {
    # mistralai/Mixtral-8x7B-v0.1 (and -Instruct-v0.1): 32 layers, d 4096, 32 heads, 8 KV heads, 8 experts of 14336,
    # 2 per token, vocabulary 32000, rope_theta 1e6, 32768 positions, no sliding window.
    "mixtral-8x7b": MixtralConfig(
        n_layer=32,
        n_head=32,
        n_kv_head=8,
        n_embd=4096,
        n_inner=14336,
        vocab_size=32000,
        n_positions=32768,
        rms_norm_eps=1e-5,
        rope_theta=1e6,
        n_experts=8,
        top_k=2,
        bos_token_id=1,
        eos_token_id=2,
        name="mixtral-8x7b",
    ),
    # mistralai/Mixtral-8x22B-v0.1: 56 layers, d 6144, 48 heads, 8 KV heads, 8 experts of 16384, 2 per token,
    # vocabulary 32000 (32768 in the later -Instruct-v0.1), rope_theta 1e6, 65536 positions, no sliding window.
    "mixtral-8x22b": MixtralConfig(
        n_layer=56,
        n_head=48,
        n_kv_head=8,
        n_embd=6144,
        n_inner=16384,
        vocab_size=32000,
        n_positions=65536,
        rms_norm_eps=1e-5,
        rope_theta=1e6,
        n_experts=8,
        top_k=2,
        bos_token_id=1,
        eos_token_id=2,
        name="mixtral-8x22b",
    ),
}
