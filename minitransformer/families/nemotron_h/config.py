"""Nemotron-H's config, read from a Hugging Face config.json (transformers' NemotronHConfig, with its defaults), and the
presets of published models, from their config.json."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import ClassVar

from ...engine.kvcache import NOTHING, KeysValues, State
from ...errors import UserError
from ..config import ModelConfig, check_activation, check_dtype, either, flag, listed, number, token_ids, unnoted
from ..mamba2.config import MixerShapes

NEMOTRON_H_MODEL_TYPES = ("nemotron_h",)
# Each layer is one of four kinds (transformers' layers_block_type; its hybrid_override_pattern writes them M, *, -
# and E; older configs say "mamba" and "attention"), named here as the rest of minitransformer names layers.
KINDS = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "full_attention",
         "attention": "full_attention", "mlp": "mlp", "moe": "moe"}  # fmt: skip
PATTERN = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}
DEFAULT_LAYERS = ["linear_attention", "moe", "full_attention", "mlp"]  # NemotronHConfig's, where a config gives none
# transformers' NemotronHConfig's own names for the config.json keys older configs used
LEGACY_KEYS = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel", "mamba_dt_min": "time_step_min",
               "mamba_conv_bias": "use_conv_bias", "mamba_chunk_size": "chunk_size"}  # fmt: skip


@dataclass(frozen=True)
class NemotronHConfig(MixerShapes, ModelConfig):
    """A Nemotron-H: every layer x + Mixer(RMSNorm(x)), its mixer one of four kinds (`kinds`): a Mamba-2 mixer
    (families/parts/mamba2.py), grouped-query attention without positions (no rotary: the Mamba layers carry the
    order), a squared-ReLU MLP, or a mixture of squared-ReLU experts (DeepSeek-V3's sigmoid router) with a shared
    expert."""

    kinds: tuple[str, ...]  # each layer's: mamba, full_attention, mlp or moe
    n_embd: int
    vocab_size: int
    n_head: int = 32
    n_kv_head: int = 8
    head_dim: int = 128
    n_inner: int = 21504  # intermediate_size: the MLP layers' width
    mlp_act: str = "relu2"  # mlp_hidden_act: the MLPs' and experts' activation
    mlp_bias: bool = False
    ssm_heads: int = 128  # mamba_num_heads
    ssm_head_dim: int = 64  # mamba_head_dim
    state_size: int = 128  # ssm_state_size
    n_groups: int = 8
    conv_kernel: int = 4
    chunk_size: int = 128
    use_bias: bool = False  # the Mamba layers' in_proj and out_proj
    use_conv_bias: bool = True
    ssm_act: str = "silu"  # mamba_hidden_act: the conv's activation
    time_step_min: float = 0.001  # dt's lower bound in the chunked scan: transformers clamps it to [min, inf) there
    n_experts: int | None = 8  # n_routed_experts (None where no layer is "moe")
    top_k: int | None = 2  # num_experts_per_tok
    moe_inner: int = 7688  # moe_intermediate_size: each routed expert's width
    shared_inner: int = 7688  # moe_shared_expert_intermediate_size
    moe_latent: int | None = None  # moe_latent_size: experts work in a latent of this width (None: D)
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    layer_norm_epsilon: float = 1e-5
    n_positions: int = 4096
    tie_word_embeddings: bool = False
    sliding_window: None = None
    bos_token_id: int | None = 1
    eos_token_id: int | tuple[int, ...] | None = 2
    model_type: str = "nemotron_h"
    name: str = field(default="nemotron_h", compare=False)

    family = "nemotron_h"
    qkv_bias: ClassVar[bool] = False  # its attention has no biases, whatever attention_bias says (from_hf_dict)
    o_bias: ClassVar[bool] = False
    json_keys = ModelConfig.json_keys | {
        "kinds": "layers_block_type", "mlp_act": "mlp_hidden_act", "ssm_heads": "mamba_num_heads",
        "ssm_head_dim": "mamba_head_dim", "state_size": "ssm_state_size", "ssm_act": "mamba_hidden_act",
        "n_experts": "n_routed_experts", "moe_inner": "moe_intermediate_size",
        "shared_inner": "moe_shared_expert_intermediate_size", "moe_latent": "moe_latent_size",
    }  # fmt: skip

    def __post_init__(self) -> None:
        if not self.kinds or any(k not in ("mamba", "full_attention", "mlp", "moe") for k in self.kinds):
            raise UserError(f"config layers_block_type must name each layer mamba, full_attention, mlp or moe, not "
                            f"{list(self.kinds)!r}")  # fmt: skip
        self.require_positive("n_embd", "vocab_size", "n_head", "n_kv_head", "head_dim", "n_inner", "chunk_size",
                              "n_positions")  # fmt: skip
        self.check_mixer()
        if self.n_head % self.n_kv_head:
            raise UserError(f"config num_attention_heads={self.n_head} is not a multiple of "
                            f"num_key_value_heads={self.n_kv_head}")  # fmt: skip
        for key in ("mlp_act", "ssm_act"):
            check_activation(self.key(key), getattr(self, key))
        if "moe" in self.kinds:
            self._check_experts()

    def _check_experts(self) -> None:
        self.require_positive("n_experts", "top_k", "moe_inner", "shared_inner", "n_group", "topk_group")
        self.require_positive_number("routed_scaling_factor")
        E, k = self.n_experts or 0, self.top_k or 0
        if self.moe_latent is not None:
            self.require_positive("moe_latent")
        if k > E:
            raise UserError(f"config num_experts_per_tok={k} exceeds n_routed_experts={E}")
        if E % self.n_group:
            raise UserError(f"config n_routed_experts={E} is not a multiple of n_group={self.n_group}")
        if self.topk_group > self.n_group:
            raise UserError(f"config topk_group={self.topk_group} exceeds n_group={self.n_group}")
        if E // self.n_group < 2:
            raise UserError(f"config n_group={self.n_group} leaves fewer than 2 experts a group (the router sums each "
                            f"group's 2 best scores)")  # fmt: skip
        if k > self.topk_group * E // self.n_group:
            raise UserError(f"config num_experts_per_tok={k} exceeds the experts of topk_group={self.topk_group} "
                            f"groups")  # fmt: skip

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "nemotron_h") -> NemotronHConfig:
        """Read a transformers NemotronHConfig dict (as config.json holds it), with NemotronHConfig's defaults."""
        model_type = hf.get("model_type")
        if model_type not in NEMOTRON_H_MODEL_TYPES:
            raise UserError(f"config model_type={model_type!r} is not a Nemotron-H "
                            f"({', '.join(NEMOTRON_H_MODEL_TYPES)})")  # fmt: skip
        check_dtype(hf)
        if hf.get("quantization_config"):
            raise UserError("config quantization_config is not supported: dequantize the weights first")
        hf = {new: hf[old] for old, new in LEGACY_KEYS.items() if old in hf and new not in hf} | hf
        # Read and not refused, since transformers' NemotronH computes the same with or without them: its attention
        # has no biases and no positions whatever attention_bias, rope_theta and partial_rotary_factor say, and its
        # causal mask takes no sliding_window; time_step_limit, expand, mamba_proj_bias and n_shared_experts are not
        # read by its modeling code (the mixer's width is mamba_num_heads x mamba_head_dim, its dt bound
        # time_step_min, the shared expert's width moe_shared_expert_intermediate_size); time_step_max and _floor,
        # initializer_range and rescale_prenorm_residual only initialise weights; residual_in_fp32 and
        # mamba_ssm_cache_dtype keep float32, which everything is here; num_logits_to_keep only saves work;
        # tie_word_embeddings ties nothing (NemotronHForCausalLM's _tied_weights_keys is empty: its lm_head is its own);
        # num_nextn_predict_layers names multi-token-prediction layers that transformers does not build (it skips a
        # checkpoint's mtp.* tensors, as the loader here does): the logits are the base model's.
        kinds = _layer_kinds(hf)
        moe = "moe" in kinds
        # The experts' keys of a model without a "moe" layer are read as they are, and their defaults change nothing
        read = hf.get if moe else partial(unnoted, hf)
        eos = hf.get("eos_token_id", 2)
        return cls(
            kinds=kinds, n_embd=hf.get("hidden_size", 4096), vocab_size=hf.get("vocab_size", 131072),
            n_head=hf.get("num_attention_heads", 32), n_kv_head=hf.get("num_key_value_heads", 8) or
            hf.get("num_attention_heads", 32), head_dim=hf.get("head_dim", 128),
            n_inner=hf.get("intermediate_size", 21504), mlp_act=hf.get("mlp_hidden_act", "relu2"),
            mlp_bias=flag(hf, "mlp_bias"), ssm_heads=hf.get("mamba_num_heads", 128),
            ssm_head_dim=hf.get("mamba_head_dim", 64), state_size=hf.get("ssm_state_size", 128),
            n_groups=hf.get("n_groups", 8), conv_kernel=hf.get("conv_kernel", 4), chunk_size=hf.get("chunk_size", 128),
            use_bias=flag(hf, "use_bias"), use_conv_bias=bool(hf.get("use_conv_bias", True)),
            ssm_act=hf.get("mamba_hidden_act", "silu"), time_step_min=number(hf, "time_step_min", 0.001),
            n_experts=either(hf, ("n_routed_experts", "num_local_experts"), 8) if moe else None,
            top_k=hf.get("num_experts_per_tok", 2) if moe else None,
            moe_inner=read("moe_intermediate_size", 7688),
            shared_inner=read("moe_shared_expert_intermediate_size", 7688), moe_latent=hf.get("moe_latent_size"),
            n_group=hf.get("n_group", 1), topk_group=hf.get("topk_group", 1),
            norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
            routed_scaling_factor=number(hf, "routed_scaling_factor", 1.0),
            layer_norm_epsilon=number(hf, "layer_norm_epsilon", 1e-5),
            n_positions=hf.get("max_position_embeddings", 4096), tie_word_embeddings=False,
            bos_token_id=hf.get("bos_token_id", 1), eos_token_id=token_ids(eos),
            model_type=model_type, name=name,
        )  # fmt: skip

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (NemotronHConfig's keys; the layers as its
        layers_block_type names them)."""
        names = {"mamba": "mamba", "full_attention": "attention", "mlp": "mlp", "moe": "moe"}
        experts = {} if self.n_experts is None else {"n_routed_experts": self.n_experts,
                                                     "num_experts_per_tok": self.top_k}  # fmt: skip
        return {
            "architectures": ["NemotronHForCausalLM"], "model_type": self.model_type,
            "layers_block_type": [names[k] for k in self.kinds], "hidden_size": self.n_embd,
            "vocab_size": self.vocab_size, "num_attention_heads": self.n_head, "num_key_value_heads": self.n_kv_head,
            "head_dim": self.head_dim, "intermediate_size": self.n_inner, "mlp_hidden_act": self.mlp_act,
            "mlp_bias": self.mlp_bias, "mamba_num_heads": self.ssm_heads, "mamba_head_dim": self.ssm_head_dim,
            "ssm_state_size": self.state_size, "n_groups": self.n_groups, "conv_kernel": self.conv_kernel,
            "chunk_size": self.chunk_size, "use_bias": self.use_bias, "use_conv_bias": self.use_conv_bias,
            "mamba_hidden_act": self.ssm_act, "time_step_min": self.time_step_min, **experts,
            "moe_intermediate_size": self.moe_inner, "moe_shared_expert_intermediate_size": self.shared_inner,
            "moe_latent_size": self.moe_latent, "n_group": self.n_group, "topk_group": self.topk_group,
            "norm_topk_prob": self.norm_topk_prob, "routed_scaling_factor": self.routed_scaling_factor,
            "layer_norm_epsilon": self.layer_norm_epsilon, "max_position_embeddings": self.n_positions,
            "tie_word_embeddings": False, "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }  # fmt: skip

    @property
    def checkpoint_kind(self) -> str:
        return "Nemotron-H model"

    @property
    def n_layer(self) -> int:  # type: ignore[override]
        return len(self.kinds)

    @property
    def d_head(self) -> int:
        return self.head_dim

    @property
    def d_ff(self) -> int:
        return self.n_inner

    @property
    def d_latent(self) -> int:
        """The width the routed experts work in: moe_latent_size, or D."""
        return self.moe_latent or self.n_embd

    @property
    def time_step_limit(self) -> tuple[float, float]:  # type: ignore[override]
        """transformers' NemotronH mixer clamps dt to [time_step_min, inf) in its chunked scan."""
        return (self.time_step_min, math.inf)

    @property
    def active_experts(self) -> int | None:
        return self.top_k

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """The mixer's symbols, and the experts': Fe each routed expert's width, Fs the shared expert's, Dl the width
        the routed experts read and write (moe_latent_size, or D)."""
        return {**self.mixer_symbols, "Fe": self.moe_inner, "Fs": self.shared_inner, "Dl": self.d_latent}

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind: mamba, full_attention, mlp or moe."""
        return self.kinds

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A Mamba layer keeps its conv and scan states, an attention layer its keys and values, an MLP or a mixture
        nothing."""
        kind = self.kinds[layer]
        if kind == "mamba":
            return self.mixer_state
        return KeysValues(self.n_kv_head, self.d_head) if kind == "full_attention" else NOTHING

    def prefix(self, n_layer: int) -> NemotronHConfig:
        """The same model cut to its first n_layer layers (count's twin), its experts' fields kept as they are."""
        return replace(self, kinds=self.kinds[:n_layer])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kinds"] = list(self.kinds)
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, **d, "n_layer": self.n_layer, "d_head": self.d_head, "d_ff": self.d_ff,
                "d_inner": self.d_inner, "layer_types": list(self.kinds)}  # fmt: skip


def _layer_kinds(hf: dict) -> tuple[str, ...]:
    """Each layer's kind, as transformers reads them: layers_block_type (or layer_types), else the
    hybrid_override_pattern's letters, else its default of four layers."""
    pattern = unnoted(hf, "hybrid_override_pattern")
    listed = either(hf, ("layers_block_type", "layer_types"))
    if listed is None and pattern is None:  # neither: transformers' default of four layers, a default taken
        listed = hf.get("layers_block_type", DEFAULT_LAYERS) or DEFAULT_LAYERS
    if listed is not None:
        if not isinstance(listed, list) or any(k not in KINDS for k in listed):
            raise UserError(f"config layers_block_type must be a list of {', '.join(KINDS)}, not {listed!r}")
        return tuple(KINDS[k] for k in listed)
    if not isinstance(pattern, str) or not pattern or any(c not in PATTERN for c in pattern):
        raise UserError(f"config hybrid_override_pattern must be letters of {''.join(PATTERN)}, not {pattern!r}")
    return tuple(PATTERN[c] for c in pattern)


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
PRESETS: dict[str, NemotronHConfig] = {
    "nemotron-h-8b": NemotronHConfig(
        kinds=tuple(PATTERN[c] for c in _NEMOTRON_H_8B),
        n_embd=4096,
        vocab_size=131072,
        n_head=32,
        n_kv_head=8,
        head_dim=128,
        n_inner=21504,
        ssm_heads=128,
        ssm_head_dim=64,
        state_size=128,
        n_groups=8,
        conv_kernel=4,
        chunk_size=128,
        n_experts=None,
        top_k=None,
        n_positions=8192,
        bos_token_id=1,
        eos_token_id=2,
        name="nemotron-h-8b",
    ),
    "nemotron-3-nano-30b-a3b": NemotronHConfig(
        kinds=tuple(PATTERN[c] for c in _NEMOTRON_3_NANO),
        n_embd=2688,
        vocab_size=131072,
        n_head=32,
        n_kv_head=2,
        head_dim=128,
        n_inner=1856,
        ssm_heads=64,
        ssm_head_dim=64,
        state_size=128,
        n_groups=8,
        conv_kernel=4,
        chunk_size=128,
        n_experts=128,
        top_k=6,
        moe_inner=1856,
        shared_inner=3712,
        n_group=1,
        topk_group=1,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
        n_positions=262144,
        bos_token_id=1,
        eos_token_id=2,
        name="nemotron-3-nano-30b-a3b",
    ),
}
