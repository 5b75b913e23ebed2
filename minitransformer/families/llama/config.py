"""The Llama family's config (Llama 2 and 3, Mistral, Qwen2), read from a Hugging Face config.json, and the presets
of well-known Llama-family models, from each model's published config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ...errors import UserError
from .. import rotary
from ..config import (
    ModelConfig,
    check_activation,
    check_dtype,
    check_model_type,
    check_positive,
    listed,
    llama_keys,
    rope_dict,
)
from ..rotary import ROPE_TYPES, Rope

LLAMA_MODEL_TYPES = ("llama", "mistral", "qwen2")
C = TypeVar("C", bound=ModelConfig)
# model_type -> the class that transformers' AutoModelForCausalLM makes of it (config.json's "architectures")
CAUSAL_LM_CLASSES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
}


@dataclass(frozen=True)
class LlamaConfig(ModelConfig):
    """A Llama-family decoder: Llama 2 and 3, Mistral, Qwen2 (model_type says which; the block is the same).

    Against GPT-2: RMSNorm instead of LayerNorm, rotary position embeddings instead of a learned
    table, q, k and v as three products with n_kv_head <= n_head key/value heads (grouped-query
    attention), a gated MLP (act(h W_gate) * h W_up), no biases unless the config asks for them.
    """

    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int  # intermediate_size: the MLP width
    vocab_size: int
    n_kv_head: int = None  # type: ignore[assignment]  # None: as many as query heads (__post_init__ says so)
    head_dim: int | None = None  # None: n_embd / n_head
    n_positions: int = 2048
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None  # sorted (key, value) pairs: hashable
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = None  # Mistral: each query sees only the last `sliding_window` positions
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    model_type: str = "llama"
    name: str = field(default="llama", compare=False)

    family = "llama"
    rope_types = ROPE_TYPES  # the rope types the family's forward pass computes (rotary.py)

    def __post_init__(self) -> None:
        if self.n_kv_head is None:
            object.__setattr__(self, "n_kv_head", self.n_head)
        self.require_positive("n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "n_kv_head", "n_positions")
        if self.head_dim is not None:
            check_positive("head_dim", self.head_dim)
            if self.head_dim % 2:
                raise UserError(f"config head_dim={self.head_dim} is odd; rotary embeddings rotate pairs of numbers")
        elif self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise UserError(
                f"config hidden_size={self.n_embd} over num_attention_heads={self.n_head} is not an even head size; "
                f"give head_dim"
            )
        if self.n_head % self.n_kv_head:
            raise UserError(
                f"config num_attention_heads={self.n_head} is not a multiple of num_key_value_heads={self.n_kv_head}"
            )
        check_activation(self.key("hidden_act"), self.hidden_act)
        self.require_positive_number("rms_norm_eps", "rope_theta")
        if self.sliding_window is not None:
            check_positive("sliding_window", self.sliding_window)
        if self.rope_scaling is not None:
            rotary.check(dict(self.rope_scaling), self.rope_types)

    @property
    def checkpoint_kind(self) -> str:
        """What a checkpoint of this config is called in messages: "mistral model"."""
        return f"{self.model_type} model"

    @property
    def d_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.n_embd // self.n_head

    @property
    def d_ff(self) -> int:
        return self.n_inner

    def rope(self, layer: int = 0) -> Rope:
        """Every layer turns every number of its heads, at the config's rope (rotary.py)."""
        return Rope(self.d_head, self.rope_theta, self.rope_scaling, self.n_positions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rope_scaling"] = None if self.rope_scaling is None else dict(self.rope_scaling)
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, **d, "d_head": self.d_head, "d_ff": self.d_ff}

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config: the keys every Llama-family config.json has, and those
        of its model_type (a family derived from this one adds its own)."""
        hf = {
            "architectures": [CAUSAL_LM_CLASSES.get(self.model_type, "")],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.n_embd,
            "intermediate_size": self.n_inner,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_kv_head,
            "max_position_embeddings": self.n_positions,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": self.hidden_act,
            "rope_parameters": rope_dict(self.rope_theta, self.rope_scaling),
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }
        if self.head_dim is not None:
            hf["head_dim"] = self.head_dim
        if self.model_type == "llama":
            hf |= {"attention_bias": self.qkv_bias, "mlp_bias": self.mlp_bias}
        elif self.model_type == "mistral":
            hf["sliding_window"] = self.sliding_window
        elif self.model_type == "qwen2":
            hf["use_sliding_window"] = False
        return hf

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "llama") -> LlamaConfig:
        """Read a transformers LlamaConfig, MistralConfig or Qwen2Config dict (as config.json holds it)."""
        model_type = check_model_type(hf, LLAMA_MODEL_TYPES, f"a Llama-family model ({', '.join(LLAMA_MODEL_TYPES)})")
        shapes = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        missing = [k for k in shapes if hf.get(k) is None]
        if missing:
            raise UserError(
                f"config.json lacks {', '.join(missing)}: a {model_type} model needs its shapes spelled out"
            )
        check_dtype(hf)
        rope = rotary.read(hf)
        rotary.refuse_partial(hf, rope, ("pretraining_tp", "partial_rotary_factor"))
        # As transformers reads them: only Mistral has a sliding window (LlamaModel ignores the key); only Llama
        # reads attention_bias and mlp_bias (Mistral has no biases, Qwen2 always has them on q, k and v only).
        window = hf.get("sliding_window", 4096) if model_type == "mistral" else None  # MistralConfig's default
        qkv_bias = {"llama": bool(hf.get("attention_bias", False)), "mistral": False, "qwen2": True}[model_type]
        if model_type == "qwen2":
            kinds = set(hf.get("layer_types") or ())
            if hf.get("use_sliding_window") or "sliding_attention" in kinds:
                raise UserError(
                    "config use_sliding_window=true (Qwen2 sliding attention on some layers) is not supported; set "
                    "it to false or use a model without it"
                )
        elif model_type == "mistral" and hf.get("layer_types"):
            raise UserError("config layer_types (Mistral layers of mixed attention) is not supported")
        return cls(
            **llama_keys(hf, _LLAMA_DEFAULTS[model_type], rope),
            qkv_bias=qkv_bias,
            o_bias=qkv_bias and model_type == "llama",
            mlp_bias=model_type == "llama" and bool(hf.get("mlp_bias", False)),
            sliding_window=window,
            model_type=model_type,
            name=name,
        )


# transformers' defaults for what a config.json may leave out (num_key_value_heads None: one per query head)
_LLAMA_DEFAULTS: dict[str, dict] = {
    "llama": {"max_position_embeddings": 2048, "num_key_value_heads": None, "rms_norm_eps": 1e-6, "hidden_act": "silu"},
    "mistral": {
        "max_position_embeddings": 4096 * 32,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
    },
    "qwen2": {"max_position_embeddings": 32768, "num_key_value_heads": 32, "rms_norm_eps": 1e-6, "hidden_act": "silu"},
}


def _llama3(factor: float, original: int) -> tuple[tuple[str, object], ...]:
    """Llama 3.1's rope scaling (rope_type llama3): long wavelengths slowed by `factor` beyond the low frequency factor
    1, short ones kept beyond 4, as the published configs state them."""
    scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    return tuple(sorted((scaling | {"original_max_position_embeddings": original}).items()))


def preset(config: type[C], name: str, L: int, H: int, Hkv: int, D: int, F: int, V: int, P: int, **more: Any) -> C:
    """A preset of a Llama-like config (Phi-3's too): its layers, heads, key/value heads, width, MLP width, vocabulary,
    context, and what else its config.json sets."""
    shapes = dict(n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=D, n_inner=F, vocab_size=V, n_positions=P)
    return config(**shapes, **more, name=name)  # type: ignore[call-arg]


# The Llama family, from each model's published config.json.
# Each one's layers, heads, key/value heads, width, MLP width, vocabulary and context, and what else it sets.
LLAMA2: dict[str, Any] = {"rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2}
LLAMA3: dict[str, Any] = {"rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 128000, "eos_token_id": 128001}
QWEN2: dict[str, Any] = {
    "rope_theta": 1000000.0,
    "qkv_bias": True,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "model_type": "qwen2",
}
PRESETS: dict[str, LlamaConfig] = {name: preset(LlamaConfig, name, *shapes, **more) for name, shapes, more in (
    ("llama2-7b", (32, 32, 32, 4096, 11008, 32000, 4096), LLAMA2),
    ("llama2-13b", (40, 40, 40, 5120, 13824, 32000, 4096), LLAMA2),
    ("llama2-70b", (80, 64, 8, 8192, 28672, 32000, 4096), LLAMA2),
    ("llama3-8b", (32, 32, 8, 4096, 14336, 128256, 8192), LLAMA3),
    ("llama3.1-70b", (80, 64, 8, 8192, 28672, 128256, 131072), LLAMA3 | {"rope_scaling": _llama3(8.0, 8192)}),
    ("llama3.2-1b", (16, 32, 8, 2048, 8192, 128256, 131072),
     LLAMA3 | {"head_dim": 64, "rope_scaling": _llama3(32.0, 8192), "tie_word_embeddings": True}),
    ("mistral-7b", (32, 32, 8, 4096, 14336, 32000, 32768), LLAMA2 | {"sliding_window": 4096, "model_type": "mistral"}),
    ("qwen2.5-0.5b", (24, 14, 2, 896, 4864, 151936, 32768), QWEN2 | {"tie_word_embeddings": True}),
    ("qwen2.5-7b", (28, 28, 4, 3584, 18944, 152064, 131072), QWEN2),
)}  # fmt: skip
