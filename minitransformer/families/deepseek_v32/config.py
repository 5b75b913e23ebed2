"""DeepSeek-V3.2's config: DeepSeek-V3's (families/deepseek_v3/config.py) and the lightning indexer's three numbers,
each under its config.json key with transformers' DeepseekV32Config default; the preset of the published model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import UserError
from ..config import own_kv_heads
from ..deepseek_v3.config import YARN_40, DeepseekConfig
from ..keys import SIZE, Fixed, Refusal, key, layer_kinds

# transformers' mlp_layer_types: a gated MLP or the experts, "dense" or "sparse" (kept as the kinds of layer every
# DeepSeek names, "dense" and "moe")
MLP_LAYER_TYPES = layer_kinds("dense", "sparse", named={"sparse": "moe"}, written={"moe": "sparse"})
NO_QUERY_LATENT = (
    "is not supported: DeepSeek-V3.2's indexer reads the query's low-rank latent (transformers' DeepseekV32Attention "
    "has no single q_proj)"
)


def first_dense(hf: dict, fields: Mapping) -> tuple[str, ...]:
    """DeepseekV32Config's mlp_layer_types where the file has none: the first first_k_dense_replace layers dense."""
    dense = min(fields["first_k_dense"], fields["n_layer"])
    return ("dense",) * dense + ("moe",) * (fields["n_layer"] - dense)


def mlp_layer_types() -> Any:
    """layer_types as mlp_layer_types holds them (DeepSeek-V3.2's, GLM-4.7-Flash's): the file's, or the first
    first_k_dense_replace layers dense; written back under the file's names."""
    kinds = MLP_LAYER_TYPES
    return key("mlp_layer_types", None, kinds, rule=first_dense, dict_key="mlp_layer_types", dict_value=kinds.write)


def not_indexed(kinds, hf: dict) -> bool:
    """Layer types other than transformers' own (every layer indexed_attention)."""
    return kinds is not None and not (isinstance(kinds, list) and set(kinds) == {"indexed_attention"})


@dataclass(frozen=True)
class DeepseekV32Config(DeepseekConfig):
    """A DeepSeek-V3 whose every layer has a lightning indexer (index_n_heads heads of index_head_dim) choosing the
    index_topk keys each query reads; which layers have experts is mlp_layer_types."""

    # no rope_interleave in DeepseekV32Config: MLA's rotary pairs are always interleaved (and the indexer's never are)
    rope_interleave: bool = key("rope_interleave", Fixed(True))
    # the multi-token-prediction layers its checkpoints may keep: not built here, nor a key of transformers' config
    n_mtp: int = key("num_mtp_layers", Fixed(0), dict_key=None)
    n_positions: int = key("max_position_embeddings", 163840, SIZE)
    model_type: str = "deepseek_v32"
    index_n_heads: int = key("index_n_heads", 64, SIZE)  # Hi
    index_head_dim: int = key("index_head_dim", 128, SIZE)  # di
    index_topk: int = key("index_topk", 2048, SIZE)  # k_i: the keys a query attends to
    layer_types: tuple[str, ...] = mlp_layer_types()

    what = "a DeepSeek-V3.2"
    classes = {"deepseek_v32": "DeepseekV32ForCausalLM"}
    checkpoint_kind = "DeepSeek-V3.2 model"  # what messages call a checkpoint of it
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("attention_bias", "is not supported"),
        Refusal("layer_types", "is not supported (every DeepSeek-V3.2 layer is 'indexed_attention')", not_indexed),
        own_kv_heads(128),
        Refusal("q_lora_rank", NO_QUERY_LATENT, lambda rank, hf: rank is None),
    )

    def validate(self) -> None:
        super().validate()
        if self.q_lora_rank is None:  # transformers' DeepseekV32Attention has no q_proj, and the indexer reads c_q
            raise UserError(f"config q_lora_rank=null {NO_QUERY_LATENT}")
        if self.index_head_dim < self.qk_rope_head_dim:
            raise UserError(
                f"config index_head_dim={self.index_head_dim} is narrower than qk_rope_head_dim="
                f"{self.qk_rope_head_dim}, the rotary part of the indexer's heads"
            )

    @property
    def d_index(self) -> int:
        return self.index_head_dim

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {**super().symbol_sizes, "Hi": self.index_n_heads, "di": self.index_head_dim, "ki": self.index_topk}

    def is_moe(self, layer: int) -> bool:
        return self.layer_types[layer] == "moe"

    def topk_source(self, layer: int) -> int | None:
        """The earlier layer whose indexer's choice of keys this layer attends over; None: its own indexer's (every
        DeepSeek-V3.2 layer; GLM-5's shared layers read the last full layer's)."""
        return None


# deepseek-ai/DeepSeek-V3.2-Exp, as DeepSeek publishes it in inference/config_671B_v3.2.json of its GitHub repository
# (read in a fork, awesome-mini-project/DeepSeek-V3.2-Exp): dim 7168, inter_dim 18432, moe_inter_dim 2048, 61 layers
# (n_dense_layers 3), 128 heads, 256 routed experts, 1 shared, 8 activated, 8 groups of which 4 limited, route_scale
# 2.5, sigmoid scores, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128 + qk_rope 64, v 128, vocabulary 129280,
# max_seq_len 163840, index_n_heads 64, index_head_dim 128, index_topk 2048 (all DeepseekV32Config's defaults). The
# same under Hugging Face's keys in a quantized copy's config.json (GitHub haoyangli-amd/DeepSeek-V3.2-exp-ptpc), which
# also gives what DeepSeek's file leaves to its code: rope_theta 10000, YaRN (factor 40 over 4096, beta_fast 32,
# beta_slow 1, mscale 1, mscale_all_dim 1), rms_norm_eps 1e-6, norm_topk_prob true, untied, bos 0, eos 1, one MTP layer
# (not built by transformers, left out here). DeepSeek-V3.2's own config.json was not found: no preset.
PRESETS: dict[str, DeepseekV32Config] = {
    "deepseek-v3.2-exp": DeepseekV32Config(rope_scaling=YARN_40, name="deepseek-v3.2-exp"),
}
