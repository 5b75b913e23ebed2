"""The Llama family's config (Llama 2 and 3, Mistral, Qwen2), read from a Hugging Face config.json, and the presets
of well-known Llama-family models, from each model's published config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import UserError
from ..config import SUPPORTED_ACTIVATIONS, ModelConfig, check_positive, flag, id_or_ids, rope_dict

LLAMA_MODEL_TYPES = ("llama", "mistral", "qwen2")
# model_type -> the class that transformers' AutoModelForCausalLM makes of it (config.json's "architectures")
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM",
                 "olmo2": "Olmo2ForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
                 "gpt_oss": "GptOssForCausalLM"}  # fmt: skip
ROPE_TYPES: tuple[str, ...] = ("default", "linear", "llama3")
# YaRN (inverse_frequencies in forward.py computes it, with its attention factor): the families whose forward pass
# multiplies the rotary tables by that factor (rotary_attention_factor) take it; the Llama family's does not.
YARN_ROPE_TYPES: tuple[str, ...] = (*ROPE_TYPES, "yarn")


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
    rope_types = ROPE_TYPES  # the rope types the family's forward pass computes

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
            raise UserError(f"config hidden_size={self.n_embd} over num_attention_heads={self.n_head} is not an even "
                            f"head size; give head_dim")  # fmt: skip
        if self.n_head % self.n_kv_head:
            raise UserError(f"config num_attention_heads={self.n_head} is not a multiple of "
                            f"num_key_value_heads={self.n_kv_head}")  # fmt: skip
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UserError(f"config hidden_act={self.hidden_act!r} is not supported "
                            f"(supported: {', '.join(SUPPORTED_ACTIVATIONS)})")  # fmt: skip
        for key in ("rms_norm_eps", "rope_theta"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UserError(f"config {key} must be a positive number, not {value!r}")
        if self.sliding_window is not None:
            check_positive("sliding_window", self.sliding_window)
        if self.rope_scaling is not None:
            _check_rope_scaling(dict(self.rope_scaling), self.rope_types)

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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rope_scaling"] = None if self.rope_scaling is None else dict(self.rope_scaling)
        d["eos_token_id"] = list(self.eos_token_id) if isinstance(self.eos_token_id, tuple) else self.eos_token_id
        return {"family": self.family, **d, "d_head": self.d_head, "d_ff": self.d_ff}

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config: the keys every Llama-family config.json has, and those
        of its model_type (a family derived from this one adds its own)."""
        hf = {
            "architectures": [ARCHITECTURES.get(self.model_type, "")], "model_type": self.model_type,
            "vocab_size": self.vocab_size, "hidden_size": self.n_embd, "intermediate_size": self.n_inner,
            "num_hidden_layers": self.n_layer, "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_kv_head, "max_position_embeddings": self.n_positions,
            "rms_norm_eps": self.rms_norm_eps, "hidden_act": self.hidden_act,
            "rope_parameters": rope_dict(self.rope_theta, self.rope_scaling),
            "tie_word_embeddings": self.tie_word_embeddings, "bos_token_id": self.bos_token_id,
            "eos_token_id": id_or_ids(self.eos_token_id),
        }  # fmt: skip
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
        model_type = hf.get("model_type")
        if model_type not in LLAMA_MODEL_TYPES:
            raise UserError(
                f"config model_type={model_type!r} is not a Llama-family model ({', '.join(LLAMA_MODEL_TYPES)})"
            )
        missing = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                               "vocab_size") if hf.get(k) is None]  # fmt: skip
        if missing:
            raise UserError(
                f"config.json lacks {', '.join(missing)}: a {model_type} model needs its shapes spelled out"
            )
        dtype = hf.get("dtype", hf.get("torch_dtype"))
        if dtype not in (None, "float32", "float16", "bfloat16"):
            raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")
        rope = _rope_parameters(hf)
        for key, harmless in (("pretraining_tp", (None, 1)), ("partial_rotary_factor", (None, 1, 1.0))):
            for value in (hf.get(key), rope.pop(key, None)):  # transformers 5 keeps partial_rotary_factor in the rope
                if value not in harmless:
                    raise UserError(f"config {key}={value!r} is not supported")
        theta = rope.pop("rope_theta", 10000.0)
        # As transformers reads them: only Mistral has a sliding window (LlamaModel ignores the key); only Llama
        # reads attention_bias and mlp_bias (Mistral has no biases, Qwen2 always has them on q, k and v only).
        window = hf.get("sliding_window") if model_type == "mistral" else None
        qkv_bias = {"llama": bool(hf.get("attention_bias", False)), "mistral": False, "qwen2": True}[model_type]
        if model_type == "qwen2":
            kinds = set(hf.get("layer_types") or ())
            if hf.get("use_sliding_window") or "sliding_attention" in kinds:
                raise UserError("config use_sliding_window=true (Qwen2 sliding attention on some layers) is not "
                                "supported; set it to false or use a model without it")  # fmt: skip
        elif model_type == "mistral" and hf.get("layer_types"):
            raise UserError("config layer_types (Mistral layers of mixed attention) is not supported")
        defaults = _LLAMA_DEFAULTS[model_type]
        eos = hf.get("eos_token_id", defaults.get("eos_token_id"))
        return cls(
            n_layer=hf["num_hidden_layers"], n_head=hf["num_attention_heads"], n_embd=hf["hidden_size"],
            n_inner=hf["intermediate_size"], vocab_size=hf["vocab_size"],
            n_kv_head=hf.get("num_key_value_heads", defaults["num_key_value_heads"]), head_dim=hf.get("head_dim"),
            n_positions=hf.get("max_position_embeddings", defaults["max_position_embeddings"]),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6), hidden_act=hf.get("hidden_act", "silu"),
            rope_theta=theta, rope_scaling=tuple(sorted(rope.items())) if rope.get("rope_type", "default") != "default" else None,
            qkv_bias=qkv_bias, o_bias=qkv_bias and model_type == "llama",
            mlp_bias=model_type == "llama" and bool(hf.get("mlp_bias", False)), sliding_window=window,
            tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            bos_token_id=hf.get("bos_token_id"), eos_token_id=tuple(eos) if isinstance(eos, list) else eos,
            model_type=model_type, name=name,
        )  # fmt: skip


_LLAMA_DEFAULTS: dict[
    str, dict
] = {  # transformers' defaults for what a config.json may leave out (None: one per query head)
    "llama": {"max_position_embeddings": 2048, "num_key_value_heads": None},
    "mistral": {"max_position_embeddings": 4096 * 32, "num_key_value_heads": 8},
    "qwen2": {"max_position_embeddings": 32768, "num_key_value_heads": 32},
}


def _rope_parameters(hf: dict, kinds: tuple[str, ...] = ROPE_TYPES) -> dict:
    """rope_theta and the scaling, from transformers 5's `rope_parameters` or the older rope_theta + rope_scaling.

    As transformers reads them: a non-empty rope_scaling replaces rope_parameters whole, "rope_type" wins
    over the oldest spelling "type", and a theta missing from the dict is the top-level rope_theta or 10,000.
    """
    key = "rope_scaling" if hf.get("rope_scaling") else "rope_parameters"
    rope = hf.get(key) or {}
    if not isinstance(rope, dict):
        raise UserError(f"config {key} must be an object, not {rope!r}")
    if any(isinstance(value, dict) for value in rope.values()):  # {"full_attention": {...}, ...}
        raise UserError(f"config {key} per layer type ({', '.join(rope)}) is not supported")
    rope = dict(rope)
    kind = rope.pop("type", "default")
    rope.setdefault("rope_type", kind)
    if rope.get("rope_theta") is None:
        rope["rope_theta"] = hf["rope_theta"] if hf.get("rope_theta") is not None else 10000.0
    _check_rope_scaling(rope, kinds)
    return rope


def _check_rope_scaling(rope: dict, kinds: tuple[str, ...] = ROPE_TYPES) -> None:
    kind = rope.get("rope_type", "default")
    if kind not in kinds:
        raise UserError(f"config rope type {kind!r} is not supported (supported: {', '.join(kinds)})")
    needs = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                               "original_max_position_embeddings"),
             "yarn": ("factor", "original_max_position_embeddings")}.get(kind, ())  # fmt: skip
    if kind == "yarn":  # the optional numbers: positive where given (transformers' defaults where not)
        needs += tuple(k for k in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim")
                       if rope.get(k) is not None)  # fmt: skip
        if not isinstance(rope.get("truncate", True), bool):
            raise UserError(f"config rope scaling 'yarn' truncate must be true or false, not {rope['truncate']!r}")
    for key in needs:
        value = rope.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise UserError(f"config rope scaling {kind!r} needs a positive {key}, not {value!r}")
    if kind == "llama3" and rope["high_freq_factor"] == rope["low_freq_factor"]:
        raise UserError("config rope scaling 'llama3' needs high_freq_factor != low_freq_factor")


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
