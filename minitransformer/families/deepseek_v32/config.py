"""DeepSeek-V3.2's config: DeepSeek-V3's (families/deepseek_v3/config.py) and the lightning indexer's three numbers,
read from a Hugging Face config.json with transformers' DeepseekV32Config defaults; the preset of the published
model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...errors import UserError
from ..config import check_model_type, unnoted
from ..deepseek_v3.config import DeepseekConfig, deepseek_fields

DEEPSEEK_V32_MODEL_TYPES = ("deepseek_v32",)
# DeepseekV32Config's max_position_embeddings, where its defaults differ from DeepseekV3Config's (the indexer's are
# read below).
V32_CONTEXT = 163840
MLP_KINDS = ("dense", "sparse")  # transformers' mlp_layer_types: a gated MLP, or the experts
NO_QUERY_LATENT = (
    "config q_lora_rank=null is not supported: DeepSeek-V3.2's indexer reads the query's low-rank latent "
    "(transformers' DeepseekV32Attention has no single q_proj)"
)


@dataclass(frozen=True)
class DeepseekV32Config(DeepseekConfig):
    """A DeepSeek-V3 whose every layer has a lightning indexer: index_n_heads heads of index_head_dim score every key
    it can see, and its attention reads only the index_topk keys they rank highest. Which layers have experts is
    mlp_layer_types ("dense" or "sparse" each; by default the first first_k_dense_replace dense)."""

    index_n_heads: int = 64  # Hi
    index_head_dim: int = 128  # di
    index_topk: int = 2048  # k_i: the keys a query attends to
    mlp_layer_types: tuple[str, ...] | None = None  # None: from first_k_dense_replace
    n_positions: int = 163840
    model_type: str = "deepseek_v32"
    name: str = field(default="deepseek_v32", compare=False)

    family = "deepseek_v32"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("index_n_heads", "index_head_dim", "index_topk")
        if self.q_lora_rank is None:  # transformers' DeepseekV32Attention has no q_proj, and the indexer reads c_q
            raise UserError(NO_QUERY_LATENT)
        if self.index_head_dim < self.qk_rope_head_dim:
            raise UserError(
                f"config index_head_dim={self.index_head_dim} is narrower than qk_rope_head_dim="
                f"{self.qk_rope_head_dim}, the rotary part of the indexer's heads"
            )
        if self.mlp_layer_types is None:
            dense = min(self.first_k_dense, self.n_layer)
            object.__setattr__(self, "mlp_layer_types", ("dense",) * dense + ("sparse",) * (self.n_layer - dense))
        kinds = self.mlp_layer_types or ()
        if len(kinds) != self.n_layer or not set(kinds) <= set(MLP_KINDS):
            raise UserError(
                f"config mlp_layer_types must name each of the {self.n_layer} layers 'dense' or "
                f"'sparse', not {list(kinds)!r}"
            )

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "deepseek_v32") -> DeepseekV32Config:
        """Read a transformers DeepseekV32Config dict (as config.json holds it), with DeepseekV32Config's defaults."""
        check_model_type(hf, DEEPSEEK_V32_MODEL_TYPES, f"a DeepSeek-V3.2 ({', '.join(DEEPSEEK_V32_MODEL_TYPES)})")
        kinds = hf.get("layer_types")
        if kinds is not None and set(kinds) != {"indexed_attention"}:  # transformers' default: every layer indexed
            raise UserError(
                f"config layer_types={kinds!r} is not supported (every DeepSeek-V3.2 layer is 'indexed_attention')"
            )
        # num_key_value_heads is read only to refuse it (MLA's heads have their own keys): no default taken
        heads, kv_heads = unnoted(hf, "num_attention_heads", 128), unnoted(hf, "num_key_value_heads", 128)
        if kv_heads is not None and kv_heads != heads:  # eager attention would repeat MLA's heads
            raise UserError(
                f"config num_key_value_heads={kv_heads} is not supported: MLA gives each of the "
                f"num_attention_heads={heads} heads its own keys and values"
            )
        if "q_lora_rank" in hf and hf["q_lora_rank"] is None:
            raise UserError(NO_QUERY_LATENT)
        fields = deepseek_fields(hf, name, V32_CONTEXT)
        # transformers' DeepseekV32Config has no rope_interleave: MLA's rotary pairs are always interleaved (and the
        # indexer's never are); a rope_interleave key in a config.json changes nothing there, nor here
        fields["rope_interleave"] = True
        kinds = hf.get("mlp_layer_types")
        if kinds is not None and not isinstance(kinds, list):
            raise UserError(f"config mlp_layer_types must be a list, not {kinds!r}")
        return cls(
            **fields,
            index_n_heads=hf.get("index_n_heads", 64),
            index_head_dim=hf.get("index_head_dim", 128),
            index_topk=hf.get("index_topk", 2048),
            mlp_layer_types=None if kinds is None else tuple(kinds),
        )

    @property
    def checkpoint_kind(self) -> str:
        return "DeepSeek-V3.2 model"

    @property
    def d_index(self) -> int:
        """The indexer's key: index_head_dim numbers a position and layer, cached beside K and V."""
        return self.index_head_dim

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """DeepSeek-V3's symbols and the indexer's: Hi heads of di, scoring every key for the ki it keeps."""
        return {**super().symbol_sizes, "Hi": self.index_n_heads, "di": self.index_head_dim, "ki": self.index_topk}

    def is_moe(self, layer: int) -> bool:
        return (self.mlp_layer_types or ())[layer] == "sparse"

    def prefix(self, n_layer: int) -> DeepseekV32Config:
        return replace(self, n_layer=n_layer, mlp_layer_types=(self.mlp_layer_types or ())[:n_layer])

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["mlp_layer_types"] = list(self.mlp_layer_types or ())
        return d

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config: DeepSeek-V3's keys (but rope_interleave, which
        DeepseekV32Config does not have: MLA's pairs are always interleaved) and the indexer's and mlp_layer_types."""
        hf = {key: value for key, value in super().to_hf_dict().items() if key != "rope_interleave"}
        return hf | {
            "architectures": ["DeepseekV32ForCausalLM"],
            "index_n_heads": self.index_n_heads,
            "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk,
            "mlp_layer_types": list(self.mlp_layer_types or ()),
        }


# deepseek-ai/DeepSeek-V3.2-Exp. Its architecture as DeepSeek publishes it in inference/config_671B_v3.2.json of its
# GitHub repository deepseek-ai/DeepSeek-V3.2-Exp (read in a fork, awesome-mini-project/DeepSeek-V3.2-Exp): dim 7168,
# inter_dim 18432, moe_inter_dim 2048, 61 layers of which n_dense_layers 3, 128 heads, 256 routed experts, 1 shared,
# 8 activated, 8 expert groups of which 4 limited, route_scale 2.5, sigmoid scores, q_lora_rank 1536, kv_lora_rank
# 512, qk_nope 128 + qk_rope 64, v 128, vocabulary 129280, max_seq_len 163840, index_n_heads 64, index_head_dim 128,
# index_topk 2048. The same numbers under Hugging Face's keys are in the config.json of a quantized copy of the model
# (GitHub haoyangli-amd/DeepSeek-V3.2-exp-ptpc: model_type deepseek_v32, DeepseekV32ForCausalLM, with a
# quantization_config of its own), which also gives what DeepSeek's file leaves to its code's defaults: rope_theta
# 10000, YaRN (factor 40 over original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, mscale 1,
# mscale_all_dim 1), rms_norm_eps 1e-6, norm_topk_prob true, untied, bos 0, eos 1, num_nextn_predict_layers 1 (the
# multi-token-prediction layer, which transformers does not build and this count leaves out). DeepSeek-V3.2's own
# config.json was not found (its Hugging Face page is out of reach here and no copy turned up), so it has no preset.
PRESETS: dict[str, DeepseekV32Config] = {
    "deepseek-v3.2-exp": DeepseekV32Config(
        n_layer=61, n_head=128, n_embd=7168, n_inner=18432, vocab_size=129280, moe_inner=2048, q_lora_rank=1536,
        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_experts=256, top_k=8,
        n_shared_experts=1, n_group=8, topk_group=4, first_k_dense=3, norm_topk_prob=True, routed_scaling_factor=2.5,
        n_positions=163840, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=(
            ("beta_fast", 32), ("beta_slow", 1), ("factor", 40), ("mscale", 1.0), ("mscale_all_dim", 1.0),
            ("original_max_position_embeddings", 4096), ("rope_type", "yarn"),
        ), index_n_heads=64, index_head_dim=128, index_topk=2048, bos_token_id=0, eos_token_id=1,
        name="deepseek-v3.2-exp",
    ),
}  # fmt: skip
