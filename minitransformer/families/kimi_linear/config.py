"""Kimi Linear's config: each field under its config.json key with transformers' KimiLinearConfig default (its fields'
names: num_local_experts, num_experts_per_tok, norm_topk_prob, n_group, max_position_embeddings, n_shared_experts;
the published files' spellings, which its attribute_map reads and save_pretrained writes, read too: num_experts,
num_experts_per_token, moe_renormalize, num_expert_group, model_max_length, num_shared_experts), and the preset of the
published model, from its config.json.

Each layer's kind says its mixer and its MLP: linear_attention (Kimi Delta Attention) or full_attention (NoPE
multi-head latent attention), with _dense where its MLP is dense. The mixers are layer_types, or the published files'
linear_attn_config (full_attn_layers and kda_layers, counted from 1), or KimiLinearConfig's rule (layers 4, 8, ...
full); the MLPs are mlp_layer_types, or first_k_dense_replace dense layers then experts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from ..config import own_kv_heads
from ..deepseek_v3.config import DeepseekConfig, check_router
from ..keys import (
    ACTIVATION,
    COUNT,
    FLAG,
    LAYER_COUNT,
    POSITIVE,
    SCALE,
    SIZE,
    TOKENS,
    Fixed,
    Key,
    Kind,
    Refusal,
    Written,
    eps,
    key,
    layer_kinds,
    take,
)

LINEAR, FULL, DENSE_MLP = "linear_attention", "full_attention", "_dense"
LAYER_TYPES = Key("layer_types", None, layer_kinds(LINEAR, FULL).or_null())
MLP_LAYER_TYPES = Key("mlp_layer_types", None, layer_kinds("dense", "sparse").or_null())
FIRST_K_DENSE = Key("first_k_dense_replace", 1, COUNT)  # read by KimiLinearConfig where mlp_layer_types is not given
LINEAR_ATTN = Key("linear_attn_config", None, Kind("an object", lambda value: value is None or isinstance(value, dict)))
NOPE_ONLY = "is not supported: transformers' Kimi Linear has no rotary positions (NoPE)"
K3_KDA = "with a gate_lower_bound or use_full_rank_gate (a Kimi K3's KDA) is not supported"
KINDS = layer_kinds(LINEAR, FULL, LINEAR + DENSE_MLP, FULL + DENSE_MLP)
READS = (LAYER_TYPES, LINEAR_ATTN, MLP_LAYER_TYPES, FIRST_K_DENSE)  # the keys kinds reads


def mixers(hf: dict, n: int) -> tuple[str, ...]:
    """Each layer's mixer: layer_types, or linear_attn_config's lists (from 1), or every 4th layer from layer 4 full."""
    given = LAYER_TYPES.get(hf)
    if given is not None:
        return given
    linear = LINEAR_ATTN.get(hf) or {}
    if "full_attn_layers" in linear and "kda_layers" in linear:
        full, kda = linear["full_attn_layers"], linear["kda_layers"]
        if sorted([*full, *kda]) != list(range(1, n + 1)):
            which = "config linear_attn_config's full_attn_layers and kda_layers"
            raise UserError(f"{which} must name each of layers 1 to {n} once (they count from 1), not {full} and {kda}")
        return tuple(FULL if i + 1 in full else LINEAR for i in range(n))
    return tuple(FULL if i and i % 4 == 0 else LINEAR for i in range(n))


def kinds(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Each layer's mixer, with _dense where its MLP is dense (mlp_layer_types, or first_k_dense_replace's)."""
    n = values["n_layer"]
    mlps = MLP_LAYER_TYPES.get(hf) or tuple("dense" if i < FIRST_K_DENSE.get(hf) else "sparse" for i in range(n))
    if len(mlps) != n:
        raise UserError(f"config mlp_layer_types must name {n} layers (num_hidden_layers), not {len(mlps)}")
    return tuple(mixer + DENSE_MLP * (mlp == "dense") for mixer, mlp in zip(mixers(hf, n), mlps))


def k3_gates(linear, hf: dict) -> bool:
    return isinstance(linear, dict) and bool({"gate_lower_bound", "use_full_rank_gate"} & set(linear))


def written(c: KimiLinearConfig) -> dict:
    mlp = ["dense" if kind.endswith(DENSE_MLP) else "sparse" for kind in c.layer_types]
    return {"layer_types": [kind.removesuffix(DENSE_MLP) for kind in c.layer_types], "mlp_layer_types": mlp}


def linear_attn(inner: str, json: str, default: int, kind: Kind = SIZE) -> Any:
    """A KDA shape: linear_attn_config's `inner` (the published files'), over the key `json` (transformers')."""

    def read(hf: dict, values: Mapping) -> Any:
        linear = LINEAR_ATTN.get(hf) or {}
        if inner in linear:
            return linear[inner]
        if json not in hf:
            take(hf, json, default, kind.shape)
        return hf.get(json, default)

    return key(json, default, kind, read=read, reads=(LINEAR_ATTN,))


ROUTER_KEYS = (
    "is not supported: transformers' Kimi Linear routes by the sigmoid, grouped, from layer first_k_dense_replace"
)


@dataclass(frozen=True)
class KimiLinearConfig(DeepseekConfig):
    """A Kimi Linear: KDA layers (linear_heads heads of linear_head_dim, a conv of linear_kernel, the decay and output
    gates of rank linear_head_dim) and NoPE MLA layers (DeepSeek-V3's without rotary positions), each followed by a
    SwiGLU MLP of width n_inner or DeepSeek-V3's experts beside its shared ones."""

    n_layer: int = key("num_hidden_layers", 27, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 2304, SIZE)
    n_inner: int = key("intermediate_size", 9216, SIZE)
    vocab_size: int = key("vocab_size", 163840, SIZE)
    moe_inner: int = key("moe_intermediate_size", 1024, SIZE)
    q_lora_rank: int | None = key("q_lora_rank", None, SIZE.or_null())
    kv_lora_rank: int = key("kv_lora_rank", 512, SIZE)
    qk_rope_head_dim: int = key("qk_rope_head_dim", 64, SIZE)  # the shared key's share of a head, without rotary
    qk_nope_head_dim: int = key("qk_nope_head_dim", 128, SIZE)
    v_head_dim: int = key("v_head_dim", 128, SIZE)
    rope_interleave: bool = key("rope_interleave", Fixed(False), dict_key=None)  # NoPE: nothing turns
    n_experts: int = key("num_local_experts", 256, SIZE, aliases=("num_experts",))
    top_k: int = key("num_experts_per_tok", 8, SIZE, aliases=("num_experts_per_token",))
    n_shared_experts: int = key("n_shared_experts", 1, SIZE, aliases=("num_shared_experts",))
    n_group: int = key("n_group", 1, POSITIVE, aliases=("num_expert_group",))
    topk_group: int = key("topk_group", 1, POSITIVE)
    first_k_dense: int = key("first_k_dense_replace", Fixed(1), dict_key=None)  # the layers' kinds say it
    # the multi-token-prediction layers its checkpoints may keep: not built here (no MTP part), nor a key of its
    # transformers config
    n_mtp: int = key("num_mtp_layers", Fixed(0), dict_key=None)
    norm_topk_prob: bool = key("norm_topk_prob", True, FLAG, aliases=("moe_renormalize",))
    routed_scaling_factor: float = key("routed_scaling_factor", 2.446, SCALE)
    n_positions: int = key("max_position_embeddings", 1048576, SIZE, aliases=("model_max_length",))
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)  # the MLPs' and the KDA conv's
    linear_heads: int = linear_attn("num_heads", "linear_num_heads", 32)
    linear_head_dim: int = linear_attn("head_dim", "linear_head_dim", 128)
    linear_kernel: int = linear_attn("short_conv_kernel_size", "linear_conv_kernel_dim", 4)
    # transformers' KimiLinearForCausalLM ties nothing (its _tied_weights_keys is empty): lm_head is the head whatever
    # the file's tie_word_embeddings says, and so here
    tie_word_embeddings: bool = key("tie_word_embeddings", Fixed(False), dict_key=None)
    bos_token_id: int | None = key("bos_token_id", 163584, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 163586, TOKENS)
    model_type: str = "kimi_linear"
    layer_types: tuple[str, ...] = key("layer_types", None, KINDS, read=kinds, rule=kinds, reads=READS, write=written)

    what = "a Kimi Linear"
    classes = {"kimi_linear": "KimiLinearForCausalLM"}
    checkpoint_kind = "Kimi Linear model"
    # MLA: every head its own keys and values; no rope keys (NoPE), where DeepSeek-V3 reads its rope
    groups = (Written(lambda c: {"num_key_value_heads": c.n_head}),)  # type: ignore[assignment]
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("attention_bias", "is not supported"),
        own_kv_heads(32),
        Refusal("mla_use_nope", NOPE_ONLY, lambda nope, hf: nope is not True),
        Refusal("moe_router_activation_func", ROUTER_KEYS, lambda act, hf: act != "sigmoid"),
        Refusal("moe_layer_freq", ROUTER_KEYS, lambda freq, hf: freq != 1),
        Refusal("linear_attn_config", K3_KDA, k3_gates),
    )

    def validate(self) -> None:
        check_router(self)

    def rope(self, layer: int = 0) -> None:  # type: ignore[override]  # DeepSeek-V3's MLA always has one
        """No layer has rotary positions: the MLA layers are NoPE, the KDA layers' decays say where a key was."""
        return None

    def is_moe(self, layer: int) -> bool:
        return not self.layer_types[layer].endswith(DENSE_MLP)

    @property
    def expert_layers(self) -> int:
        return sum(self.is_moe(i) for i in range(self.n_layer))

    # The delta rule's shapes (parts/delta_rule.py), a KDA layer's: as many key heads as value heads, dk wide alike.
    linear_key_heads = linear_value_heads = property(lambda self: self.linear_heads)
    linear_key_dim = linear_value_dim = property(lambda self: self.linear_head_dim)

    @property
    def value_groups(self) -> int:
        return 1

    @property
    def conv_channels(self) -> int:
        """The KDA conv's channels: q, k and v side by side, 3 H dk."""
        return 3 * self.linear_heads * self.linear_head_dim

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """MLA's and the experts' (DeepSeek-V3's), and a KDA layer's: Hk = Hv heads of dk (its dv, MLA's v_head_dim
        elsewhere, is dk inside it), Dc conv channels of kernel Kc (Ks = Kc - 1 kept)."""
        H, dk, K = self.linear_heads, self.linear_head_dim, self.linear_kernel
        kda = {"Hk": H, "Hv": H, "Gv": 1, "dk": dk, "Kc": K, "Ks": K - 1, "Dc": self.conv_channels}
        return super().symbol_sizes | kda

    def layer_cache(self, layer: int) -> KeysValues | State:
        """An MLA layer keeps its keys and values; a KDA layer its conv's last K - 1 inputs [K - 1, 3 H dk] and each
        head's delta-rule state [H, dk, dk], whatever the context."""
        if self.layer_types[layer].startswith(FULL):
            return super().layer_cache(layer)
        H, dk = self.linear_heads, self.linear_head_dim
        return State((("conv", (self.linear_kernel - 1, self.conv_channels)), ("recurrent", (H, dk, dk))))


# moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json, as a public model-inspection report quotes it in full (with
# its 20 safetensors files' 49,122,681,728 numbers, the routers' correction biases included): 27 layers of 2304, KDA
# in layers 1-3, 5-7, ..., 25-26 and MLA in layers 4, 8, 12, 16, 20, 24 and 27 (linear_attn_config, from 1), KDA 32
# heads of 128 with a conv of 4, MLA 32 heads (q_proj, no q_lora_rank; kv_lora_rank 512, qk_nope 128 + qk_rope 64, v
# 128, mla_use_nope), the first layer dense (intermediate 9216), then 256 experts of 1024, 8 a token, 1 shared, one
# group, moe_renormalize, routed_scaling_factor 2.446, vocabulary 163840, model_max_length 1048576, rms_norm_eps 1e-5,
# untied, bos 163584, eos 163586. NVIDIA-NeMo's Megatron-Bridge test fixture of "the official Kimi-Linear-48B-A3B
# architecture" (tests/unit_tests/models/kimi/test_kimi_linear_bridge.py) agrees key for key, and these are
# KimiLinearConfig's defaults (its docstring's checkpoint), but for the layers' pattern: the file's last layer is MLA.
MLA_LAYERS = (3, 7, 11, 15, 19, 23, 26)  # full_attn_layers [4, 8, 12, 16, 20, 24, 27], from 0
PRESETS = {
    "kimi-linear-48b-a3b": KimiLinearConfig(
        layer_types=tuple(FULL if i in MLA_LAYERS else LINEAR + DENSE_MLP * (i == 0) for i in range(27)),
        name="kimi-linear-48b-a3b",
    ),
}
