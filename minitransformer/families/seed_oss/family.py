"""Seed-OSS (transformers' SeedOssForCausalLM): the Llama block, its biases on q, k and v, on o and on the MLP each
under a key of its own."""

from __future__ import annotations

from dataclasses import dataclass

from ..keys import FLAG, SIZE, TOKENS, key
from ..llama.config import LlamaConfig, preset
from ..llama.family import LLAMA
from ..llama.reference import llama_like, note
from ..parts.family import composed
from ..rotary import YARN_ROPE_TYPES, RopeKeys


@dataclass(frozen=True)
class SeedOssConfig(LlamaConfig):
    """The Llama block with attention_bias on q, k and v alone (on by default), attention_out_bias on o and mlp_bias
    on the MLP's three products; a head_dim of its own (q is wider than D in Seed-OSS-36B). Its dropouts act in
    training only."""

    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 128, SIZE.or_null())  # null: D / H
    n_positions: int = key("max_position_embeddings", 524288, SIZE)
    qkv_bias: bool = key("attention_bias", True, FLAG)
    o_bias: bool = key("attention_out_bias", False, FLAG)
    mlp_bias: bool = key("mlp_bias", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "seed_oss"

    what = "a Seed-OSS model"
    classes = {"seed_oss": "SeedOssForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)


# Seed-OSS-36B (ByteDance-Seed/Seed-OSS-36B-Base and -Instruct) as other engines' tests transcribe its config.json
# (mlx-rs' SEED_OSS_36B_CONFIG "mirrors the real checkpoint's config.json", a Swift test's configJSON): 80 query heads
# of 128 (q 10,240 wide over D = 5,120), 8 key/value heads, biases on q, k, v only, rope_theta 1e7, 512 Ki positions;
# its token ids are not in them (SeedOssConfig's 0 and 2).
SHAPES_36B = (64, 80, 8, 5120, 27648, 155136, 524288)  # layers, heads, key/value heads, width, MLP, vocabulary, context
PRESETS = {"seed-oss-36b": preset(SeedOssConfig, "seed-oss-36b", *SHAPES_36B, head_dim=128, rope_theta=10000000.0)}
REFERENCE = llama_like(note("Seed-OSS"))
ARCHITECTURE = composed("seed_oss", LLAMA, reference=REFERENCE, config=SeedOssConfig, presets=PRESETS, label="Seed-OSS")
