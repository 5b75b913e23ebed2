"""The Llama family's config (Llama 2 and 3, Mistral, Qwen2): each field under its config.json key, with transformers'
defaults (LlamaConfig's, MistralConfig's and Qwen2Config's where they differ), and the presets of well-known
Llama-family models, from each model's published config.json."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ...errors import UserError
from ..config import ModelConfig, check_multiple
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, SIZE, TOKENS, WINDOW, Fixed, Group, Refusal, eps, key
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys, rope_scaling

C = TypeVar("C", bound=ModelConfig)
LLAMA, MISTRAL, QWEN2 = "llama", "mistral", "qwen2"
QWEN2_WINDOWS = "(Qwen2 sliding attention on some layers) is not supported; set it to false or use a model without it"
QWEN2_LAYERS = "with sliding_attention layers (Qwen2's, which use_sliding_window=true would make) is not supported"


def sliding_layers(kinds, hf: dict) -> bool:
    return isinstance(kinds, list) and "sliding_attention" in kinds


@dataclass(frozen=True)
class LlamaConfig(ModelConfig):
    """A Llama-family decoder: Llama 2 and 3, Mistral, Qwen2 (model_type says which; the block is the same).

    Against GPT-2: RMSNorm instead of LayerNorm, rotary position embeddings instead of a learned
    table, q, k and v as three products with n_kv_head <= n_head key/value heads (grouped-query
    attention), a gated MLP (act(h W_gate) * h W_up), no biases unless the config asks for them.
    """

    # the shapes, which a file must give (defaulting them would only end in a complaint about some tensor)
    n_layer: int = key("num_hidden_layers", kind=LAYER_COUNT)
    n_head: int = key("num_attention_heads", kind=SIZE)
    n_embd: int = key("hidden_size", kind=SIZE)
    n_inner: int = key("intermediate_size", kind=SIZE)  # the MLP width
    vocab_size: int = key("vocab_size", kind=SIZE)
    n_kv_head: int = key("num_key_value_heads", None, SIZE.or_null(), follows="n_head", by_type={MISTRAL: 8, QWEN2: 32})
    head_dim: int | None = key("head_dim", None, SIZE.or_null())  # None: n_embd / n_head
    n_positions: int = key("max_position_embeddings", 2048, SIZE, by_type={MISTRAL: 4096 * 32, QWEN2: 32768})
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None  # sorted (key, value) pairs: hashable
    # Only Llama reads attention_bias and mlp_bias: Mistral has no biases, Qwen2 always has them on q, k and v only
    # (a family derived from this one declares the keys it reads)
    qkv_bias: bool = key("attention_bias", Fixed(False), FLAG, by_type={LLAMA: False, QWEN2: Fixed(True)})
    o_bias: bool = key("attention_bias", Fixed(False), FLAG, by_type={LLAMA: False})
    mlp_bias: bool = key("mlp_bias", Fixed(False), FLAG, by_type={LLAMA: False})
    # Mistral: each query sees only the last `sliding_window` positions (LlamaModel ignores the key)
    sliding_window: int | None = key("sliding_window", Fixed(None), WINDOW, by_type={MISTRAL: 4096})
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    # LlamaConfig's and MistralConfig's ids, Qwen2Config's none (a config made in Python has none unless given)
    bos_token_id: int | None = key("bos_token_id", None, TOKENS, by_type={LLAMA: 1, MISTRAL: 1})
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS, by_type={LLAMA: 2, MISTRAL: 2})
    model_type: str = LLAMA

    what = "a Llama-family model"
    classes = {LLAMA: "LlamaForCausalLM", MISTRAL: "MistralForCausalLM", QWEN2: "Qwen2ForCausalLM"}
    groups: ClassVar[tuple[Group, ...]] = (
        RopeKeys(YARN_ROPE_TYPES, refused=("pretraining_tp", "partial_rotary_factor"), top_level=True),
    )
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("use_sliding_window", QWEN2_WINDOWS, types=(QWEN2,)),
        Refusal("layer_types", QWEN2_LAYERS, sliding_layers, types=(QWEN2,)),
        Refusal("layer_types", "(Mistral layers of mixed attention) is not supported", types=(MISTRAL,)),
    )

    def validate(self) -> None:
        if self.head_dim is not None and self.head_dim % 2:
            raise UserError(f"config head_dim={self.head_dim} is odd; rotary embeddings rotate pairs of numbers")
        if self.head_dim is None and (self.n_embd % self.n_head or self.d_head % 2):
            raise UserError(
                f"config hidden_size={self.n_embd} over num_attention_heads={self.n_head} is not an even "
                "head size; give head_dim"
            )
        check_multiple(self, "n_head", "n_kv_head")

    def rope(self, layer: int = 0) -> Rope | None:
        """Every layer turns every number of its heads, at the config's rope (rotary.py)."""
        return Rope(self.d_head, self.rope_theta, self.rope_scaling, self.n_positions)


def llama3_scaling(factor: float, original: int) -> tuple[tuple[str, object], ...]:
    """Llama 3.1's rope scaling (rope_type llama3): long wavelengths slowed by `factor` beyond the low frequency factor
    1, short ones kept beyond 4, as the published configs state them."""
    return rope_scaling(original, rope_type="llama3", factor=factor, low_freq_factor=1.0, high_freq_factor=4.0)


def preset(config: type[C], name: str, L: int, H: int, Hkv: int, D: int, F: int, V: int, P: int, **more: Any) -> C:
    """A preset of a Llama-like config (Phi-3's too): its layers, heads, key/value heads, width, MLP width, vocabulary,
    context, and what else its config.json sets."""
    shapes = dict(n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=D, n_inner=F, vocab_size=V, n_positions=P)
    return config(**shapes, **more, name=name)


# The Llama family, from each model's published config.json.
# Each one's layers, heads, key/value heads, width, MLP width, vocabulary and context, and what else it sets.
LLAMA2: dict[str, Any] = {"norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2}
LLAMA3: dict[str, Any] = {"norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 128000, "eos_token_id": 128001}
QWEN2_: dict[str, Any] = dict(rope_theta=1e6, qkv_bias=True, bos_token_id=151643, eos_token_id=151643, model_type=QWEN2)
LLAMA31 = LLAMA3 | {"rope_scaling": llama3_scaling(8.0, 8192)}
LLAMA32 = LLAMA3 | {"head_dim": 64, "rope_scaling": llama3_scaling(32.0, 8192), "tie_word_embeddings": True}
MISTRAL_ = LLAMA2 | {"sliding_window": 4096, "model_type": MISTRAL}
PRESETS: dict[str, LlamaConfig] = {
    name: preset(LlamaConfig, name, *shapes, **more)
    for name, shapes, more in (
        ("llama2-7b", (32, 32, 32, 4096, 11008, 32000, 4096), LLAMA2),
        ("llama2-13b", (40, 40, 40, 5120, 13824, 32000, 4096), LLAMA2),
        ("llama2-70b", (80, 64, 8, 8192, 28672, 32000, 4096), LLAMA2),
        ("llama3-8b", (32, 32, 8, 4096, 14336, 128256, 8192), LLAMA3),
        ("llama3.1-70b", (80, 64, 8, 8192, 28672, 128256, 131072), LLAMA31),
        ("llama3.2-1b", (16, 32, 8, 2048, 8192, 128256, 131072), LLAMA32),
        ("mistral-7b", (32, 32, 8, 4096, 14336, 32000, 32768), MISTRAL_),
        ("qwen2.5-0.5b", (24, 14, 2, 896, 4864, 151936, 32768), QWEN2_ | {"tie_word_embeddings": True}),
        ("qwen2.5-7b", (28, 28, 4, 3584, 18944, 152064, 131072), QWEN2_),
    )
}
