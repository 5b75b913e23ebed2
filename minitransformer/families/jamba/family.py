"""Jamba (transformers' JambaForCausalLM): the Llama family's pre-norm block, x + Mixer(RMSNorm(x)), then
x + FeedForward(RMSNorm(x)), where
- the mixer is a Mamba-1 mixer (families/parts/mamba1.py) whose dt, B and C are RMS-normed with gains after x_proj,
  or, once in attn_layer_period layers (at attn_layer_offset), grouped-query attention without positions (no rope);
- the feed-forward is a SwiGLU MLP, or, once in expert_layer_period layers (at expert_layer_offset), k of E SwiGLU
  experts of the same width, each token's gates its softmax probabilities over the E, not renormalised.
Jamba-1.5-Mini's 32 layers: attention in 4, 12, 20 and 28, experts in every odd layer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from ..bamba.family import HybridAttentionFormulas
from ..config import ModelConfig, check_multiple, heads_of_width
from ..keys import ACTIVATION, COUNT, FLAG, LAYER_COUNT, SIZE, TOKENS, TRUTHY, eps, key, unread
from ..mamba.config import Mamba1Shapes, time_step_rank
from ..mamba.family import SYMBOLS as MAMBA_SYMBOLS
from ..mamba2.family import BIASES
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.mamba1 import Mamba1Mixer
from ..parts.mlps import GatedMLP
from ..parts.moe import Mixture, MlpByKind, SoftmaxRouter, SwiGLUExperts
from ..parts.norms import RMSNorm
from . import reference

MAMBA, FULL, MOE = "mamba", "full_attention", "_moe"  # a layer's kind: its mixer, "_moe" where it has experts
DENSE, SPARSE = "dense", "moe"  # its feed-forward
NOT_READ = (
    "is not read by transformers' Jamba (a property there, which it fails to set): give attn_layer_period, "
    "attn_layer_offset, expert_layer_period and expert_layer_offset"
)
OFFSET = replace(COUNT, shape=True)  # a layer index: it says which layers attend, which have experts


def dt_rank(hf: dict, values: dict):
    """mamba_dt_rank, or "auto" (its default): ceil(hidden_size / 16), as JambaConfig's __post_init__ makes it."""
    return time_step_rank({"time_step_rank": hf.get("mamba_dt_rank", "auto")}, values)


@dataclass(frozen=True)
class JambaConfig(Mamba1Shapes, ModelConfig):
    """A Jamba: n_layer pre-norm blocks, each a Mamba-1 mixer of d_inner = mamba_expand D channels or attention (every
    attn_period-th layer from attn_offset), then a SwiGLU of n_inner or E experts of n_inner (every expert_period-th
    from expert_offset)."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_embd: int = key("hidden_size", 4096, SIZE)
    vocab_size: int = key("vocab_size", 65536, SIZE)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    n_inner: int = key("intermediate_size", 14336, SIZE)  # the MLP's width, and each expert's
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)  # the MLP's, the experts' and the conv's
    attn_period: int = key("attn_layer_period", 8, SIZE)
    attn_offset: int = key("attn_layer_offset", 4, OFFSET)
    expert_period: int = key("expert_layer_period", 2, SIZE)
    expert_offset: int = key("expert_layer_offset", 1, OFFSET)
    n_experts: int = key("num_experts", 16, SIZE, aliases=("num_local_experts",))  # E
    top_k: int = key("num_experts_per_tok", 2, SIZE)  # k
    state_size: int = key("mamba_d_state", 16, SIZE)
    conv_kernel: int = key("mamba_d_conv", 4, SIZE)
    expand: int = key("mamba_expand", 2, SIZE)
    dt_rank: int = key("mamba_dt_rank", None, SIZE, read=dt_rank, rule=lambda hf, v: dt_rank({}, v))
    use_conv_bias: bool = key("mamba_conv_bias", True, TRUTHY)
    use_bias: bool = key("mamba_proj_bias", False, FLAG)  # in_proj's and out_proj's
    norm_eps: float = eps("rms_norm_eps", 1e-6)  # every RMSNorm's, the mixer's norms of dt, B and C too
    n_positions: int = key("max_position_embeddings", 262144, SIZE)
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    pad_token_id: int | None = key("pad_token_id", 0, TOKENS)
    qkv_bias: bool = False
    o_bias: bool = False
    sliding_window: None = None
    model_type: str = "jamba"

    what = "a Jamba"
    classes = {"jamba": "JambaForCausalLM"}
    checkpoint_kind = "Jamba model"
    # Read and not refused, since transformers' Jamba computes the same with or without them: use_mamba_kernels,
    # use_mambapy and use_associative_scan (other ways to the same scan), router_aux_loss_coef and
    # output_router_logits (a loss and an output), num_logits_to_keep, attention_dropout and sliding_window (which
    # its eager and SDPA attention do not read).
    refusals = (heads_of_width(32, 4096), *unread(NOT_READ, "layer_types", "layers_block_type"))
    dict_last = ("d_head", "d_ff", "d_inner")

    def validate(self) -> None:
        for period, offset in (("attn_period", "attn_offset"), ("expert_period", "expert_offset")):
            if getattr(self, offset) >= getattr(self, period):
                smaller = f"{self.key(period)}={getattr(self, period)}, as transformers requires"
                raise UserError(f"config {self.key(offset)}={getattr(self, offset)} must be smaller than {smaller}")
        check_multiple(self, "n_embd", "n_head")
        check_multiple(self, "n_head", "n_kv_head")

    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind, as JambaConfig's layers_block_type and layers_num_experts make them: attention where
        i % attn_layer_period == attn_layer_offset, a Mamba-1 mixer elsewhere; "_moe" where i % expert_layer_period ==
        expert_layer_offset and num_experts is more than 1 (transformers' JambaDecoderLayer makes a single expert the
        SwiGLU MLP, with no router)."""
        attends = [i % self.attn_period == self.attn_offset for i in range(self.n_layer)]
        experts = [self.n_experts > 1 and i % self.expert_period == self.expert_offset for i in range(self.n_layer)]
        return tuple((FULL if a else MAMBA) + (MOE if e else "") for a, e in zip(attends, experts))

    @property
    def mlp_types(self) -> tuple[str, ...]:
        """Each layer's feed-forward: experts ("moe") or the SwiGLU MLP ("dense")."""
        return tuple(SPARSE if kind.endswith(MOE) else DENSE for kind in self.layer_types)

    @property
    def routes(self) -> bool:
        """Whether some layer has experts: none where num_experts is 1 (num_experts_per_tok then unread)."""
        return SPARSE in self.mlp_types

    @property
    def d_inner(self) -> int:  # type: ignore[override]
        """The mixer's channels I: mamba_expand x hidden_size."""
        return self.expand * self.n_embd

    @property
    def ssm_act(self) -> str:
        return self.hidden_act

    @property
    def bcdt_norm_eps(self) -> float:
        """The epsilon of the mixer's norms of dt, B and C: rms_norm_eps, as every norm's."""
        return self.norm_eps

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A Mamba layer keeps its conv and scan states, an attention layer its keys and values."""
        return KeysValues(self.n_kv_head, self.d_head) if self.layer_types[layer].startswith(FULL) else self.mixer_state


# ai21labs/AI21-Jamba-1.5-Mini's config.json, as sdpython/experimental-experiment copies it whole
# (experimental_experiment/torch_models/llm_model_helper.py, get_ai21_jamba_15_mini; transformers_version 4.40.2): 32
# layers, hidden 4096, 32 heads over 8 key/value heads, intermediate 14336, attention every 8th layer from 4, 16
# experts every 2nd layer from 1, 2 a token, state 16, conv 4, expand 2, mamba_dt_rank 256, conv bias, no projection
# biases, vocabulary 65,536, 262,144 positions, rms_norm_eps 1e-6, untied, bos 1, eos [2, 518], pad 0. The card's
# 52 B parameters, 12 B active.
# ai21labs/AI21-Jamba-1.5-Large's shapes, as abhibambhaniya/GenZ-LLM-Analyzer quotes its config.json
# (GenZ/Models/Model_sets/misc.py, jamba_1_5_large_config): 72 layers, hidden 8192, 64 heads over 8 key/value heads,
# intermediate 24576, Mini's periods and offsets, 16 experts, 2 a token, state 16, conv 4, expand 2, mamba_dt_rank
# 512, vocabulary 65,536, 262,144 positions; what the quote leaves out (untied, rms_norm_eps, the token ids) as Mini's.
# The card's 398 B parameters, 94 B active.
LARGE: dict[str, Any] = dict(n_layer=72, n_embd=8192, n_head=64, n_kv_head=8, n_inner=24576, dt_rank=512)
PRESETS = {
    "jamba-1.5-mini": JambaConfig(eos_token_id=(2, 518), dt_rank=256, name="jamba-1.5-mini"),
    "jamba-1.5-large": JambaConfig(**LARGE, eos_token_id=(2, 518), name="jamba-1.5-large"),
}

NORM = RMSNorm()
WEIGHTS = ("gate weights W_gate [F, D]", "up weights W_up [F, D]", "down weights W_down [D, F]")
GATE, UP, DOWN = (f"experts' {weights}, E an expert layer" for weights in WEIGHTS)
EXPERTS = SwiGLUExperts(described=(GATE, UP, DOWN))
# JambaTopKRouter: a softmax over the E logits in float32, the top k kept as they are (no renormalisation)
MIXTURE = Mixture(SoftmaxRouter(renormalise=False, module="router"), EXPERTS, note="an expert layer: k experts of E")
FEED_FORWARD = MlpByKind({DENSE: GatedMLP(), SPARSE: MIXTURE}, by="mlp_types")


def block(mixer: Any, name: str) -> PreNorm:
    return PreNorm(mixer, FEED_FORWARD, NORM, ("input_layernorm", name, "pre_ff_layernorm", "feed_forward"))


MAMBA_BLOCK, ATTENTION_BLOCK = block(Mamba1Mixer(gains=True), "mamba"), block(GroupedQueryAttention(), "self_attn")
BLOCKS = {MAMBA: MAMBA_BLOCK, MAMBA + MOE: MAMBA_BLOCK, FULL: ATTENTION_BLOCK, FULL + MOE: ATTENTION_BLOCK}
EMBEDDING = TokenEmbedding(equation="x = W_te[ids]  (no positions: the scans are in order, the attention has no rope)")
SYMBOLS = MAMBA_SYMBOLS + (
    "; attention: H query heads of dh over Hkv key/value heads (G = H/Hkv), t attended; F the MLP's and each expert's "
    "width, E experts, k a token, Te routed to expert e"
)
JAMBA = Decoder(
    ByKind(BLOCKS),
    NORM,
    EMBEDDING,
    final_norm="final_layernorm",
    biases=BIASES,
    symbols=SYMBOLS,
    kind_order=tuple(BLOCKS),
)


class JambaFormulas(HybridAttentionFormulas):
    """Bamba's closed forms (a generation summed pass by pass), count's notes the selective scan's."""

    def mlp_terms(self, c: Any) -> tuple[str, str]:
        """The first attention layer's feed-forward (what the comparison of attention and weights reads)."""
        first = next((kind for kind in c.layer_types if kind.startswith(FULL)), FULL)
        if first.endswith(MOE):
            return "D E + 3 k D F", f"E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}"
        return "3 D F", f"F = {c.d_ff:,}"

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        layers = sum(kind.startswith(MAMBA) for kind in config.layer_types)
        return Mamba1Mixer().scan_notes(config, layers, n_prompt, n_new, "Mamba-1") if layers else []


ARCHITECTURE = composed("jamba", JAMBA, JambaFormulas, reference, config=JambaConfig, presets=PRESETS, label="Jamba")
