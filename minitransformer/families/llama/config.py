"""The Llama family's config (Llama 2 and 3, Mistral, Qwen2), read from a Hugging Face config.json, and the presets
of well-known Llama-family models, from each model's published config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import UserError
from .. import rotary
from ..config import (
    ModelConfig,
    check_activation,
    check_dtype,
    check_model_type,
    check_positive,
    check_positive_number,
    listed,
    llama_keys,
)
from ..rotary import ROPE_TYPES, Rope

LLAMA_MODEL_TYPES = ("llama", "mistral", "qwen2")


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
        for key in ("n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "n_kv_head", "n_positions"):
            check_positive(key, getattr(self, key))
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
        check_activation("hidden_act", self.hidden_act)
        for key in ("rms_norm_eps", "rope_theta"):
            check_positive_number(key, getattr(self, key))
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

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "llama") -> LlamaConfig:
        """Read a transformers LlamaConfig, MistralConfig or Qwen2Config dict (as config.json holds it)."""
        model_type = check_model_type(hf, LLAMA_MODEL_TYPES,
                                      f"a Llama-family model ({', '.join(LLAMA_MODEL_TYPES)})")  # fmt: skip
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
        window = hf.get("sliding_window") if model_type == "mistral" else None
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
            **llama_keys(hf, _LLAMA_DEFAULTS[model_type]),
            rope_theta=rope.pop("rope_theta"),
            rope_scaling=rotary.scaling(rope),
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
    "mistral": {"max_position_embeddings": 4096 * 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
                "hidden_act": "silu"},
    "qwen2": {"max_position_embeddings": 32768, "num_key_value_heads": 32, "rms_norm_eps": 1e-6, "hidden_act": "silu"},
}  # fmt: skip


def _llama3(factor: float, original: int) -> tuple[tuple[str, object], ...]:
    return tuple(sorted({"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": original}.items()))  # fmt: skip


# Shapes of well-known models, for counting without weights (and for the download list).

# The Llama family, from each model's published config.json.
PRESETS: dict[str, LlamaConfig] = {
    "llama2-7b": LlamaConfig(
        n_layer=32,
        n_head=32,
        n_embd=4096,
        n_inner=11008,
        vocab_size=32000,
        n_positions=4096,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        name="llama2-7b",
    ),
    "llama2-13b": LlamaConfig(
        n_layer=40,
        n_head=40,
        n_embd=5120,
        n_inner=13824,
        vocab_size=32000,
        n_positions=4096,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        name="llama2-13b",
    ),
    "llama2-70b": LlamaConfig(
        n_layer=80,
        n_head=64,
        n_kv_head=8,
        n_embd=8192,
        n_inner=28672,
        vocab_size=32000,
        n_positions=4096,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        name="llama2-70b",
    ),
    "llama3-8b": LlamaConfig(
        n_layer=32,
        n_head=32,
        n_kv_head=8,
        n_embd=4096,
        n_inner=14336,
        vocab_size=128256,
        n_positions=8192,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        bos_token_id=128000,
        eos_token_id=128001,
        name="llama3-8b",
    ),
    "llama3.1-70b": LlamaConfig(
        n_layer=80,
        n_head=64,
        n_kv_head=8,
        n_embd=8192,
        n_inner=28672,
        vocab_size=128256,
        n_positions=131072,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=_llama3(8.0, 8192),
        bos_token_id=128000,
        eos_token_id=128001,
        name="llama3.1-70b",
    ),
    "llama3.2-1b": LlamaConfig(
        n_layer=16,
        n_head=32,
        n_kv_head=8,
        head_dim=64,
        n_embd=2048,
        n_inner=8192,
        vocab_size=128256,
        n_positions=131072,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=_llama3(32.0, 8192),
        tie_word_embeddings=True,
        bos_token_id=128000,
        eos_token_id=128001,
        name="llama3.2-1b",
    ),
    "mistral-7b": LlamaConfig(
        n_layer=32,
        n_head=32,
        n_kv_head=8,
        n_embd=4096,
        n_inner=14336,
        vocab_size=32000,
        n_positions=32768,
        rms_norm_eps=1e-5,
        sliding_window=4096,
        bos_token_id=1,
        eos_token_id=2,
        model_type="mistral",
        name="mistral-7b",
    ),
    "qwen2.5-0.5b": LlamaConfig(
        n_layer=24,
        n_head=14,
        n_kv_head=2,
        n_embd=896,
        n_inner=4864,
        vocab_size=151936,
        n_positions=32768,
        rope_theta=1000000.0,
        qkv_bias=True,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151643,
        model_type="qwen2",
        name="qwen2.5-0.5b",
    ),
    "qwen2.5-7b": LlamaConfig(
        n_layer=28,
        n_head=28,
        n_kv_head=4,
        n_embd=3584,
        n_inner=18944,
        vocab_size=152064,
        n_positions=131072,
        rope_theta=1000000.0,
        qkv_bias=True,
        bos_token_id=151643,
        eos_token_id=151643,
        model_type="qwen2",
        name="qwen2.5-7b",
    ),
}
