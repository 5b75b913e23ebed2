"""Qwen3-Next (transformers' Qwen3NextForCausalLM): Qwen3.5-MoE's layers (families/qwen35/: Gated DeltaNet or gated
attention, (1 + w) RMSNorms, experts beside a gated shared expert) but for three things of its own: each DeltaNet
layer makes its four in-projections in two products grouped by key head, cut apart by a named stage
(parts/deltanet.py's `fused`); the router renormalises its top k only under norm_topk_prob; and Qwen3-MoE's rule
makes some layers' MLP dense (mlp_only_layers, decoder_sparse_step), which their kind says (`_dense`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..keys import FLAG, LAYER_COUNT, SIZE, Key, Refusal, key, layer_kinds, zero
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.deltanet import GatedDeltaNet
from ..parts.family import composed
from ..parts.gated_attention import GatedAttention
from ..parts.mlps import OneKindGatedMLP
from ..parts.moe import Mixture, SoftmaxRouter
from ..qwen3moe.config import DECODER_SPARSE_STEP, DENSE, MLP_ONLY_LAYERS, dense_layers, sparse_and_dense
from ..qwen35.config import FULL, FULL_ATTENTION_INTERVAL, LINEAR, Qwen35Config, hybrid_layers
from ..qwen35.family import EXPERTS, LINEAR_NAMES, NORM, SHARED, SYMBOLS, Qwen35Formulas
from ..qwen35.reference import float64_throughout
from ..rotary import DEFAULT_OR_YARN, RopeKeys, partial_rotary

DENSE_MLP = "_dense"  # the kinds of the layers Qwen3-MoE's rule makes dense: linear_attention_dense, ...
LAYER_TYPES = Key("layer_types", None, layer_kinds(LINEAR, FULL).or_null())
KINDS = layer_kinds(LINEAR, FULL, LINEAR + DENSE_MLP, FULL + DENSE_MLP)
READS = (LAYER_TYPES, FULL_ATTENTION_INTERVAL, DECODER_SPARSE_STEP, MLP_ONLY_LAYERS)  # the keys kinds reads


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's mixer (layer_types, or every full_attention_interval-th layer full), and _dense where its MLP is
    dense (Qwen3NextDecoderLayer: in mlp_only_layers, or (i + 1) not a multiple of decoder_sparse_step)."""
    mixers = LAYER_TYPES.get(hf) or hybrid_layers(values["n_layer"], FULL_ATTENTION_INTERVAL.get(hf))
    return [mixer + DENSE_MLP * (mlp == DENSE) for mixer, mlp in zip(mixers, sparse_and_dense(hf, values))]


def written(c: Qwen3NextConfig) -> dict:
    dense = dense_layers(tuple(DENSE if kind.endswith(DENSE_MLP) else "" for kind in c.layer_types))
    mixers = [kind.removesuffix(DENSE_MLP) for kind in c.layer_types]
    return {"layer_types": mixers, "mlp_only_layers": list(dense), "decoder_sparse_step": 1}


@dataclass(frozen=True)
class Qwen3NextConfig(Qwen35Config):
    """A Qwen3-Next: Qwen3.5-MoE's shapes (Qwen3NextConfig's defaults), dense layers of intermediate_size where
    mlp_only_layers and decoder_sparse_step say, the top k renormalised where norm_topk_prob."""

    n_layer: int = key("num_hidden_layers", 48, LAYER_COUNT)
    n_embd: int = key("hidden_size", 2048, SIZE)
    n_inner: int = key("intermediate_size", 5632, SIZE)  # the dense layers' MLP
    vocab_size: int = key("vocab_size", 151936, SIZE)
    layer_types: tuple[str, ...] = key(
        "layer_types", None, KINDS, read=kinds, rule=kinds, reads=READS, write=written, dict_key=None
    )
    n_kv_head: int = key("num_key_value_heads", 2, SIZE)
    n_experts: int = key("num_experts", 512, SIZE)
    top_k: int = key("num_experts_per_tok", 10, SIZE)
    moe_inner: int = key("moe_intermediate_size", 512, SIZE)
    shared_inner: int = key("shared_expert_intermediate_size", 512, SIZE)
    norm_topk_prob: bool = key("norm_topk_prob", True, FLAG)
    model_type: str = "qwen3_next"

    what = "a Qwen3-Next"
    classes = {"qwen3_next": "Qwen3NextForCausalLM"}
    multimodal: ClassVar[dict[str, str]] = {}
    inherited: ClassVar[tuple[str, ...]] = ()
    groups = (RopeKeys(DEFAULT_OR_YARN, refused=(), share=partial_rotary(0.25), strict=True),)
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("num_experts", "(every layer a dense MLP) is not supported", zero),
    )

    @property
    def expert_layers(self) -> int:
        return sum(not kind.endswith(DENSE_MLP) for kind in self.layer_types)


# Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, key for key as NVIDIA-NeMo/Megatron-Bridge's test fixture
# qwen3_next_80b_a3b_config_dict transcribes it (the model card, as LM Studio copies it, agrees: 48 layers of 2048, 12
# x (3 Gated DeltaNet + 1 gated attention), 16 query and 2 key/value heads of 256, a quarter rotated, DeltaNet heads
# 16 (q, k) and 32 (v) of 128, 512 experts of 512, 10 a token, one shared expert of 512, 262,144 positions):
# intermediate_size 5120 (no dense layer uses it), rope_theta 10,000,000, rms_norm_eps 1e-6, untied, no attention
# biases, norm_topk_prob, bos 151643, eos 151645. Its multi-token-prediction layer (mtp.*) is not the model's, as in
# transformers.
INSTRUCT: dict[str, Any] = dict(n_inner=5120, n_positions=262144, rope_theta=1e7, bos_token_id=151643)
PRESETS = {"qwen3-next-80b-a3b": Qwen3NextConfig(**INSTRUCT, eos_token_id=151645, name="qwen3-next-80b-a3b")}

EXPERTS_OF = Mixture(SoftmaxRouter(renormalise="norm_topk_prob"), EXPERTS, SHARED)
DENSE_LAYERS_MLP = OneKindGatedMLP(width="n_inner")
DELTANET = GatedDeltaNet(fused=True)
BLOCKS = {
    LINEAR + DENSE_MLP: PreNorm(DELTANET, DENSE_LAYERS_MLP, NORM, LINEAR_NAMES),
    LINEAR: PreNorm(DELTANET, EXPERTS_OF, NORM, LINEAR_NAMES),
    FULL + DENSE_MLP: PreNorm(GatedAttention(), DENSE_LAYERS_MLP, NORM),
    FULL: PreNorm(GatedAttention(), EXPERTS_OF, NORM),
}
BIASES = "biases of the attention projections that have them"
MORE = "; F the dense layers' MLP width (intermediate_size)"
QWEN3_NEXT = Decoder(
    ByKind(BLOCKS), NORM, ignored=r"mtp\..*", biases=BIASES, symbols=SYMBOLS + MORE, kind_order=tuple(BLOCKS)
)
# Its variant: a dense layer, which the preset has not.
A3B = PRESETS["qwen3-next-80b-a3b"]
DENSE_FIRST = replace(A3B, layer_types=(LINEAR + DENSE_MLP, *A3B.layer_types[1:]))
NOTE = (
    "  (transformers' float64 Qwen3-Next computes its RMSNorms, the rotary tables, the DeltaNet's decay, delta rule "
    "and gated norm,\n  and the router's softmax, in float32; its reference here has them in float64, as "
    "families/qwen35/reference.py explains)"
)


RECORD = dict(config=Qwen3NextConfig, presets=PRESETS, label="Qwen3-Next", variants=(DENSE_FIRST,))
FLOAT64 = dict(float64_reference=float64_throughout, float64_note=NOTE)  # Qwen3.5's reference
ARCHITECTURE = composed("qwen3_next", QWEN3_NEXT, Qwen35Formulas, **FLOAT64, **RECORD)
