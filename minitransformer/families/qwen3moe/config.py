"""The Qwen3-MoE config: each field under its config.json key with transformers' Qwen3MoeConfig default, and the
presets of the published Qwen3 mixtures of experts, from each model's config.json.

Against Mixtral's config (families/mixtral/config.py): the experts have their own width (moe_intermediate_size: n_inner,
d_ff) and a dense MLP of intermediate_size (dense_inner) stands in the layers that mlp_only_layers or
decoder_sparse_step make dense; the top k gates are renormalised only under norm_topk_prob; head_dim is the config's
(D / H when absent); a sliding window (use_sliding_window) applies to every layer, as Qwen3MoeModel's one mask does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..keys import FLAG, INDICES, LAYER_COUNT, SIZE, TOKENS, Key, Refusal, key, layer_kinds, zero
from ..llama.config import LlamaConfig, preset
from ..qwen3.config import used_window
from ..rotary import YARN_ROPE_TYPES, RopeKeys

SPARSE, DENSE = "sparse_moe", "dense_mlp"  # the two kinds of layer (layer_types)
# Qwen3MoeDecoderLayer: experts in a layer not in mlp_only_layers whose (i + 1) is a multiple of decoder_sparse_step
DECODER_SPARSE_STEP = Key("decoder_sparse_step", 1, SIZE)
MLP_ONLY_LAYERS = Key("mlp_only_layers", None, INDICES.or_null())  # none: every layer sparse (no default taken)


def sparse_and_dense(hf: dict, values: dict) -> list[str]:
    step, only = DECODER_SPARSE_STEP.get(hf), MLP_ONLY_LAYERS.get(hf) or []
    return [DENSE if i in only or (i + 1) % step else SPARSE for i in range(values["n_layer"])]


def dense_layers(kinds: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(i for i, kind in enumerate(kinds) if kind == DENSE)


@dataclass(frozen=True)
class Qwen3MoeConfig(LlamaConfig):
    """A Qwen3-MoE decoder: Qwen3's attention; in each sparse layer a router picks k of E SwiGLU experts of width F
    (n_inner = moe_intermediate_size) per token, in each dense layer (layer_types) a SwiGLU MLP of dense_inner."""

    n_layer: int = key("num_hidden_layers", 24, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 2048, SIZE)
    n_inner: int = key("moe_intermediate_size", 768, SIZE)  # each expert's width
    vocab_size: int = key("vocab_size", 151936, SIZE)
    n_kv_head: int = key("num_key_value_heads", 4, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", None, SIZE, write=lambda c: {"head_dim": c.d_head})  # absent: D / H
    n_positions: int = key("max_position_embeddings", 32768, SIZE)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    sliding_window: int | None = used_window()  # on every layer, as Qwen3MoeModel's one mask
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS)
    model_type: str = "qwen3_moe"
    # transformers names E num_experts and saves it as num_local_experts (attribute_map): either is read
    n_experts: int = key("num_experts", 128, SIZE, aliases=("num_local_experts",))
    top_k: int = key("num_experts_per_tok", 8, SIZE)
    norm_topk_prob: bool = key("norm_topk_prob", False, FLAG)  # the k gates divided by their sum
    dense_inner: int = key("intermediate_size", 6144, SIZE)  # the dense layers' MLP
    # each layer's kind: two keys of the file say which layers are dense (None: as their defaults say, every layer sparse)
    layer_types: tuple[str, ...] = key(
        "mlp_only_layers",
        None,
        layer_kinds(SPARSE, DENSE),
        read=sparse_and_dense,
        rule=sparse_and_dense,
        reads=(DECODER_SPARSE_STEP, MLP_ONLY_LAYERS),
        dict_key="dense_layers",
        dict_value=lambda kinds: list(dense_layers(kinds)),
        write=lambda c: {"mlp_only_layers": list(dense_layers(c.layer_types)), "decoder_sparse_step": 1},
    )

    what = "a Qwen3-MoE model"
    classes = {"qwen3_moe": "Qwen3MoeForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES, top_level=True),)
    refusals = tuple(
        Refusal(json, "(every layer a dense MLP) is not supported: that is a dense Qwen3", zero)
        for json in ("num_experts", "num_local_experts")
    )

    @property
    def dense_layers(self) -> tuple[int, ...]:
        """The layers with a dense MLP (mlp_only_layers, and those decoder_sparse_step skips)."""
        return dense_layers(self.layer_types)

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window


# The published Qwen3 mixtures of experts, from each model's config.json on the Hugging Face hub: head_dim 128,
# vocabulary 151,936, rope_theta 1,000,000, rms_norm_eps 1e-6, 40,960 positions, no biases, untied, no sliding window,
# norm_topk_prob true, decoder_sparse_step 1 and mlp_only_layers [] (every layer sparse), 128 experts, 8 per token,
# bos 151643, eos 151645; each one's layers, heads, key/value heads, width, experts' width and intermediate_size
# (which no layer of theirs uses).
QWEN3_MOE = dict(head_dim=128, rope_theta=1e6, norm_topk_prob=True, bos_token_id=151643, eos_token_id=151645)
PRESETS: dict[str, Qwen3MoeConfig] = {
    name: preset(Qwen3MoeConfig, name, L, H, Hkv, D, Fe, 151936, 40960, dense_inner=F, **QWEN3_MOE)
    for name, L, H, Hkv, D, Fe, F in (
        ("qwen3-30b-a3b", 48, 32, 4, 2048, 768, 6144),  # Qwen/Qwen3-30B-A3B
        ("qwen3-235b-a22b", 94, 64, 4, 4096, 1536, 12288),  # Qwen/Qwen3-235B-A22B
    )
}
