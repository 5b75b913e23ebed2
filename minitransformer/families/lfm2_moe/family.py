"""LFM2-MoE (transformers' Lfm2MoeForCausalLM): LFM2's layers (families/lfm2/family.py: a short conv or attention),
the first num_dense_layers with a SwiGLU MLP of intermediate_size, the others with k of E SwiGLU experts of
moe_intermediate_size chosen by a sigmoid router whose expert bias only chooses (parts/moe.py's SigmoidRouter; the
chosen scores renormalised with eps 1e-6 where norm_topk_prob, times routed_scaling_factor), no shared expert."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, replace

from ...errors import UserError
from ..config import FULL
from ..keys import COUNT, FLAG, LAYER_COUNT, SCALE, SIZE, Fixed, Key, key, layer_kinds
from ..lfm2.family import ATTENTION, CONV, NORM, SYMBOLS, Lfm2Config, Lfm2Formulas, block, norms
from ..llama.config import preset
from ..llama.reference import llama_like, note
from ..mixtral.family import EXPERTS
from ..parts.blocks import ByKind
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.moe import Mixture, SigmoidRouter
from ..parts.short_conv import ShortConv
from ..qwen3moe.family import DenseMLP

DENSE = "_dense"  # the kinds of the first num_dense_layers layers: conv_dense, full_attention_dense
LAYER_TYPES = Key("layer_types", MISSING, layer_kinds(CONV, FULL), required=True)  # Lfm2MoeConfig has no default
NUM_DENSE = Key("num_dense_layers", 2, replace(COUNT, shape=True))
KINDS = layer_kinds(CONV, FULL, CONV + DENSE, FULL + DENSE)


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's mixer (layer_types), and _dense on the first num_dense_layers (their MLP is dense)."""
    dense = NUM_DENSE.get(hf)
    return [kind + DENSE * (i < dense) for i, kind in enumerate(LAYER_TYPES.get(hf))]


def written(c: Lfm2MoeConfig) -> dict:
    return {"layer_types": [k.removesuffix(DENSE) for k in c.layer_types], "num_dense_layers": len(c.dense_layers)}


@dataclass(frozen=True)
class Lfm2MoeConfig(Lfm2Config):
    """An LFM2-MoE: LFM2's short-conv and attention layers, dense_inner-wide SwiGLU MLPs in the first layers, k of E
    experts of width n_inner (moe_intermediate_size) in the others."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 2048, SIZE)
    n_inner: int = key("moe_intermediate_size", 1792, SIZE)  # an expert's width (d_ff)
    vocab_size: int = key("vocab_size", 65536, SIZE)
    dense_inner: int = key("intermediate_size", 7168, SIZE)  # the dense layers' MLP, as given (no width rule)
    auto_adjust: bool = key("block_auto_adjust_ff_dim", Fixed(False))
    ffn_multiplier: float = key("block_ffn_dim_multiplier", Fixed(1.0))
    multiple_of: int = key("block_multiple_of", Fixed(256))
    n_experts: int = key("num_experts", 32, SIZE)
    top_k: int = key("num_experts_per_tok", 4, SIZE)
    use_expert_bias: bool = key("use_expert_bias", True, FLAG)
    norm_topk_prob: bool = key("norm_topk_prob", True, FLAG)
    routed_scaling_factor: float = key("routed_scaling_factor", 1.0, SCALE)
    model_type: str = "lfm2_moe"
    layer_types: tuple[str, ...] = key(
        "layer_types", None, KINDS, read=kinds, reads=(LAYER_TYPES, NUM_DENSE), write=written
    )

    what = "an LFM2-MoE"
    classes = {"lfm2_moe": "Lfm2MoeForCausalLM"}
    refusals = ()

    def validate(self) -> None:
        super().validate()
        if self.dense_layers != tuple(range(len(self.dense_layers))):
            raise UserError(f"an LFM2-MoE's dense layers come first (num_dense_layers), not {self.dense_layers}")

    @property
    def d_ff(self) -> int:
        return self.n_inner

    @property
    def dense_layers(self) -> tuple[int, ...]:
        return tuple(i for i, kind in enumerate(self.layer_types) if kind.endswith(DENSE))


# LiquidAI/LFM2-8B-A1B's config.json, as a fine-tune re-saves it (Ba2han/augment-multi-ft2, transformers 5.3.0; the
# model card: 8.3B parameters, 1.5B active, 32 experts, 4 active): 24 layers of 2048 (attention in layers 2, 6, 10, 14,
# 18, 21; the others a short conv of kernel 3, no biases), the first 2 with a dense SwiGLU of 7168, then 32 experts of
# 1792, 4 a token, the expert bias on, renormalised, scaling 1.0; 32 heads sharing 8 key/value heads, vocabulary
# 65536, 128,000 positions, rope_theta 1,000,000, norm_eps 1e-5, tied, bos 1, eos 7.
EIGHT_B = dict(layer_types=tuple((FULL if i in (2, 6, 10, 14, 18, 21) else CONV) + DENSE * (i < 2) for i in range(24)))
PRESETS = {
    "lfm2-8b-a1b": preset(Lfm2MoeConfig, "lfm2-8b-a1b", 24, 32, 8, 2048, 1792, 65536, 128000, eos_token_id=7, **EIGHT_B)
}

DENSE_MLP = DenseMLP(names=("w1", "w3", "w2"))
EXPERTS_OF = Mixture(SigmoidRouter(), EXPERTS)  # Mixtral's experts' names: w1, w3, w2 each
BLOCKS = {
    CONV + DENSE: block(ShortConv(), "conv", DENSE_MLP),
    CONV: block(ShortConv(), "conv", EXPERTS_OF),
    FULL + DENSE: block(ATTENTION, "self_attn", DENSE_MLP),
    FULL: block(ATTENTION, "self_attn", EXPERTS_OF),
}
MORE = (
    "; E experts, k a token, Te routed to expert e; F an expert's width, and the dense MLP's (intermediate_size) in "
    "its layers"
)
LFM2_MOE = Decoder(ByKind(BLOCKS), NORM, final_norm="embedding_norm", symbols=SYMBOLS + MORE, kind_order=tuple(BLOCKS))
REFERENCE = llama_like(note("LFM2-MoE"), norms=norms, eager_experts=True)  # its router's sigmoid in its dtype already
ARCHITECTURE = composed(
    "lfm2_moe", LFM2_MOE, Lfm2Formulas, REFERENCE, config=Lfm2MoeConfig, presets=PRESETS, label="LFM2-MoE"
)
