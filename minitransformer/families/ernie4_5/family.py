"""ERNIE 4.5 (transformers' Ernie4_5ForCausalLM): the Llama block with rotary positions on neighbouring pairs of each
head's numbers, (2i, 2i+1) turned in place (GPT-J's layout, where Llama turns the halves), and one switch, use_bias,
for the biases of every product but the logits'; the head size its own (q wider than the stream in the 0.3B)."""

from __future__ import annotations

from dataclasses import dataclass

from ..keys import FLAG, SIZE, TOKENS, eps, key
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..rotary import YARN_ROPE_TYPES, RopeKeys
from . import reference


@dataclass(frozen=True)
class Ernie45Config(LlamaConfig):
    n_kv_head: int = key("num_key_value_heads", 2, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 128, SIZE.or_null())  # null: D / H
    n_positions: int = key("max_position_embeddings", 131072, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    qkv_bias: bool = key("use_bias", False, FLAG)  # one switch for every product's bias: q, k, v, o and the MLP's
    o_bias: bool = key("use_bias", False, FLAG)
    mlp_bias: bool = key("use_bias", False, FLAG)
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    rope_theta: float = 500000.0
    model_type: str = "ernie4_5"

    what = "an ERNIE 4.5 model"
    classes = {"ernie4_5": "Ernie4_5ForCausalLM"}
    # every number of a head turns: a partial_rotary_factor (in the rope or at the top level) is refused by name
    groups = (RopeKeys(YARN_ROPE_TYPES, top_level=True),)


# ERNIE-4.5-0.3B as transformers' Ernie4_5Config describes it (its docstring's checkpoint baidu/ERNIE-4.5-0.3B-PT, whose
# shapes its defaults are; the published config.json itself was out of reach): 16 query heads of 128 over a stream of
# 1,024, 2 key/value heads, tied, rope_theta 500,000, no biases; a model page describing ERNIE-4.5-0.3B-Base says the same.
PRESETS = {"ernie-4.5-0.3b": preset(Ernie45Config, "ernie-4.5-0.3b", 18, 16, 2, 1024, 3072, 103424, 131072)}
ERNIE = Decoder(PreNorm(GroupedQueryAttention(interleaved=True), GatedMLP()), symbols=SYMBOLS)
ARCHITECTURE = composed(
    "ernie4_5", ERNIE, config=Ernie45Config, presets=PRESETS, label="ERNIE 4.5", reference=reference
)
