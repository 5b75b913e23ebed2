"""Granite 4.0-H (transformers' GraniteMoeHybridForCausalLM): Bamba's layers, a Mamba-2 mixer or attention, with
Granite's feed-forward after each: k of E SwiGLU experts (the top k of the router's logits, a softmax over those k,
each expert's gate and up one product of a 3-D tensor) beside a shared SwiGLU on every token, or that shared MLP
alone where there are no experts; and its µP multipliers: the embeddings times embedding_multiplier, each branch
times residual_multiplier before its add, the scores times attention_multiplier (in place of dh^-1/2), the logits over
logits_scaling. Attention turns q and k only where position_embedding_type is "rope" (NoPE otherwise)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..bamba import reference
from ..bamba.family import FULL, MAMBA, NORM, SYMBOLS, BambaConfig, HybridAttentionFormulas
from ..keys import COUNT, FLAG, NUMBER, SIZE, Fixed, eps, every, key, layer_kinds
from ..llama.config import preset
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder, LogitsScale, TokenEmbedding
from ..parts.family import composed
from ..parts.mamba2 import Mamba2Mixer
from ..parts.moe import FusedSwiGLUExperts, Mixture, SharedExpert, TopKSoftmaxRouter
from ..qwen35.family import FeedForward
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys

KINDS = {"linear_attention": MAMBA, "mamba": MAMBA, "full_attention": FULL, "attention": FULL}  # old names too
LAYERS = layer_kinds(*KINDS, named=KINDS, written={MAMBA: "linear_attention"})
NONE_IF_ZERO = replace(COUNT.or_null(), shape=True, read=lambda v: v or None, write=lambda v: v or 0)


@dataclass(frozen=True)
class GraniteMoeHybridConfig(BambaConfig):
    """Bamba's config with GraniteMoeHybridConfig's defaults, its experts, the shared MLP's width, µP multipliers."""

    layer_types: tuple[str, ...] = key("layer_types", None, LAYERS, aliases=("layers_block_type",), rule=every(MAMBA))
    n_kv_head: int = key("num_key_value_heads", None, SIZE.or_null(), follows="n_head")
    vocab_size: int = key("vocab_size", 32000, SIZE)
    n_inner: int = key("intermediate_size", 11008, SIZE)  # an expert's width
    mlp_bias: bool = key("mlp_bias", Fixed(False))
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    n_positions: int = key("max_position_embeddings", 2048, SIZE)
    partial_rotary_factor: float = 1.0
    n_experts: int | None = key("num_local_experts", 8, NONE_IF_ZERO)  # 0: dense, the shared MLP alone (E, k None)
    top_k: int | None = key("num_experts_per_tok", 2, NONE_IF_ZERO)
    shared_inner: int = key("shared_intermediate_size", 1024, SIZE)
    embedding_multiplier: float = key("embedding_multiplier", 1.0, NUMBER)
    residual_multiplier: float = key("residual_multiplier", 1.0, NUMBER)
    attention_multiplier: float = key("attention_multiplier", 1.0, NUMBER)
    logits_scaling: float = key("logits_scaling", 1.0, NUMBER)
    position_embedding_type: str | None = key("position_embedding_type", None)  # "rope" turns q and k; else NoPE
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    model_type: str = "granitemoehybrid"

    what = "a Granite 4.0-H"
    classes = {"granitemoehybrid": "GraniteMoeHybridForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)
    refusals = ()

    @property
    def is_moe(self) -> bool:
        return self.n_experts is not None

    @property
    def d_ff(self) -> int:
        """An expert's width, or in a dense model the shared MLP's."""
        return self.n_inner if self.is_moe else self.shared_inner

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {**self.mixer_symbols, "Fe": self.n_inner, "Fs": self.shared_inner}

    def rope(self, layer: int) -> Rope | None:
        """An attention layer turns every number of its heads where position_embedding_type is "rope"; NoPE else."""
        rotates = self.position_embedding_type == "rope" and self.layer_types[layer] == FULL
        return Rope(self.d_head, self.rope_theta, self.rope_scaling, self.n_positions) if rotates else None


# Granite 4.0-H's published config.json files, not seen here (the Hub is out of reach); what was, and where from.
# ibm-granite/granite-4.0-h-small: hidden 4096, 40 layers (36 Mamba-2, 4 attention), 32 heads over 8 key/value heads,
# 72 experts of 768, 10 a token, a shared MLP of 1536, state 128, vocabulary 100,352, tied, as two GitHub documents
# quote its config.json ("9.5 Worked example: Granite-4.0-H-Small", and a fixture "trimmed from the real published
# file"); its Mamba heads (128 of 64) and its attention layers' places are its siblings' files'.
# ibm-granite/granite-4.0-h-tiny: hidden 1536, 12 heads over 4, 64 experts of 512, 6 a token, a shared MLP of 1024, 48
# Mamba heads of 64, attention at 5, 15, 25, 35, as an importer's fixture quotes its config.json. Both: the others
# Mamba-2 (heads of mamba_expand 2 D / Hs, 1 group, conv 4, chunk 256), NoPE (no position_embedding_type), 131,072
# positions; not seen: the µP multipliers (GraniteMoeHybridConfig's 1.0: they change no count), rms_norm_eps, the token
# ids. 32.2 B parameters, 9.1 B active, and 6.9 B, 1.4 B active: the cards' 32B (9B active) and 7B (1B active).
KINDS_40 = tuple(FULL if i in (5, 15, 25, 35) else MAMBA for i in range(40))
H_SERIES = dict(layer_types=KINDS_40, state_size=128, tie_word_embeddings=True)


def granite(name: str, D: int, H: int, Hkv: int, Fe: int, Fs: int, E: int, k: int, Hs: int) -> Any:
    experts = dict(shared_inner=Fs, n_experts=E, top_k=k, ssm_heads=Hs, ssm_head_dim=2 * D // Hs)
    return preset(GraniteMoeHybridConfig, name, 40, H, Hkv, D, Fe, 100352, 131072, **H_SERIES, **experts)


PRESETS = {
    "granite-4.0-h-small": granite("granite-4.0-h-small", 4096, 32, 8, 768, 1536, 72, 10, 128),
    "granite-4.0-h-tiny": granite("granite-4.0-h-tiny", 1536, 12, 4, 512, 1024, 64, 6, 48),
}

LINEARS = ("input_linear", "output_linear")
SHARED_WEIGHTS = "shared MLP's weights W_gu_s [2Fs, D] (gate and up), W_down_s [D, Fs]"
SHARED = SharedExpert(module="shared_mlp", width="shared_inner", fused=LINEARS, described=SHARED_WEIGHTS)
EXPERTS = FusedSwiGLUExperts(module="block_sparse_moe", names=LINEARS, width="n_inner", F="Fe")
MOE = Mixture(TopKSoftmaxRouter(module="block_sparse_moe.router.layer", bias=False), EXPERTS, SHARED)
FFN = FeedForward(SHARED, MOE)  # the shared MLP alone in a dense model (no experts)


def block(mixer: Any, name: str) -> PreNorm:
    names = ("input_layernorm", name, "post_attention_layernorm", "")  # the feed-forward's modules: the layer's own
    return PreNorm(mixer, FFN, NORM, names, residual="residual_multiplier")


ATTENTION = GroupedQueryAttention(scale="attention_multiplier")
BLOCKS = ByKind({MAMBA: block(Mamba2Mixer(), "mamba"), FULL: block(ATTENTION, "self_attn")})
EMBEDDING, LOGITS = TokenEmbedding(multiplier="embedding_multiplier"), LogitsScale("logits_scaling", divide=True)
MORE = "; E experts, k a token, Te routed to expert e, Fe an expert's width, Fs the shared MLP's"
GRANITE = Decoder(
    BLOCKS, NORM, EMBEDDING, after_logits=LOGITS, symbols=SYMBOLS + MORE, kind_order=(MAMBA, FULL), decode_first=True
)


class GraniteFormulas(HybridAttentionFormulas):
    def mlp_terms(self, c: Any) -> tuple[str, str]:
        shared = f"Fs = {c.shared_inner:,}"
        if not c.is_moe:
            return "3 D Fs", shared
        return "D E + 3 k D Fe + 3 D Fs", f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.n_inner:,}, {shared}"


ARCHITECTURE = composed(
    "granitemoehybrid",
    GRANITE,
    GraniteFormulas,
    reference,
    config=GraniteMoeHybridConfig,
    presets=PRESETS,
    label="Granite 4.0-H",
)
