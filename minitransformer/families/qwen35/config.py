"""The Qwen3.5 config (transformers' Qwen3_5TextConfig and Qwen3_5MoeTextConfig, with their defaults), read from a
Hugging Face config.json, and the presets of the published models, from each model's config.json.

A Qwen3.5 model's layers are of two kinds (layer_types, or every full_attention_interval-th layer full): Gated DeltaNet
layers (linear attention: a convolution and a delta-rule state of fixed size) and gated full-attention layers (keys
and values for every position). The published checkpoints are multimodal (model_type qwen3_5, qwen3_5_moe: a vision
tower beside the text model); they are read as their text model, text_config, as transformers' Qwen3_5ForCausalLM
reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from .. import rotary
from ..config import SUPPORTED_ACTIVATIONS, ModelConfig, check_dtype, check_positive, flag, listed, token_ids
from ..rotary import Rope

TEXT, MOE_TEXT = "qwen3_5_text", "qwen3_5_moe_text"
MULTIMODAL = {"qwen3_5": TEXT, "qwen3_5_moe": MOE_TEXT}  # a checkpoint's model_type -> its text model's
QWEN35_MODEL_TYPES = (TEXT, MOE_TEXT, *MULTIMODAL)
LINEAR, FULL = "linear_attention", "full_attention"  # the two kinds of layer (layer_types)
CHUNK = 64  # the delta rule's chunk over a prompt (transformers' torch_chunk_gated_delta_rule's chunk_size)

# transformers' defaults for what a config.json may leave out (configuration_qwen3_5.py, configuration_qwen3_5_moe.py).
_DEFAULTS: dict[str, dict] = {
    TEXT: {"vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
           "num_attention_heads": 16, "num_key_value_heads": 4},
    MOE_TEXT: {"vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
               "num_key_value_heads": 2, "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
               "shared_expert_intermediate_size": 512},
}  # fmt: skip


@dataclass(frozen=True)
class Qwen35Config(ModelConfig):
    """A Qwen3.5 decoder: Gated DeltaNet layers and gated full-attention layers (layer_kinds), each followed by a
    SwiGLU MLP of width n_inner, or (the MoE models) by k of E experts of width moe_inner beside one shared expert of
    width shared_inner, whose output a sigmoid gate scales.

    A DeltaNet layer: q and k in linear_key_heads heads of linear_key_dim (dk), v in linear_value_heads of
    linear_value_dim (dv), each group of value heads reading one key head; a depthwise causal conv of
    linear_kernel over them; the gated delta rule with a [dk, dv] state a value head. A full-attention layer: n_head
    query heads of head_dim, whose q_proj makes a gate as wide as q beside it, n_kv_head key/value heads, q and k
    normed per head, the first partial_rotary_factor of each head rotated.
    """

    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int | None  # intermediate_size: the MLP's width (None in a MoE model: its layers have experts)
    vocab_size: int
    layer_kinds: tuple[str, ...]  # each layer's: LINEAR or FULL (transformers' layer_types)
    n_kv_head: int = 4
    head_dim: int = 256
    partial_rotary_factor: float = 0.25
    rope_theta: float = 10000.0
    attention_bias: bool = False  # biases on q, k, v and o of the full-attention layers
    linear_kernel: int = 4  # linear_conv_kernel_dim: K
    linear_key_heads: int = 16  # linear_num_key_heads: Hk
    linear_value_heads: int = 32  # linear_num_value_heads: Hv
    linear_key_dim: int = 128  # linear_key_head_dim: dk
    linear_value_dim: int = 128  # linear_value_head_dim: dv
    n_experts: int | None = None  # num_experts: E (None: a dense model)
    top_k: int | None = None  # num_experts_per_tok: k
    moe_inner: int | None = None  # moe_intermediate_size: each routed expert's width
    shared_inner: int | None = None  # shared_expert_intermediate_size: the shared expert's width
    n_positions: int = 32768
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"  # the MLP's and the conv's activation
    sliding_window: None = None
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    model_type: str = TEXT
    name: str = field(default=TEXT, compare=False)

    family = "qwen3_5"
    json_keys = ModelConfig.json_keys | {
        "layer_kinds": "layer_types", "linear_kernel": "linear_conv_kernel_dim", "linear_key_heads": "linear_num_key_heads",
        "linear_value_heads": "linear_num_value_heads", "linear_key_dim": "linear_key_head_dim",
        "linear_value_dim": "linear_value_head_dim", "n_experts": "num_experts", "moe_inner": "moe_intermediate_size",
        "shared_inner": "shared_expert_intermediate_size",
    }  # fmt: skip

    def __post_init__(self) -> None:
        self.require_positive("n_layer", "n_head", "n_embd", "vocab_size", "n_kv_head", "head_dim", "linear_kernel",
                              "linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                              "n_positions")  # fmt: skip
        if self.is_moe:
            self.require_positive("n_experts", "top_k", "moe_inner", "shared_inner")
            E, k, _, _ = self.experts
            if k > E:
                raise UserError(f"config num_experts_per_tok={k} exceeds num_experts={E}")
        else:
            check_positive("intermediate_size", self.n_inner)
        if len(self.layer_kinds) != self.n_layer or not set(self.layer_kinds) <= {LINEAR, FULL}:
            raise UserError(f"config layer_types must name {self.n_layer} layers, each {LINEAR!r} or {FULL!r}, not "
                            f"{list(self.layer_kinds)!r}")  # fmt: skip
        if self.n_head % self.n_kv_head:
            raise UserError(f"config num_attention_heads={self.n_head} is not a multiple of "
                            f"num_key_value_heads={self.n_kv_head}")  # fmt: skip
        if self.linear_value_heads % self.linear_key_heads:
            raise UserError(f"config linear_num_value_heads={self.linear_value_heads} is not a multiple of "
                            f"linear_num_key_heads={self.linear_key_heads} (each key head serves a group of value "
                            f"heads)")  # fmt: skip
        factor = self.partial_rotary_factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
            raise UserError(f"config partial_rotary_factor must be a number in (0, 1], not {factor!r}")
        if self.rotary_dims < 2 or self.rotary_dims % 2:
            raise UserError(f"config partial_rotary_factor={factor} turns {self.rotary_dims} of head_dim="
                            f"{self.head_dim} numbers: rotary embeddings turn a positive, even number of them")  # fmt: skip
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UserError(f"config hidden_act={self.hidden_act!r} is not supported "
                            f"(supported: {', '.join(SUPPORTED_ACTIVATIONS)})")  # fmt: skip
        self.require_positive_number("rms_norm_eps", "rope_theta")

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
    def checkpoint_kind(self) -> str:
        if self.model_type in MULTIMODAL:
            return f"{self.model_type} model (read as its text model, model.language_model...)"
        return f"{self.model_type} model"

    @property
    def d_head(self) -> int:
        return self.head_dim

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
        """A full-attention layer turns the first rotary_dims numbers of each head at the default rope (the
        multimodal rotary's sections reduce to one position a text token); a DeltaNet layer has no positions."""
        return Rope(self.rotary_dims, self.rope_theta) if self.layer_kinds[layer] == FULL else None

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
        sizes = {"Hk": self.linear_key_heads, "Hv": self.linear_value_heads, "Gv": self.value_groups,
                 "dk": self.linear_key_dim, "dv": self.linear_value_dim, "Kc": self.linear_kernel,
                 "Ks": self.linear_kernel - 1, "Dc": self.conv_channels, "dr": self.rotary_dims}  # fmt: skip
        if self.is_moe:
            _, _, Fe, Fs = self.experts
            sizes |= {"Fe": Fe, "Fs": Fs}
        return sizes

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.layer_kinds

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A full-attention layer keeps its keys and values; a DeltaNet layer its conv's last K - 1 inputs [K - 1, Dc]
        and each value head's delta-rule state [Hv, dk, dv], whatever the context."""
        if self.layer_kinds[layer] == FULL:
            return KeysValues(self.n_kv_head, self.head_dim)
        return State((("conv", (self.linear_kernel - 1, self.conv_channels)),
                      ("recurrent", (self.linear_value_heads, self.linear_key_dim, self.linear_value_dim))))  # fmt: skip

    def prefix(self, n_layer: int) -> Qwen35Config:
        return replace(self, n_layer=n_layer, layer_kinds=self.layer_kinds[:n_layer])

    @property
    def active_experts(self) -> int | None:
        """The routed experts one token's pass reads in each layer: k of E."""
        return self.top_k

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layer_types"] = list(d.pop("layer_kinds"))  # transformers' name, which reports read
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, **d, "d_head": self.d_head, "d_ff": self.d_ff}

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config: its text model's (Qwen3_5TextConfig or
        Qwen3_5MoeTextConfig), every shape spelled out."""
        text = MULTIMODAL.get(self.model_type, self.model_type)
        hf: dict = {
            "architectures": ["Qwen3_5MoeForCausalLM" if self.is_moe else "Qwen3_5ForCausalLM"],
            "model_type": text, "vocab_size": self.vocab_size, "hidden_size": self.n_embd,
            "num_hidden_layers": self.n_layer, "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_kv_head, "head_dim": self.head_dim, "hidden_act": self.hidden_act,
            "max_position_embeddings": self.n_positions, "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings, "attention_bias": self.attention_bias,
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta,
                                "partial_rotary_factor": self.partial_rotary_factor},
            "linear_conv_kernel_dim": self.linear_kernel, "linear_key_head_dim": self.linear_key_dim,
            "linear_value_head_dim": self.linear_value_dim, "linear_num_key_heads": self.linear_key_heads,
            "linear_num_value_heads": self.linear_value_heads, "layer_types": list(self.layer_kinds),
            "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }  # fmt: skip
        if self.is_moe:
            hf |= {"num_experts": self.n_experts, "num_experts_per_tok": self.top_k,
                   "moe_intermediate_size": self.moe_inner, "shared_expert_intermediate_size": self.shared_inner}  # fmt: skip
        else:
            hf["intermediate_size"] = self.n_inner
        return hf

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = TEXT) -> Qwen35Config:
        """Read a transformers Qwen3_5TextConfig or Qwen3_5MoeTextConfig dict (or a multimodal Qwen3_5Config's or
        Qwen3_5MoeConfig's text_config), with their defaults."""
        model_type = hf.get("model_type")
        if model_type not in QWEN35_MODEL_TYPES:
            raise UserError(
                f"config model_type={model_type!r} is not a Qwen3.5 model ({', '.join(QWEN35_MODEL_TYPES)})"
            )
        if hf.get("quantization_config"):  # the FP8 checkpoints: blocks of weights with their scales
            quantization = hf["quantization_config"]
            method = quantization.get("quant_method", "?") if isinstance(quantization, dict) else "?"
            raise UserError(f"config quantization_config ({method}) is not supported: dequantize the weights first")
        if model_type in MULTIMODAL:  # Qwen3_5ForConditionalGeneration: its text model, as Qwen3_5ForCausalLM reads it
            text = hf.get("text_config") or {}
            if not isinstance(text, dict):
                raise UserError(f"config text_config must be an object, not {text!r}")
            text = text | {"model_type": MULTIMODAL[model_type]}
            if "tie_word_embeddings" not in text and "tie_word_embeddings" in hf:
                text["tie_word_embeddings"] = hf["tie_word_embeddings"]
            return replace(cls.from_hf_dict(text, name), model_type=model_type)
        defaults = _DEFAULTS[model_type]

        def get(key: str):
            return hf.get(key, defaults[key])

        check_dtype(hf)
        if hf.get("attn_output_gate", True) is not True:  # transformers' Qwen3.5 always gates: refused, not ignored
            raise UserError(f"config attn_output_gate={hf['attn_output_gate']!r} is not supported: Qwen3.5's "
                            f"attention always gates its output (sigmoid of the gate its q_proj makes)")  # fmt: skip
        rope = rotary.read(hf)
        kind = rope.pop("rope_type", "default")
        if kind != "default":
            raise UserError(f"config rope_parameters rope_type={kind!r} is not supported (default only)")
        rope.pop("mrope_section", None)  # multimodal positions: a text token's are one position on every axis
        rope.pop("mrope_interleaved", None)
        theta = rope.pop("rope_theta")
        factor = rope.pop("partial_rotary_factor", hf.get("partial_rotary_factor", 0.25))
        if rope:
            raise UserError(f"config rope_parameters {', '.join(sorted(rope))} is not supported")
        n_layer = get("num_hidden_layers")
        check_positive("num_hidden_layers", n_layer)
        kinds = hf.get("layer_types")
        if kinds is None:  # transformers' rule: every full_attention_interval-th layer is full attention
            interval = hf.get("full_attention_interval", 4)
            check_positive("full_attention_interval", interval)
            kinds = list(hybrid_layers(n_layer, interval))
        if not isinstance(kinds, list):
            raise UserError(f"config layer_types must be a list, not {kinds!r}")
        moe = model_type == MOE_TEXT
        if moe and get("num_experts") == 0:
            raise UserError("config num_experts=0 (no experts) is not supported: that is a dense Qwen3.5")
        eos = hf.get("eos_token_id")
        return cls(
            n_layer=n_layer, n_head=get("num_attention_heads"), n_embd=get("hidden_size"),
            n_inner=None if moe else get("intermediate_size"), vocab_size=get("vocab_size"),
            layer_kinds=tuple(kinds), n_kv_head=get("num_key_value_heads"), head_dim=hf.get("head_dim", 256),
            partial_rotary_factor=factor, rope_theta=theta, attention_bias=flag(hf, "attention_bias"),
            linear_kernel=hf.get("linear_conv_kernel_dim", 4), linear_key_heads=hf.get("linear_num_key_heads", 16),
            linear_value_heads=hf.get("linear_num_value_heads", 32),
            linear_key_dim=hf.get("linear_key_head_dim", 128), linear_value_dim=hf.get("linear_value_head_dim", 128),
            n_experts=get("num_experts") if moe else None, top_k=get("num_experts_per_tok") if moe else None,
            moe_inner=get("moe_intermediate_size") if moe else None,
            shared_inner=get("shared_expert_intermediate_size") if moe else None,
            n_positions=hf.get("max_position_embeddings", 32768), rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            hidden_act=hf.get("hidden_act", "silu"), tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            bos_token_id=hf.get("bos_token_id"), eos_token_id=token_ids(eos),
            model_type=model_type, name=name,
        )  # fmt: skip


def hybrid_layers(n_layer: int, interval: int = 4) -> tuple[str, ...]:
    """transformers' layer types where a config gives none: every interval-th layer full attention, the others
    Gated DeltaNet (three linear layers before each full one, at the default of 4)."""
    return tuple(LINEAR if (i + 1) % interval else FULL for i in range(n_layer))


def _qwen35(name: str, n_layer: int, n_head: int, n_kv_head: int, n_embd: int, value_heads: int,
            **shapes: Any) -> Qwen35Config:  # fmt: skip
    """A published Qwen3.5's text model, as its config.json's text_config states it: head_dim 256 (a quarter of it
    rotated, rope_theta 10,000,000), a full-attention layer after every three Gated DeltaNet layers
    (full_attention_interval 4), 16 key heads of 128 and value heads of 128 in the DeltaNet layers, conv kernel 4,
    vocabulary 248,320, 262,144 positions, rms_norm_eps 1e-6, untied, no biases, eos 248044 (no bos)."""
    moe = "n_experts" in shapes
    if moe:
        shapes["n_inner"] = None  # the MoE's layers are all experts
    return Qwen35Config(n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, n_embd=n_embd, vocab_size=248320,
                        layer_kinds=hybrid_layers(n_layer), head_dim=256, partial_rotary_factor=0.25,
                        rope_theta=10_000_000.0, linear_kernel=4, linear_key_heads=16, linear_value_heads=value_heads,
                        linear_key_dim=128, linear_value_dim=128, n_positions=262144, rms_norm_eps=1e-6,
                        eos_token_id=248044, model_type=MOE_TEXT if moe else TEXT, name=name, **shapes)  # fmt: skip


# The published Qwen3.5 checkpoints (Qwen/Qwen3.5-9B, -27B, -35B-A3B, -397B-A17B) are multimodal (model_type qwen3_5,
# qwen3_5_moe); these are their text models (text_config, as Qwen3_5ForCausalLM reads them), without the vision tower
# and the multi-token-prediction layer (mtp_num_hidden_layers 1), which transformers' text model does not build either.
# The Hugging Face Hub is out of reach here: the numbers are those of the config.json files as public copies quote
# them (found with the search tool), each noted below, and each preset's parameter count lands on its model card's
# name (the tests hold the count to transformers' own on the meta device).
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
    "qwen3.5-35b-a3b": _qwen35("qwen3.5-35b-a3b", 40, 16, 2, 2048, 32, n_experts=256, top_k=8, moe_inner=512,
                               shared_inner=512),
    # Qwen/Qwen3.5-397B-A17B: hidden 4096, 60 layers, 32 query heads and 2 key/value heads, linear heads 16 (k) and 64
    # (v), 512 experts of 1024, 10 a token, a shared expert of 1024, as public copies of its config quote them (and as
    # SGLang's deployment notes describe it: "Top-10 active out of 512 routed experts plus a dedicated shared
    # expert"). 396,346,350,336 parameters, 17,349,040,896 active: the model card's 397B and A17B.
    "qwen3.5-397b-a17b": _qwen35("qwen3.5-397b-a17b", 60, 32, 2, 4096, 64, n_experts=512, top_k=10,
                                 moe_inner=1024, shared_inner=1024),
}  # fmt: skip
