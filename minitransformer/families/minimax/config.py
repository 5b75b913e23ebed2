"""MiniMax-01's config (transformers' MiniMaxConfig, model_type minimax): each field under its config.json key with
MiniMaxConfig's default, and the presets of the published models (MiniMax-Text-01, MiniMax-M1), from their config.json.

Each layer's kind is its mixer: linear_attention (lightning attention: parts/lightning.py) or full_attention (grouped-
query softmax attention with rotary positions); layer_types, or MiniMaxConfig's rule where the file has none (every
other layer from layer 0 full). Every layer has Mixtral's experts, and DeepNorm's scales on the stream (parts/blocks.py):
full_attn_alpha_factor and full_attn_beta_factor after a softmax layer's attention, linear_attn_* after a lightning
layer's, mlp_* after the experts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from ..keys import NUMBER, SIZE, TOKENS, WINDOW, Key, Refusal, eps, false, key, layer_kinds
from ..llama.config import preset
from ..mixtral.config import MixtralConfig
from ..rotary import Rope, RopeKeys

LINEAR, FULL = "linear_attention", "full_attention"
KINDS = layer_kinds(LINEAR, FULL)
LAYER_TYPES = Key("layer_types", None, KINDS.or_null())
# The keys of MiniMax's own code (the published files of model_type minimax_text_01 and minimax_m1) that MiniMaxConfig
# does not read: it would take its own default (a scale of 1, alternate layers) where such a file means another model.
OWN_SPELLINGS = {
    "attn_type_list": "layer_types",
    "layernorm_full_attention_alpha": "full_attn_alpha_factor",
    "layernorm_full_attention_beta": "full_attn_beta_factor",
    "layernorm_linear_attention_alpha": "linear_attn_alpha_factor",
    "layernorm_linear_attention_beta": "linear_attn_beta_factor",
    "layernorm_mlp_alpha": "mlp_alpha_factor",
    "layernorm_mlp_beta": "mlp_beta_factor",
}


def kinds(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Each layer's mixer: layer_types, or MiniMaxConfig's rule (layer i full where i is even)."""
    n, given = values["n_layer"], LAYER_TYPES.get(hf)
    if given is None:
        return tuple(FULL if (i + 1) % 2 else LINEAR for i in range(n))
    if len(given) != n:
        raise UserError(f"config layer_types must name {n} layers (num_hidden_layers), not {len(given)}")
    return tuple(given)


POST_NORM = "(the residual taken before each norm) is not supported: transformers' MiniMax takes it after"


def unread(spelling: str):
    """A refusal of MiniMax's own spelling of a key where the file lacks transformers' (which it would then ignore)."""
    ours = OWN_SPELLINGS[spelling]
    why = f"is MiniMax's own spelling, which transformers' MiniMaxConfig does not read: give {ours}"
    return Refusal(spelling, why, lambda value, hf: hf.get(ours) is None)


@dataclass(frozen=True)
class MiniMaxConfig(MixtralConfig):
    """A MiniMax-01: lightning attention (H heads of dh, blocks of block_size positions) in the layers layer_types
    names linear_attention, Mixtral's grouped-query attention in the others, k of E SwiGLU experts of width F
    (n_inner) in every layer; the stream normed at each branch and scaled by DeepNorm's alpha and beta."""

    n_positions: int = key("max_position_embeddings", 4096 * 32, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    rope_theta: float = 1e6
    # windowed softmax layers are refused (refusals below): MiniMax's published files have none
    sliding_window: int | None = key("sliding_window", None, WINDOW)
    n_experts: int = key("num_local_experts", 8, SIZE, aliases=("num_experts",))  # E
    block_size: int = key("block_size", 256, SIZE)  # lightning attention's block of positions (its decays' buffers)
    full_attn_alpha_factor: float = key("full_attn_alpha_factor", 1, NUMBER)
    full_attn_beta_factor: float = key("full_attn_beta_factor", 1, NUMBER)
    linear_attn_alpha_factor: float = key("linear_attn_alpha_factor", 1, NUMBER)
    linear_attn_beta_factor: float = key("linear_attn_beta_factor", 1, NUMBER)
    mlp_alpha_factor: float = key("mlp_alpha_factor", 1, NUMBER)
    mlp_beta_factor: float = key("mlp_beta_factor", 1, NUMBER)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "minimax"
    layer_types: tuple[str, ...] = key("layer_types", None, KINDS, read=kinds, rule=kinds, reads=(LAYER_TYPES,))

    what = "a MiniMax-01"
    classes = {"minimax": "MiniMaxForCausalLM"}
    # transformers' MiniMaxRotaryEmbedding turns every number of a head at the default rope (a published file's
    # rotary_dim, which MiniMax's own code reads, it does not read: nor does this)
    groups = (RopeKeys(refused=("pretraining_tp", "partial_rotary_factor"), top_level=True),)
    refusals: ClassVar[tuple[Refusal, ...]] = (  # type: ignore[assignment]  # more than Mixtral's three
        Refusal("attention_bias", "is not supported (transformers' MiniMax has no biases)"),
        Refusal("mlp_bias", "is not supported (transformers' MiniMax has no biases)"),
        Refusal("sliding_window", "(softmax layers with a window) is not supported", lambda v, hf: v is not None),
        Refusal("postnorm", POST_NORM, false),
        Refusal("shared_intermediate_size", "(a shared expert) is not supported", lambda value, hf: bool(value)),
        *(unread(spelling) for spelling in OWN_SPELLINGS),
    )

    def rope(self, layer: int = 0) -> Rope | None:
        """A softmax layer turns every number of its heads; a lightning layer has no positions (its decays say how far
        back a key was)."""
        return None if self.layer_types[layer] == LINEAR else super().rope(layer)

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A softmax layer keeps its keys and values; a lightning layer each head's [dh, dh] state, whatever the
        context."""
        if self.layer_types[layer] == FULL:
            return super().layer_cache(layer)
        return State((("recurrent", (self.n_head, self.d_head, self.d_head)),))


# MiniMaxAI/MiniMax-M1-80k's config.json (model_type minimax_m1, MiniMax's own code; a public copy quotes it whole: the
# M1-40k has the same shapes), whose shapes are MiniMax-Text-01's (its model card: 456B parameters, 45.9B a token; the
# -hf conversion for transformers, as mlx-lm's MiniMax port transcribes it, names the same layers and factors in
# MiniMaxConfig's keys): 80 layers of 6144, lightning attention in 7 of each 8 (every 8th layer softmax), 64 heads of
# 128 with 8 key/value heads in the softmax layers, 32 experts of 9216 (2 a token, no shared expert), vocabulary 200064,
# 10,240,000 positions, rope_theta 10,000,000, rms_norm_eps 1e-5, untied, bos and eos null, DeepNorm's alpha
# 3.5565588200778455 (= (2 x 80)^(1/4)) on every stream and beta 1, postnorm; no block key (MiniMax's kernel's block is
# 256, MiniMaxConfig's default).
ALPHA = 3.5565588200778455
ALPHAS = dict(full_attn_alpha_factor=ALPHA, linear_attn_alpha_factor=ALPHA, mlp_alpha_factor=ALPHA)
EVERY_8TH = tuple(FULL if (i + 1) % 8 == 0 else LINEAR for i in range(80))  # softmax attention; lightning elsewhere
MINIMAX_01 = dict(head_dim=128, rope_theta=1e7, n_experts=32, top_k=2, layer_types=EVERY_8TH, **ALPHAS)
NO_IDS = dict(bos_token_id=None, eos_token_id=None)
PRESETS = {
    name: preset(MiniMaxConfig, name, 80, 64, 8, 6144, 9216, 200064, 10240000, **MINIMAX_01, **NO_IDS)
    for name in ("minimax-text-01", "minimax-m1")
}
