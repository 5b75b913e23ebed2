"""The Phi-3 family's config: each field under its config.json key with transformers' Phi3Config default (the rope,
LongRoPE's factors included, read as Phi3Config reads it: rotary.LongRope), and the presets of Phi-3 models, from each
model's published config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from ..config import ModelConfig, check_multiple, heads_of_width
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, POSITIVE, SIZE, TOKENS, WINDOW, eps, key
from ..llama.config import preset
from ..rotary import LongRope, Rope, attention_factor


@dataclass(frozen=True)
class Phi3Config(ModelConfig):
    """A Phi-3 decoder: the Llama block with q, k and v computed by one fused product (qkv_proj) and the MLP's gate
    and up by another (gate_up_proj); rotary embeddings on the first `partial_rotary_factor` of each head's numbers
    only; LongRoPE (Phi-3-mini-128k, Phi-3.5): per-frequency factors, short or long by the sequence's length, and
    an attention factor on cos and sin; a sliding window where the config sets one; no biases."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 3072, SIZE)
    n_inner: int = key("intermediate_size", 8192, SIZE)  # the MLP width (gate_up_proj is twice as wide)
    vocab_size: int = key("vocab_size", 32064, SIZE)
    n_kv_head: int = key("num_key_value_heads", None, SIZE.or_null(), follows="n_head")
    n_positions: int = key("max_position_embeddings", 4096, SIZE)
    # LongRoPE: the context trained before the extension
    original_max_position_embeddings: int = key("original_max_position_embeddings", 4096, POSITIVE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 1.0  # the share of each head's numbers that RoPE turns (the rest pass)
    # LongRoPE: sorted (key, value) pairs, hashable (short_factor and long_factor as tuples); None: plain RoPE
    rope_scaling: tuple[tuple[str, object], ...] | None = None
    sliding_window: int | None = key("sliding_window", None, WINDOW)  # each query sees the last so many positions
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 32000, TOKENS)

    what = "a Phi-3 model"
    model_type = "phi3"  # config.json's model_type (the one this family reads), as the reports name a model's family
    classes = {"phi3": "Phi3ForCausalLM"}
    groups = (LongRope(),)
    refusals = (heads_of_width(32, 3072),)
    dict_first = ("model_type",)

    def validate(self) -> None:
        check_multiple(self, "n_embd", "n_head")
        check_multiple(self, "n_head", "n_kv_head")

    @property
    def rotary_dim(self) -> int:
        """How many of each head's numbers RoPE turns: int(dh x partial_rotary_factor), as transformers rounds."""
        return int(self.d_head * self.partial_rotary_factor)

    @property
    def attention_factor(self) -> float:
        """LongRoPE's multiplier of cos and sin (so of every score, squared), as transformers'
        _compute_longrope_parameters (rotary.attention_factor); 1 without LongRoPE."""
        return attention_factor(self.rope())

    def rope(self, layer: int = 0) -> Rope:
        """The first rotary_dim numbers of each head turn; LongRoPE (where the config has it) beyond the context of
        original_max_position_embeddings."""
        scaling = self.rope_scaling
        if scaling is not None:
            scaling = tuple(
                sorted((*scaling, ("original_max_position_embeddings", self.original_max_position_embeddings)))
            )
        return Rope(self.rotary_dim, self.rope_theta, scaling, self.n_positions)


# Phi-3.5-mini's LongRoPE factors, one per rotated frequency (48 for a head of 96), from its config.json's rope_scaling
PHI35 = json.loads((resources.files("minitransformer") / "data" / "phi-3.5-mini-longrope.json").read_text("utf-8"))
FACTORS = {key: tuple(PHI35[key]) for key in ("long_factor", "short_factor")}
PHI35_LONGROPE = tuple(sorted((FACTORS | {"rope_type": "longrope"}).items()))

# Shapes of Phi-3 models, for counting without weights (and for the download list), from each model's published
# config.json on the Hugging Face hub: vocabulary 32,064, trained on 4,096 positions, rms_norm_eps 1e-5, rope_theta
# 10,000, bos 1, eos 32000; microsoft/Phi-3-mini-4k-instruct: 3,821,079,552 parameters (3.8B);
# microsoft/Phi-3-medium-4k-instruct: 13,960,238,080 (14B), grouped-query attention, 10 KV heads;
# microsoft/Phi-3.5-mini-instruct: Phi-3-mini's shapes, 128K positions by LongRoPE over the 4,096 it was trained on
# (attention factor sqrt(1 + ln 32 / ln 4096) = 1.19), a window of 262,144, wider than the context.
PRESETS: dict[str, Phi3Config] = {
    "phi-3-mini": preset(Phi3Config, "phi-3-mini", 32, 32, 32, 3072, 8192, 32064, 4096, sliding_window=2047),
    "phi-3-medium": preset(Phi3Config, "phi-3-medium", 40, 40, 10, 5120, 17920, 32064, 4096, sliding_window=2047),
    "phi-3.5-mini": preset(
        Phi3Config,
        "phi-3.5-mini",
        32,
        32,
        32,
        3072,
        8192,
        32064,
        131072,
        sliding_window=262144,
        rope_scaling=PHI35_LONGROPE,
    ),
}
