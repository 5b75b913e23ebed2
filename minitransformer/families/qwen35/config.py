"""The Qwen3.5 config: each field under its config.json key with transformers' defaults (Qwen3_5TextConfig's and
Qwen3_5MoeTextConfig's), and the presets of the published models, from each model's config.json.

A Qwen3.5 model's layers are of two kinds (layer_types, or every full_attention_interval-th layer full): Gated DeltaNet
layers (linear attention: a convolution and a delta-rule state of fixed size) and gated full-attention layers (keys
and values for every position). The published checkpoints are multimodal (model_type qwen3_5, qwen3_5_moe: a vision
tower beside the text model); they are read as their text model, text_config, as transformers' Qwen3_5ForCausalLM
reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...engine.kvcache import KeysValues, State
from ..config import ModelConfig, check_multiple
from ..keys import (
    ACTIVATION,
    FLAG,
    LAYER_COUNT,
    SIZE,
    TOKENS,
    Fixed,
    Key,
    Refusal,
    eps,
    key,
    layer_kinds,
    zero,
)
from ..rotary import DEFAULT_OR_YARN, Rope, RopeKeys

TEXT, MOE_TEXT = "qwen3_5_text", "qwen3_5_moe_text"
MULTIMODAL = {"qwen3_5": TEXT, "qwen3_5_moe": MOE_TEXT}  # a checkpoint's model_type -> its text model's
LINEAR, FULL = "linear_attention", "full_attention"  # the two kinds of layer (layer_types)
CHUNK = 64  # the delta rule's chunk over a prompt (transformers' torch_chunk_gated_delta_rule's chunk_size)
FULL_ATTENTION_INTERVAL = Key("full_attention_interval", 4, SIZE)
# the default rope or YaRN (which Qwen's model cards add for prompts past the trained context) over a share of each
# head; its multimodal sections: a text token is one position on every axis
ROPE = RopeKeys(
    DEFAULT_OR_YARN,
    refused=(),
    share=("partial_rotary_factor", "partial_rotary_factor", 0.25),
    ignored=("mrope_section", "mrope_interleaved"),
    strict=True,
)
ALWAYS_GATED = "is not supported: Qwen3.5's attention always gates its output (sigmoid of the gate its q_proj makes)"


def layers(hf: dict, fields: Mapping) -> tuple[str, ...]:
    """transformers' layer_types where the file has none: every full_attention_interval-th layer full attention."""
    return hybrid_layers(fields["n_layer"], FULL_ATTENTION_INTERVAL.get(hf))


@dataclass(frozen=True)
class Qwen35Config(ModelConfig):
    """A Qwen3.5 decoder: Gated DeltaNet layers and gated full-attention layers (layer_types), each followed by a
    SwiGLU MLP of width n_inner, or (the MoE models) by k of E experts of width moe_inner beside one shared expert of
    width shared_inner, whose output a sigmoid gate scales.

    A DeltaNet layer: q and k in linear_key_heads heads of linear_key_dim (dk), v in linear_value_heads of
    linear_value_dim (dv), each group of value heads reading one key head; a depthwise causal conv of
    linear_kernel over them; the gated delta rule with a [dk, dv] state a value head. A full-attention layer: n_head
    query heads of head_dim, whose q_proj makes a gate as wide as q beside it, n_kv_head key/value heads, q and k
    normed per head, the first partial_rotary_factor of each head rotated.
    """

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT, by_type={MOE_TEXT: 40})
    n_head: int = key("num_attention_heads", 16, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE, by_type={MOE_TEXT: 2048})
    n_inner: int | None = key("intermediate_size", 12288, SIZE, by_type={MOE_TEXT: Fixed(None)})  # None: experts
    vocab_size: int = key("vocab_size", 248320, SIZE)
    layer_types: tuple[str, ...] = key(
        "layer_types", None, layer_kinds(LINEAR, FULL), rule=layers, reads=(FULL_ATTENTION_INTERVAL,), dict_key=None
    )
    n_kv_head: int = key("num_key_value_heads", 4, SIZE, by_type={MOE_TEXT: 2})
    head_dim: int = key("head_dim", 256, SIZE)
    partial_rotary_factor: float = 0.25
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None  # sorted (key, value) pairs: hashable
    attention_bias: bool = key("attention_bias", False, FLAG)  # biases on q, k, v and o of the full-attention layers
    linear_kernel: int = key("linear_conv_kernel_dim", 4, SIZE)  # K
    linear_key_heads: int = key("linear_num_key_heads", 16, SIZE)  # Hk
    linear_value_heads: int = key("linear_num_value_heads", 32, SIZE)  # Hv
    linear_key_dim: int = key("linear_key_head_dim", 128, SIZE)  # dk
    linear_value_dim: int = key("linear_value_head_dim", 128, SIZE)  # dv
    n_experts: int | None = key("num_experts", Fixed(None), SIZE, by_type={MOE_TEXT: 256})  # E (None: a dense model)
    top_k: int | None = key("num_experts_per_tok", Fixed(None), SIZE, by_type={MOE_TEXT: 8})  # k
    moe_inner: int | None = key("moe_intermediate_size", Fixed(None), SIZE, by_type={MOE_TEXT: 512})  # an expert's
    shared_inner: int | None = key("shared_expert_intermediate_size", Fixed(None), SIZE, by_type={MOE_TEXT: 512})
    n_positions: int = key("max_position_embeddings", 32768, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)  # the MLP's and the conv's activation
    sliding_window: None = None
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS)
    model_type: str = TEXT

    family = "qwen3_5"
    what = "a Qwen3.5 model"
    classes = {TEXT: "Qwen3_5ForCausalLM", MOE_TEXT: "Qwen3_5MoeForCausalLM"}
    multimodal = MULTIMODAL
    inherited: ClassVar[tuple[str, ...]] = ("tie_word_embeddings",)
    groups = (ROPE,)
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("attn_output_gate", ALWAYS_GATED, lambda gate, hf: gate is not True),
        Refusal("num_experts", "(no experts) is not supported: that is a dense Qwen3.5", zero, types=(MOE_TEXT,)),
    )
    dict_last = ("layer_types", "d_head", "d_ff")

    def validate(self) -> None:
        check_multiple(self, "n_head", "n_kv_head")
        check_multiple(self, "linear_value_heads", "linear_key_heads", " (each key head serves a group of value heads)")

    @property
    def is_moe(self) -> bool:
        return self.n_experts is not None

    @property
    def experts(self) -> tuple[int, int, int, int]:
        """(E, k, Fe, Fs) of a MoE model: its experts, those a token reads, an expert's width, the shared one's."""
        E, k, Fe, Fs = self.n_experts, self.top_k, self.moe_inner, self.shared_inner
        assert E is not None and k is not None and Fe is not None and Fs is not None, "a dense Qwen3.5 has no experts"
        return E, k, Fe, Fs

    @property
    def expert_layers(self) -> int:
        """The layers with experts: every layer of a MoE model (Qwen3-Next's: those not made dense)."""
        return self.n_layer if self.is_moe else 0

    @property
    def checkpoint_kind(self) -> str:
        if self.model_type in MULTIMODAL:
            return f"{self.model_type} model (read as its text model, model.language_model...)"
        return f"{self.model_type} model"

    @property
    def d_ff(self) -> int:
        """The MLP's width, or in a MoE model an expert's (as Qwen3-MoE's and Mixtral's d_ff are)."""
        width = self.moe_inner if self.is_moe else self.n_inner
        assert width is not None, "a config has the width of its MLP or of its experts"
        return width

    @property
    def rotary_dims(self) -> int:
        """The numbers of each head of q and k that RoPE turns: int(head_dim x partial_rotary_factor)."""
        return int(self.head_dim * self.partial_rotary_factor)

    def rope(self, layer: int) -> Rope | None:
        """A full-attention layer turns the first rotary_dims numbers of each head at the config's rope (the
        multimodal rotary's sections reduce to one position a text token); a DeltaNet layer has no positions."""
        full = self.layer_types[layer].startswith(FULL)
        return Rope(self.rotary_dims, self.rope_theta, self.rope_scaling, self.n_positions) if full else None

    @property
    def value_groups(self) -> int:
        """Value heads per key head in a DeltaNet layer: Gv = Hv / Hk."""
        return self.linear_value_heads // self.linear_key_heads

    @property
    def conv_channels(self) -> int:
        """The channels of a DeltaNet layer's conv: q, k and v side by side, 2 Hk dk + Hv dv."""
        return 2 * self.linear_key_heads * self.linear_key_dim + self.linear_value_heads * self.linear_value_dim

    @property
    def symbol_sizes(self) -> dict[str, int]:
        heads = {"Hk": self.linear_key_heads, "Hv": self.linear_value_heads, "Gv": self.value_groups}
        widths = {"dk": self.linear_key_dim, "dv": self.linear_value_dim, "Kc": self.linear_kernel}
        sizes = heads | widths | {"Ks": self.linear_kernel - 1, "Dc": self.conv_channels, "dr": self.rotary_dims}
        if self.is_moe:
            _, _, Fe, Fs = self.experts
            sizes |= {"Fe": Fe, "Fs": Fs}
        return sizes

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A full-attention layer keeps its keys and values; a DeltaNet layer its conv's last K - 1 inputs [K - 1, Dc]
        and each value head's delta-rule state [Hv, dk, dv], whatever the context."""
        if self.layer_types[layer].startswith(FULL):
            return KeysValues(self.n_kv_head, self.head_dim)
        recurrent = (self.linear_value_heads, self.linear_key_dim, self.linear_value_dim)
        return State((("conv", (self.linear_kernel - 1, self.conv_channels)), ("recurrent", recurrent)))


def hybrid_layers(n_layer: int, interval: int = 4) -> tuple[str, ...]:
    """transformers' layer types where a config gives none: every interval-th layer full attention, the others
    Gated DeltaNet (three linear layers before each full one, at the default of 4)."""
    return tuple(LINEAR if (i + 1) % interval else FULL for i in range(n_layer))


def _qwen35(name: str, L: int, H: int, Hkv: int, D: int, value_heads: int, **shapes: Any) -> Qwen35Config:
    """A published Qwen3.5's text model, as its config.json's text_config states it: its layers, heads, key/value heads,
    width and DeltaNet value heads, and as every one has them: head_dim 256 (a quarter of it rotated, rope_theta
    10,000,000), a full-attention layer after every three Gated DeltaNet layers (full_attention_interval 4), 16 key
    heads of 128 and value heads of 128 in the DeltaNet layers, conv kernel 4, vocabulary 248,320, 262,144 positions,
    rms_norm_eps 1e-6, untied, no biases, eos 248044 (no bos): Qwen3_5TextConfig's defaults, but for the context,
    theta and eos."""
    moe: dict[str, Any] = {"n_inner": None, "model_type": MOE_TEXT} if "n_experts" in shapes else {}  # all experts
    shapes |= dict(n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=D, linear_value_heads=value_heads, rope_theta=1e7)
    return Qwen35Config(n_positions=262144, eos_token_id=248044, name=name, **moe, **shapes)


# The published Qwen3.5 checkpoints (Qwen/Qwen3.5-9B, -27B, -35B-A3B, -397B-A17B) are multimodal (model_type qwen3_5,
# qwen3_5_moe); these are their text models (text_config, as Qwen3_5ForCausalLM reads them), without the vision tower
# and the multi-token-prediction layer (mtp_num_hidden_layers 1), which transformers' text model does not build either.
# The Hugging Face Hub is out of reach here: the numbers are those of the config.json files as public copies quote
# them (found with the search tool), each noted below, and each preset's parameter count lands on its model card's
# name (the tests hold the count to transformers' own on the meta device).
MOE_512, MOE_1024 = dict(moe_inner=512, shared_inner=512), dict(moe_inner=1024, shared_inner=1024)  # expert, shared
PRESETS: dict[str, Qwen35Config] = {
    # Qwen/Qwen3.5-9B: hidden 4096, intermediate 12288, 32 layers, head_dim 256, linear heads 16 (k) and 32 (v) of 128,
    # eos 248044, as copies of its config.json quote them (huggingface.co khtsly/Mini-Coder, whose config.json names
    # "model_name": "Qwen/Qwen3.5-9B", and KnowledgeXLab/ComActor-9B); 16 query and 4 key/value heads and the
    # vocabulary are transformers' Qwen3_5TextConfig defaults, which its docstring calls "the Qwen3.5-9B style
    # configuration". 8,953,803,264 parameters: the model card's 9B.
    "qwen3.5-9b": _qwen35("qwen3.5-9b", 32, 16, 4, 4096, 32, n_inner=12288),
    # Qwen/Qwen3.5-27B: hidden 5120, intermediate 17408, 64 layers, 24 query heads and 4 key/value heads of 256,
    # linear heads 16 (k) and 48 (v) of 128, as its config.json's text_config reads, field for field, in a public code
    # file that rebuilds Qwen3_5ForConditionalGeneration from it (and as THUDM/slime's scripts/models/qwen3.5-27B.sh
    # and the model card's "Hidden Dimension: 5120, Number of Layers: 64, 16 x (3 x Gated DeltaNet + 1 x Gated
    # Attention)" state it). 26,895,998,464 parameters: the model card's 27B.
    "qwen3.5-27b": _qwen35("qwen3.5-27b", 64, 24, 4, 5120, 48, n_inner=17408),
    # Qwen/Qwen3.5-35B-A3B: hidden 2048, 40 layers, 16 query heads and 2 key/value heads, linear heads 16 (k) and 32
    # (v), 256 experts of 512, 8 a token, a shared expert of 512, as public copies of its text_config quote them (a
    # test of "a realistic 35B-A3B text config", and the config.json of Qwen3.6-35B-A3B, the same architecture); these
    # are also transformers' Qwen3_5MoeTextConfig defaults ("the Qwen3.5-35B-A3B style configuration").
    # 34,660,610,688 parameters, 3,454,988,928 active: the model card's 35B and A3B.
    "qwen3.5-35b-a3b": _qwen35("qwen3.5-35b-a3b", 40, 16, 2, 2048, 32, n_experts=256, top_k=8, **MOE_512),
    # Qwen/Qwen3.5-397B-A17B: hidden 4096, 60 layers, 32 query heads and 2 key/value heads, linear heads 16 (k) and 64
    # (v), 512 experts of 1024, 10 a token, a shared expert of 1024, as public copies of its config quote them (and as
    # SGLang's deployment notes describe it: "Top-10 active out of 512 routed experts plus a dedicated shared
    # expert"). 396,346,350,336 parameters, 17,349,040,896 active: the model card's 397B and A17B.
    "qwen3.5-397b-a17b": _qwen35("qwen3.5-397b-a17b", 60, 32, 2, 4096, 64, n_experts=512, top_k=10, **MOE_1024),
}
