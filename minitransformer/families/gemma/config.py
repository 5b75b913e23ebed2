"""The Gemma family's config (Gemma 2, Gemma 3's text model): each field under its config.json key with transformers'
defaults (Gemma2Config's and Gemma3TextConfig's), and the presets of the published models, from each model's
config.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import FULL, SLIDING, check_windows
from ..keys import (
    ACTIVATION,
    FLAG,
    LAYER_COUNT,
    POSITIVE_NUMBER,
    SIZE,
    TOKENS,
    WINDOW,
    Fixed,
    Key,
    Refusal,
    key,
    layer_kinds,
)
from ..llama.config import LlamaConfig, preset
from ..rotary import Rope, RopePerLayerType, local_rope

GEMMA2, GEMMA3 = "gemma2", "gemma3_text"
SLIDING_WINDOW_PATTERN = Key("sliding_window_pattern", 6, SIZE)  # Gemma 3's: a full layer in so many


def periodic(n_layer: int, period: int) -> tuple[str, ...]:
    """transformers' layer types where a config gives none: every `period`-th layer full, the others sliding."""
    return tuple(SLIDING if (i + 1) % period else FULL for i in range(n_layer))


def layers(hf: dict, fields: Mapping) -> tuple[str, ...]:
    """transformers' layer_types where the file has none: Gemma 2's alternate, Gemma 3's have a full layer in every
    sliding_window_pattern."""
    gemma2 = hf.get("model_type", fields.get("model_type")) == GEMMA2
    return periodic(fields["n_layer"], 2 if gemma2 else SLIDING_WINDOW_PATTERN.get(hf))


@dataclass(frozen=True)
class GemmaConfig(LlamaConfig):
    """A Gemma 2 or Gemma 3 text decoder (model_type says which).

    Against the Llama block: the embeddings are multiplied by sqrt(D); every RMSNorm scales by (1 + w); a block has
    four norms (before and after attention, before and after the MLP, each output normed before its residual add);
    the scores are scaled by query_pre_attn_scalar^-1/2 and (Gemma 2) soft-capped, c tanh(S / c), before the mask;
    layers alternate a sliding window and full attention (`layer_types`); the logits may be soft-capped.
    Gemma 3 adds an RMSNorm on each head of q and k before RoPE, and a rotary base of its own on the sliding layers
    (local_rope_theta), the rope scaling being the full layers' only.
    """

    n_layer: int = key("num_hidden_layers", 26, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 8, SIZE)
    n_embd: int = key("hidden_size", 2304, SIZE)
    n_inner: int = key("intermediate_size", 9216, SIZE)
    vocab_size: int = key("vocab_size", 256000, SIZE, by_type={GEMMA3: 262208})
    n_kv_head: int = key("num_key_value_heads", 4, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 256, SIZE)
    n_positions: int = key("max_position_embeddings", 8192, SIZE, by_type={GEMMA3: 131072})
    hidden_act: str = key("hidden_activation", "gelu_pytorch_tanh", ACTIVATION)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    sliding_window: int | None = key("sliding_window", 4096, WINDOW)
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 2, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    query_pre_attn_scalar: float = key("query_pre_attn_scalar", 256, POSITIVE_NUMBER)
    # transformers' Gemma 3 attention never passes attn_logit_softcapping on: it is not read
    attn_logit_softcapping: float | None = key(
        "attn_logit_softcapping", 50.0, POSITIVE_NUMBER.or_null(), by_type={GEMMA3: Fixed(None)}
    )
    final_logit_softcapping: float | None = key(
        "final_logit_softcapping", 30.0, POSITIVE_NUMBER.or_null(), by_type={GEMMA3: None}
    )
    layer_types: tuple[str, ...] = key(
        "layer_types", None, layer_kinds(FULL, SLIDING), rule=layers, reads=(SLIDING_WINDOW_PATTERN,), dict_key=None
    )
    qk_norm: bool = key("qk_norm", Fixed(False), by_type={GEMMA3: Fixed(True)})  # Gemma 3's q and k norms, per head
    local_rope_theta: float | None = None  # Gemma 3: the sliding layers' rotary base (None: the same rotary as all)
    local_rope_scaling: tuple[tuple[str, object], ...] | None = None
    model_type: str = GEMMA2

    family = "gemma"
    what = "a Gemma model"
    classes = {GEMMA2: "Gemma2ForCausalLM", GEMMA3: "Gemma3ForCausalLM"}
    multimodal = {"gemma3": GEMMA3}  # Gemma3ForConditionalGeneration: read as its text model
    # Gemma 3's full layers at rope_theta (1e6 where the file gives none), its sliding ones at rope_local_base_freq
    groups = (RopePerLayerType(1_000_000.0, 10_000.0, "rope_local_base_freq", single=(GEMMA2,)),)
    refusals = (Refusal("use_bidirectional_attention", "(attention to later tokens) is not supported"),)
    dict_last = ("d_head", "d_ff", "layer_types")

    def validate(self) -> None:
        check_windows(self)
        super().validate()

    def rope(self, layer: int = 0) -> Rope | None:
        """Gemma 3's sliding layers turn at a base of their own (local_rope_theta), the rope scaling being the full
        layers' only; every other layer at the config's rope."""
        return local_rope(self, layer) or super().rope(layer)

    @property
    def checkpoint_kind(self) -> str:
        if self.model_type == "gemma3":
            return "gemma3 model (read as its text model, Gemma3ForCausalLM: model.layers...)"
        return f"{self.model_type} model"


# The published models, each from its config.json on the Hugging Face Hub (google/<name>): a head of 256, the scores
# scaled by 256^-1/2, tied embeddings, bos 2, eos 1; each one's layers, heads, key/value heads, width, MLP width,
# vocabulary, context and window, and what else it sets.
NO_SOFT_CAPS = dict(attn_logit_softcapping=None, final_logit_softcapping=None)
GEMMA_3: dict[str, Any] = dict(rope_theta=1e6, local_rope_theta=1e4, qk_norm=True, **NO_SOFT_CAPS)
GEMMA_3_1B = GEMMA_3 | {"model_type": GEMMA3}  # -pt, gemma3_text
# -pt (gemma3): its text model only (text_config, transformers' defaults where it says nothing); the SigLIP vision tower
# and the projector are not counted
GEMMA_3_4B = GEMMA_3 | {"rope_scaling": (("factor", 8.0), ("rope_type", "linear")), "model_type": "gemma3"}
PRESETS: dict[str, GemmaConfig] = {
    name: preset(GemmaConfig, name, L, H, Hkv, D, F, V, P, sliding_window=W, **more)
    for name, L, H, Hkv, D, F, V, P, W, more in (
        ("gemma-2-2b", 26, 8, 4, 2304, 9216, 256000, 8192, 4096, {}),  # 2,614,341,888 parameters
        ("gemma-2-9b", 42, 16, 8, 3584, 14336, 256000, 8192, 4096, {}),
        ("gemma-3-1b", 26, 4, 1, 1152, 6912, 262144, 32768, 512, GEMMA_3_1B),
        ("gemma-3-4b", 34, 8, 4, 2560, 10240, 262208, 131072, 1024, GEMMA_3_4B),
    )
}
