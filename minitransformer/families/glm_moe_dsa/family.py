"""GLM-5 (transformers' GlmMoeDsaForCausalLM): DeepSeek-V3.2 (latent attention over the keys a lightning indexer
chooses, DeepSeek-V3's experts after mlp_layer_types' dense layers, families/parts/indexer.py), with the indexer's
rotary pairs interleaved (de-interleaved first, as MLA's), and shared top-k: a layer whose indexer_types is "shared"
has no indexer and attends over the keys the last "full" layer before it chose in the same pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from ..config import own_kv_heads
from ..deepseek_v3 import reference as deepseek_v3_reference
from ..deepseek_v3.family import ATTENTION, MLP, SYMBOLS
from ..deepseek_v32.config import MLP_LAYER_TYPES, NO_QUERY_LATENT, DeepseekV32Config, first_dense, not_indexed
from ..deepseek_v32.family import INDEX_SYMBOLS, DsaFormulas
from ..deepseek_v32.reference import float64_indexers
from ..glm4_moe.family import ROUTING
from ..keys import (
    LAYER_COUNT,
    POSITIVE,
    SCALE,
    SIZE,
    TOKENS,
    Key,
    Kind,
    Refusal,
    eps,
    false,
    key,
    layer_kinds,
)
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.indexer import IndexedLatentAttention, LightningIndexer
from ..parts.moe import MlpByKind

SHARED = "_shared_topk"  # the kinds of layer without an indexer of their own: dense_shared_topk, moe_shared_topk
KINDS = layer_kinds("dense", "moe", "dense" + SHARED, "moe" + SHARED)
MLP_KINDS = Key("mlp_layer_types", None, MLP_LAYER_TYPES.or_null())
INDEXER_TYPES = Key("indexer_types", None, layer_kinds("full", "shared").or_null())
PATTERN = Key(
    "index_topk_pattern",
    None,
    Kind(
        "a string of F and S, or a list of full and shared",
        lambda v: set(v) <= {"F", "S"} if isinstance(v, str) else isinstance(v, list) and set(v) <= {"full", "shared"},
    ).or_null(),
)
FREQUENCY = Key("index_topk_freq", 1, Kind("an integer", lambda v: type(v) is int))
OFFSET = Key("index_skip_topk_offset", 2, Kind("an integer", lambda v: type(v) is int))
READS = (MLP_KINDS, INDEXER_TYPES, PATTERN, FREQUENCY, OFFSET)  # the keys kinds reads
INTERLEAVED = "is not supported: GLM-5 interleaves them whatever it says"


def indexers(hf: dict, n: int) -> list[str]:
    """GlmMoeDsaConfig's indexer_types: the file's, or its index_topk_pattern, or index_topk_freq and
    index_skip_topk_offset's rule (layer i full iff max(i - offset + 1, 0) is a multiple of freq; all full by
    default)."""
    given, pattern = INDEXER_TYPES.get(hf), PATTERN.get(hf)
    if given is not None:
        return list(given)
    if pattern is not None:
        return [{"F": "full", "S": "shared"}[c] for c in pattern] if isinstance(pattern, str) else list(pattern)
    freq, offset = max(FREQUENCY.get(hf), 1), OFFSET.get(hf)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]


def kinds(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Each layer's kind: its MLP's (mlp_layer_types, or the first first_k_dense_replace dense) and, where its
    indexer_types is "shared", SHARED."""
    n, own = values["n_layer"], indexers(hf, values["n_layer"])
    mlp = MLP_KINDS.get(hf) or first_dense(hf, values)
    for name, given in (("mlp_layer_types", mlp), ("indexer_types", own)):
        if len(given) != n:
            raise UserError(f"config {name} must name {n} layers (num_hidden_layers), not {len(given)}")
    return tuple(kind + ("" if mine == "full" else SHARED) for kind, mine in zip(mlp, own))


def written(c: GlmMoeDsaConfig) -> dict:
    mlp = MLP_LAYER_TYPES.write(tuple(k.removesuffix(SHARED) for k in c.layer_types))
    return {
        "mlp_layer_types": mlp,
        "indexer_types": ["shared" if k.endswith(SHARED) else "full" for k in c.layer_types],
    }


@dataclass(frozen=True)
class GlmMoeDsaConfig(DeepseekV32Config):
    """A GLM-5: a DeepSeek-V3.2 under GlmMoeDsaConfig's defaults, its layers' kinds from mlp_layer_types and
    indexer_types."""

    n_layer: int = key("num_hidden_layers", 78, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 64, SIZE)
    n_embd: int = key("hidden_size", 6144, SIZE)
    n_inner: int = key("intermediate_size", 12288, SIZE)
    vocab_size: int = key("vocab_size", 154880, SIZE)
    q_lora_rank: int | None = key("q_lora_rank", 2048, SIZE.or_null())
    qk_nope_head_dim: int = key("qk_nope_head_dim", 192, SIZE)
    v_head_dim: int = key("v_head_dim", 256, SIZE)
    n_group: int = key("n_group", 1, POSITIVE)
    topk_group: int = key("topk_group", 1, POSITIVE)
    routed_scaling_factor: float = key("routed_scaling_factor", 2.5, SCALE)
    n_positions: int = key("max_position_embeddings", 202752, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    model_type: str = "glm_moe_dsa"
    index_n_heads: int = key("index_n_heads", 32, SIZE)
    layer_types: tuple[str, ...] = key("indexer_types", None, KINDS, read=kinds, rule=kinds, reads=READS, write=written)

    what = "a GLM-5 (glm_moe_dsa)"
    classes = {"glm_moe_dsa": "GlmMoeDsaForCausalLM"}
    checkpoint_kind = "GLM-5 model"
    dict_last: ClassVar[tuple[str, ...]] = ("d_head", "d_value", "d_ff", "topk_sources")
    refusals: ClassVar[tuple[Refusal, ...]] = (
        *ROUTING,
        Refusal("attention_bias", "is not supported"),
        Refusal("layer_types", "is not supported (every GLM-5 layer is 'indexed_attention')", not_indexed),
        own_kv_heads(64),
        Refusal("q_lora_rank", NO_QUERY_LATENT, lambda rank, hf: rank is None),
        Refusal("rope_interleave", f"(rotary pairs in halves) {INTERLEAVED}", false),
        Refusal("indexer_rope_interleave", f"(the indexer's rotary pairs in halves) {INTERLEAVED}", false),
    )

    def validate(self) -> None:
        super().validate()
        if self.layer_types[0].endswith(SHARED):  # transformers fails on it: no earlier choice to read
            raise UserError(
                "config indexer_types must begin with a 'full' layer: a 'shared' one reads the last full one's"
            )

    def is_moe(self, layer: int) -> bool:
        return self.layer_types[layer].removesuffix(SHARED) == "moe"

    def topk_source(self, layer: int) -> int | None:
        """The last layer before a shared one with its own indexer, whose choice it reads; None in a full layer."""
        if not self.layer_types[layer].endswith(SHARED):
            return None
        return max(i for i in range(layer) if not self.layer_types[i].endswith(SHARED))

    @property
    def topk_sources(self) -> list[int | None]:
        """Each layer's topk_source: whose choice of keys it attends over (None: its own indexer's)."""
        return [self.topk_source(i) for i in range(self.n_layer)]

    def layer_cache(self, layer: int) -> KeysValues | State:
        """DeepSeek-V3.2's, but a shared layer keeps no indexer keys: it has no indexer."""
        cache = super().layer_cache(layer)
        if self.topk_source(layer) is not None and isinstance(cache, KeysValues):
            return replace(cache, rows=())
        return cache


# zai-org/GLM-5's config.json (ai-dynamo/aiconfigurator's copy, model_configs/zai-org--GLM-5_config.json): 78 layers
# (the first 3 dense), hidden 6144, dense width 12288, 64 heads, q_lora_rank 2048, kv_lora_rank 512, qk_nope 192 +
# qk_rope 64, v 256, 256 experts of 2048 (8 a token, one group, norm_topk_prob, routed_scaling_factor 2.5), 1 shared,
# an indexer of 32 heads of 128 keeping 2048 keys in every layer (no indexer_types: all full), vocabulary 154880,
# 202752 positions, rope_theta 1e6, rms_norm_eps 1e-5, untied, eos [154820, 154827, 154829]: GlmMoeDsaConfig's
# defaults but rope_theta and eos. Its multi-token-prediction layer (layer 78) is not part of the model here, nor of
# transformers'.
PRESETS = {"glm-5": GlmMoeDsaConfig(rope_theta=1e6, eos_token_id=(154820, 154827, 154829), name="glm-5")}
ATTENTION_DSA = IndexedLatentAttention(runnable=ATTENTION.runnable, indexer=LightningIndexer(interleaved=True))
MLPS = MlpByKind({**MLP.parts, **{kind + SHARED: mlp for kind, mlp in MLP.parts.items()}})
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.78\..*"
ORDER = ("dense", "moe", "dense" + SHARED, "moe" + SHARED)
DECODER = Decoder(
    PreNorm(ATTENTION_DSA, MLPS), biases="", ignored=IGNORED, kind_order=ORDER, symbols=SYMBOLS + INDEX_SYMBOLS
)


# Its variant: layers that read another's choice (index.shared), which GLM-5's own file does not have.
GLM_5 = PRESETS["glm-5"]
SHARING = replace(GLM_5, layer_types=tuple(k + SHARED * (i % 4 > 0 and i > 3) for i, k in enumerate(GLM_5.layer_types)))
# validate's float64 truth (float64_throughout below): DeepSeek-V3's (RMSNorm, the rotary tables and the router in
# float64) and the indexers of the layers that have one, with GLM-5's interleaved rotary (transformers computes them
# in float32).
NOTE = (
    "  (transformers' float64 GLM-5 computes RMSNorm, the rotary tables, the router and the indexer in float32; its\n"
    "  reference here has them in float64, as families/glm_moe_dsa/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import apply_rotary_pos_emb_interleave

    deepseek_v3_reference.float64_throughout(reference, model, torch)
    own = sum(source is None for source in model.config.topk_sources)
    float64_indexers(reference, torch, apply_rotary_pos_emb_interleave, own)


RECORD = dict(config=GlmMoeDsaConfig, presets=PRESETS, label="GLM-5", variants=(SHARING,))
ARCHITECTURE = composed(
    "glm_moe_dsa", DECODER, DsaFormulas, float64_reference=float64_throughout, float64_note=NOTE, **RECORD
)
