"""Nemotron-H's config: each field under its config.json key with transformers' NemotronHConfig default, and the
presets of published models, from their config.json."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...engine.kvcache import NOTHING, KeysValues, State
from ...errors import UserError
from ..config import ModelConfig, check_multiple
from ..deepseek_v3.config import check_router
from ..keys import (
    ACTIVATION,
    FLAG,
    NUMBER,
    POSITIVE,
    SCALE,
    SIZE,
    TOKENS,
    TRUTHY,
    Fixed,
    Key,
    Kind,
    eps,
    key,
    layer_kinds,
    take,
    unnoted,
)
from ..mamba2.config import MixerShapes

# Each layer is one of four kinds (transformers' layers_block_type; its hybrid_override_pattern writes them M, *, -
# and E; older configs say "mamba" and "attention"), named here as the rest of minitransformer names layers.
MAMBA, ATTN = "mamba", "full_attention"
KINDS = {"linear_attention": MAMBA, MAMBA: MAMBA, ATTN: ATTN, "attention": ATTN, "mlp": "mlp", "moe": "moe"}
PATTERN = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}
WRITTEN = {"mamba": "mamba", "full_attention": "attention", "mlp": "mlp", "moe": "moe"}  # as layers_block_type
LAYERS = layer_kinds(*KINDS, named=KINDS, written=WRITTEN)
DEFAULT_LAYERS = ["linear_attention", "moe", "full_attention", "mlp"]  # NemotronHConfig's, where a config gives none
LETTERS = Kind(
    "letters of " + "".join(PATTERN),
    lambda p: isinstance(p, str) and bool(p) and set(p) <= set(PATTERN),
    shape=True,
    read=lambda p: tuple(PATTERN[c] for c in p),
)
HYBRID_PATTERN = Key("hybrid_override_pattern", None, LETTERS.or_null())
ROUTED = Key("n_routed_experts", 8, SIZE, aliases=("num_local_experts",))
TOP_K = Key("num_experts_per_tok", 2, SIZE)
MOE_INNER = Key("moe_intermediate_size", 7688, SIZE)
SHARED_INNER = Key("moe_shared_expert_intermediate_size", 7688, SIZE)


def pattern_or_default(hf: dict, fields: Mapping) -> Any:
    """Each layer's kind where the file names none (layers_block_type, layer_types): the hybrid_override_pattern's
    letters, else transformers' default of four layers."""
    pattern = HYBRID_PATTERN.get(hf)
    if pattern is None:
        take(hf, "layers_block_type", DEFAULT_LAYERS, shape=True)
    return DEFAULT_LAYERS if pattern is None else pattern


def experts(entry: Key):
    """A key of the routed experts, read where some layer is "moe"; none elsewhere."""
    return lambda hf, values: entry.get(hf) if "moe" in values["layer_types"] else None


def widths(entry: Key):
    """A width of the experts, read where some layer is "moe"; elsewhere as the file has it, no default taken (its
    default changes nothing there)."""
    return lambda hf, values: (
        entry.get(hf) if "moe" in values["layer_types"] else unnoted(hf, entry.json, entry.default)
    )


def experts_keys(config) -> dict:
    return (
        {} if config.n_experts is None else {"n_routed_experts": config.n_experts, "num_experts_per_tok": config.top_k}
    )


@dataclass(frozen=True)
class NemotronHConfig(MixerShapes, ModelConfig):
    """A Nemotron-H: every layer x + Mixer(RMSNorm(x)), its mixer one of four kinds (`layer_types`): a Mamba-2 mixer
    (families/parts/mamba2.py), grouped-query attention without positions (no rotary: the Mamba layers carry the
    order), a squared-ReLU MLP, or a mixture of squared-ReLU experts (DeepSeek-V3's sigmoid router) with a shared
    expert."""

    layer_types: tuple[str, ...] = key(  # each layer's: mamba, full_attention, mlp or moe
        "layers_block_type",
        None,
        LAYERS,
        aliases=("layer_types",),
        rule=pattern_or_default,
        reads=(HYBRID_PATTERN,),
        dict_key="kinds",
    )
    n_embd: int = key("hidden_size", 4096, SIZE)
    vocab_size: int = key("vocab_size", 131072, SIZE)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    head_dim: int = key("head_dim", 128, SIZE, aliases=("attention_head_dim",))
    n_inner: int = key("intermediate_size", 21504, SIZE)  # the MLP layers' width
    mlp_act: str = key("mlp_hidden_act", "relu2", ACTIVATION)  # the MLPs' and experts' activation
    mlp_bias: bool = key("mlp_bias", False, FLAG)
    ssm_heads: int = key("mamba_num_heads", 128, SIZE)
    ssm_head_dim: int = key("mamba_head_dim", 64, SIZE)
    state_size: int = key("ssm_state_size", 128, SIZE)
    # (transformers' NemotronHConfig's own names for the keys older configs spelled mamba_...)
    n_groups: int = key("n_groups", 8, SIZE, aliases=("mamba_n_groups",))
    conv_kernel: int = key("conv_kernel", 4, SIZE, aliases=("mamba_d_conv",))
    chunk_size: int = key("chunk_size", 128, POSITIVE, aliases=("mamba_chunk_size",))
    use_bias: bool = key("use_bias", False, FLAG)  # the Mamba layers' in_proj and out_proj
    use_conv_bias: bool = key("use_conv_bias", True, TRUTHY, aliases=("mamba_conv_bias",))
    ssm_act: str = key("mamba_hidden_act", "silu", ACTIVATION)  # the conv's activation
    # dt's lower bound in the chunked scan: transformers clamps it to [min, inf) there
    time_step_min: float = key("time_step_min", 0.001, NUMBER, aliases=("mamba_dt_min",))
    # the experts' (None where no layer is "moe")
    n_experts: int | None = key(
        "n_routed_experts", 8, SIZE.or_null(), read=experts(ROUTED), reads=(ROUTED,), write=experts_keys
    )
    top_k: int | None = key(
        "num_experts_per_tok", 2, SIZE.or_null(), read=experts(TOP_K), reads=(TOP_K,), write=lambda c: {}
    )
    moe_inner: int = key("moe_intermediate_size", 7688, SIZE, read=widths(MOE_INNER), reads=(MOE_INNER,))
    shared_inner: int = key(
        "moe_shared_expert_intermediate_size", 7688, SIZE, read=widths(SHARED_INNER), reads=(SHARED_INNER,)
    )
    moe_latent: int | None = key("moe_latent_size", None, SIZE.or_null())  # the experts' latent width (None: D)
    n_group: int = key("n_group", 1, POSITIVE)
    topk_group: int = key("topk_group", 1, POSITIVE)
    norm_topk_prob: bool = key("norm_topk_prob", True, TRUTHY)
    routed_scaling_factor: float = key("routed_scaling_factor", 1.0, SCALE)
    norm_eps: float = eps("layer_norm_epsilon", 1e-5)
    n_positions: int = key("max_position_embeddings", 4096, SIZE)
    # ties nothing: NemotronHForCausalLM's _tied_weights_keys is empty (its lm_head is its own)
    tie_word_embeddings: bool = key("tie_word_embeddings", Fixed(False))
    sliding_window: None = None
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "nemotron_h"

    qkv_bias: ClassVar[bool] = False  # its attention has no biases, whatever attention_bias says (see below)
    o_bias: ClassVar[bool] = False
    what = "a Nemotron-H"
    classes = {"nemotron_h": "NemotronHForCausalLM"}
    checkpoint_kind = "Nemotron-H model"  # what messages call a checkpoint of it
    # Read and not refused, since transformers' NemotronH computes the same with or without them: its attention has
    # no biases and no positions whatever attention_bias, rope_theta and partial_rotary_factor say, and its causal
    # mask takes no sliding_window; time_step_limit, expand, mamba_proj_bias and n_shared_experts are not read by its
    # modeling code (the mixer's width is mamba_num_heads x mamba_head_dim, its dt bound time_step_min, the shared
    # expert's width moe_shared_expert_intermediate_size); time_step_max and _floor, initializer_range and
    # rescale_prenorm_residual only initialise weights; residual_in_fp32 and mamba_ssm_cache_dtype keep float32,
    # which everything is here; num_logits_to_keep only saves work; num_nextn_predict_layers names
    # multi-token-prediction layers that transformers does not build (it skips a checkpoint's mtp.* tensors, as the
    # loader here does): the logits are the base model's.
    refusals = ()
    dict_last = ("n_layer", "d_head", "d_ff", "d_inner", "layer_types")

    def validate(self) -> None:
        self.check_mixer()
        check_multiple(self, "n_head", "n_kv_head")
        if "moe" in self.layer_types:
            if self.n_experts is None or self.top_k is None:
                raise UserError("config n_routed_experts and num_experts_per_tok: a model of moe layers needs both")
            check_router(self)

    @property
    def n_layer(self) -> int:  # type: ignore[override]
        return len(self.layer_types)

    @property
    def d_latent(self) -> int:
        """The width the routed experts work in: moe_latent_size, or D."""
        return self.moe_latent or self.n_embd

    @property
    def time_step_limit(self) -> tuple[float, float]:  # type: ignore[override]
        """transformers' NemotronH mixer clamps dt to [time_step_min, inf) in its chunked scan."""
        return (self.time_step_min, math.inf)

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """The mixer's symbols, and the experts': Fe each routed expert's width, Fs the shared expert's, Dl the width
        the routed experts read and write (moe_latent_size, or D)."""
        return {**self.mixer_symbols, "Fe": self.moe_inner, "Fs": self.shared_inner, "Dl": self.d_latent}

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A Mamba layer keeps its conv and scan states, an attention layer its keys and values, an MLP or a mixture
        nothing."""
        kind = self.layer_types[layer]
        if kind == "mamba":
            return self.mixer_state
        return KeysValues(self.n_kv_head, self.d_head) if kind == "full_attention" else NOTHING


# nvidia/Nemotron-H-8B-Base-8K, its config.json (as transcribed in NVIDIA-NeMo/Megatron-Bridge's tests,
# tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py, "nemotronh_8b_config_dict"): 52 layers from
# hybrid_override_pattern M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M- (24 Mamba, 4 attention, 24 MLP), hidden
# 4096, 32 heads of 128 over 8 key/value heads, MLP 21504 (relu2), 128 Mamba heads of 64, state 128, 8 groups, conv 4,
# chunk 128, vocabulary 131072, 8192 positions, layer_norm_epsilon 1e-5, untied, no biases but the conv's, bos 1,
# eos 2. No MoE layers (its routed-expert fields are unused).
_NEMOTRON_H_8B = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, its config.json (as transcribed in jax-llm-examples' nemotron3 tests,
# nemotron3/tests/test_lora.py's NEMOTRON3_30B_JSON in jeffreypike's fork of jax-ml's, and alike in other ports): 52 layers from hybrid_override_pattern
# MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 Mamba, 23 MoE, 6 attention), hidden 2688, 32 heads of 128
# over 2 key/value heads, 64 Mamba heads of 64, state 128, 8 groups, conv 4, chunk 128, 128 routed experts of 1856 (6 a
# token; n_group 1, topk_group 1, norm_topk_prob, routed_scaling_factor 2.5) and a shared expert of 3712 (relu2),
# vocabulary 131072, 262144 positions, layer_norm_epsilon 1e-5, time_step_min 0.001, untied, bos 1, eos 2.
_NEMOTRON_3_NANO = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NANO_MOE: dict[str, Any] = dict(n_experts=128, top_k=6, moe_inner=1856, shared_inner=3712, routed_scaling_factor=2.5)
NANO: dict[str, Any] = dict(n_embd=2688, n_kv_head=2, n_inner=1856, ssm_heads=64, n_positions=262144, **NANO_MOE)
H_8B: dict[str, Any] = dict(n_experts=None, top_k=None, n_positions=8192)
PRESETS: dict[str, NemotronHConfig] = {
    name: NemotronHConfig(layer_types=LETTERS.read(letters), **more, name=name)
    for name, letters, more in (
        ("nemotron-h-8b", _NEMOTRON_H_8B, H_8B),
        ("nemotron-3-nano-30b-a3b", _NEMOTRON_3_NANO, NANO),
    )
}
