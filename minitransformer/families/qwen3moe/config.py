"""The Qwen3-MoE config, read from a Hugging Face config.json (transformers' Qwen3MoeConfig and its defaults), and the
presets of the published Qwen3 mixture-of-experts models, from each model's config.json.

Against Mixtral's config (families/mixtral/config.py): the experts have their own width (moe_intermediate_size: n_inner,
d_ff) and a dense MLP of intermediate_size (dense_inner) stands in the layers that mlp_only_layers or
decoder_sparse_step make dense; the top k gates are renormalised only under norm_topk_prob; head_dim is the config's
(D / H when absent); a sliding window (use_sliding_window) applies to every layer, as Qwen3MoeModel's one mask does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import UserError
from .. import rotary
from ..config import check_dtype, check_experts, check_model_type, check_positive, either, flag, llama_keys
from ..llama.config import LlamaConfig, preset

QWEN3_MOE_MODEL_TYPES = ("qwen3_moe",)
# Qwen3MoeConfig's defaults for what a config.json leaves out (the MLP widths are read apart)
DEFAULTS = {"num_hidden_layers": 24, "num_attention_heads": 32, "hidden_size": 2048, "vocab_size": 151936,
            "num_key_value_heads": 4, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "hidden_act": "silu"}  # fmt: skip
SPARSE, DENSE = "sparse_moe", "dense_mlp"  # the two kinds of layer (layer_types)


@dataclass(frozen=True)
class Qwen3MoeConfig(LlamaConfig):
    """A Qwen3-MoE decoder: Qwen3's attention; in each sparse layer a router picks k of E SwiGLU experts of width F
    (n_inner = moe_intermediate_size) per token, in each dense layer (dense_layers) a SwiGLU MLP of dense_inner."""

    n_experts: int = 128  # num_experts (saved as num_local_experts): E
    top_k: int = 8  # num_experts_per_tok: k
    norm_topk_prob: bool = False  # the k gates divided by their sum (else the softmax's own probabilities)
    dense_inner: int = 6144  # intermediate_size: the dense MLP's width
    dense_layers: tuple[int, ...] = ()  # the layers with a dense MLP (mlp_only_layers, decoder_sparse_step)
    rope_theta: float = 10000.0
    model_type: str = "qwen3_moe"
    name: str = field(default="qwen3_moe", compare=False)

    family = "qwen3_moe"
    # transformers names E num_experts (saved as num_local_experts: either is read); intermediate_size is the dense
    # layers' MLP, moe_intermediate_size the experts'
    json_keys = LlamaConfig.json_keys | {"n_experts": "num_experts", "n_inner": "moe_intermediate_size",
                                         "dense_inner": "intermediate_size", "dense_layers": "mlp_only_layers"}  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        check_experts(self)
        self.require_positive("dense_inner")
        if self.mlp_bias or self.qkv_bias != self.o_bias:
            raise UserError("a Qwen3-MoE has biases on q, k, v and o together (attention_bias) or none")
        if any(not 0 <= i < self.n_layer for i in self.dense_layers):
            raise UserError(f"dense layers {list(self.dense_layers)} outside the {self.n_layer} layers")

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind: a mixture of experts or a dense MLP (every layer has the same attention)."""
        return tuple(DENSE if i in self.dense_layers else SPARSE for i in range(self.n_layer))

    def prefix(self, n_layer: int) -> Qwen3MoeConfig:
        return replace(self, n_layer=n_layer, dense_layers=tuple(i for i in self.dense_layers if i < n_layer))

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["dense_layers"] = list(self.dense_layers)
        return d

    @property
    def active_experts(self) -> int:
        """The experts one token's pass reads in each sparse layer: k of E."""
        return self.top_k

    def to_hf_dict(self) -> dict:
        hf = super().to_hf_dict() | {
            "intermediate_size": self.dense_inner, "moe_intermediate_size": self.n_inner, "num_experts": self.n_experts,
            "num_experts_per_tok": self.top_k, "norm_topk_prob": self.norm_topk_prob,
            "mlp_only_layers": list(self.dense_layers), "decoder_sparse_step": 1, "attention_bias": self.qkv_bias,
            "use_sliding_window": self.sliding_window is not None, "sliding_window": self.sliding_window,
        }  # fmt: skip
        hf.setdefault("head_dim", self.d_head)
        return hf

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "qwen3_moe") -> Qwen3MoeConfig:
        """Read a transformers Qwen3MoeConfig dict (as config.json holds it), with Qwen3MoeConfig's defaults."""
        check_model_type(hf, QWEN3_MOE_MODEL_TYPES, "a Qwen3-MoE model")
        check_dtype(hf)
        if "head_dim" in hf and hf["head_dim"] is None:
            raise UserError("config head_dim=None: give the head size, or leave head_dim out for D / H")
        rope = rotary.read(hf)
        rotary.refuse_partial(hf, rope)
        # As Qwen3MoeConfig reads them: the window exists only under use_sliding_window, and then on every layer
        # (Qwen3MoeModel makes one mask for all; max_window_layers and layer_types are not read).
        window = hf.get("sliding_window", 4096) if flag(hf, "use_sliding_window") else None
        n_layer = hf.get("num_hidden_layers", 24)
        check_positive("num_hidden_layers", n_layer)
        # transformers names the field num_experts and saves it as num_local_experts (attribute_map)
        n_experts = either(hf, ("num_experts", "num_local_experts"), 128)
        if n_experts == 0:
            raise UserError("config num_experts=0 (every layer a dense MLP) is not supported: that is a dense Qwen3")
        shapes = {
            "num_experts_per_tok": hf.get("num_experts_per_tok", 8),
            "num_experts": n_experts,
            "moe_intermediate_size": hf.get("moe_intermediate_size", 768),
            "intermediate_size": hf.get("intermediate_size", 6144),
        }
        for key, value in shapes.items():  # refused under their config.json names
            check_positive(key, value)
        step = hf.get("decoder_sparse_step", 1)
        check_positive("decoder_sparse_step", step)
        only = hf.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(not isinstance(i, int) or isinstance(i, bool) for i in only):
            raise UserError(f"config mlp_only_layers must be a list of layer indices, not {only!r}")
        # Qwen3MoeDecoderLayer: experts iff the layer is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
        dense = tuple(i for i in range(n_layer) if i in only or (i + 1) % step != 0)
        bias = flag(hf, "attention_bias")
        return cls(
            **llama_keys(hf, DEFAULTS, rope) | {"n_inner": shapes["moe_intermediate_size"]},
            dense_inner=shapes["intermediate_size"],
            qkv_bias=bias,
            o_bias=bias,
            sliding_window=window,
            n_experts=n_experts,
            top_k=shapes["num_experts_per_tok"],
            norm_topk_prob=flag(hf, "norm_topk_prob"),
            dense_layers=dense,
            name=name,
        )


# The published Qwen3 mixtures of experts, from each model's config.json on the Hugging Face hub: head_dim 128,
# vocabulary 151,936, rope_theta 1,000,000, rms_norm_eps 1e-6, 40,960 positions, no biases, untied, no sliding window,
# norm_topk_prob true, decoder_sparse_step 1 and mlp_only_layers [] (every layer sparse), 128 experts, 8 per token,
# bos 151643, eos 151645; each one's layers, heads, key/value heads, width, experts' width and intermediate_size
# (which no layer of theirs uses).
QWEN3_MOE: dict[str, Any] = {"head_dim": 128, "rope_theta": 1000000.0, "n_experts": 128, "top_k": 8,
                             "norm_topk_prob": True, "bos_token_id": 151643, "eos_token_id": 151645}  # fmt: skip
PRESETS: dict[str, Qwen3MoeConfig] = {
    name: preset(Qwen3MoeConfig, name, L, H, Hkv, D, Fe, 151936, 40960, dense_inner=F, **QWEN3_MOE)
    for name, L, H, Hkv, D, Fe, F in (
        ("qwen3-30b-a3b", 48, 32, 4, 2048, 768, 6144),  # Qwen/Qwen3-30B-A3B
        ("qwen3-235b-a22b", 94, 64, 4, 4096, 1536, 12288),  # Qwen/Qwen3-235B-A22B
    )
}
