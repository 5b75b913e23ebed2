"""MiniMax-M2 (transformers' MiniMaxM2ForCausalLM): Mixtral's block and experts (block_sparse_moe, w1 w3 w2), with
q and k RMS-normed over their whole projections before the split into heads (OLMo 2's WHOLE), partial rotary (the
first rotary_dim numbers of each head turned), and a sigmoid router whose correction bias only chooses: the k of E
largest s + b, the chosen s renormalised to sum to 1 (no epsilon), no groups and no scaling."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from ...errors import UserError
from ..keys import LAYER_COUNT, SIZE, TOKENS, Refusal, eps, key, unnoted
from ..llama.config import LlamaConfig, preset
from ..llama.reference import float64_throughout as llama_float64_throughout
from ..mixtral.family import EXPERTS, SYMBOLS
from ..parts.attention import WHOLE, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.moe import GroupLimitedRouter, Mixture
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys, partial_rotary


@dataclass(frozen=True)
class RotaryDim(RopeKeys):
    """MiniMaxM2Config's rope: the share of each head turned from rope_parameters or a top-level
    partial_rotary_factor, else the published files' rotary_dim / head_dim (convert_rope_params_to_dict), else 1."""

    def read(self, hf: dict, config: type, model_type: str = "") -> dict:
        fields = super().read(hf, config, model_type)
        if fields["partial_rotary_factor"] is None:
            dims, head = unnoted(hf, "rotary_dim"), unnoted(hf, "head_dim", 128)
            if dims is not None:
                SIZE.check("rotary_dim", dims)
            fields["partial_rotary_factor"] = 1.0 if dims is None else dims / head
        return fields


@dataclass(frozen=True)
class MiniMaxM2Config(LlamaConfig):
    """A MiniMax-M2: grouped-query attention (head_dim its own), q and k normed over H dh and Hkv dh numbers, the first
    dr = dh x partial_rotary_factor numbers of each head turned; in every layer k of E SwiGLU experts of width F
    (intermediate_size) chosen by sigmoid scores with a correction bias."""

    n_layer: int = key("num_hidden_layers", 62, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 48, SIZE)
    n_embd: int = key("hidden_size", 3072, SIZE)
    n_inner: int = key("intermediate_size", 1536, SIZE)  # each expert's width
    vocab_size: int = key("vocab_size", 200064, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 128, SIZE)
    n_positions: int = key("max_position_embeddings", 196608, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    rope_theta: float = 5000000.0
    partial_rotary_factor: float = 1.0  # the share of each head turned: rotary_dim / head_dim in published files
    bos_token_id: int | None = key("bos_token_id", 200034, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 200020, TOKENS)
    model_type: str = "minimax_m2"
    n_experts: int = key("num_local_experts", 256, SIZE, aliases=("num_experts",))  # E
    top_k: int = key("num_experts_per_tok", 8, SIZE)  # k

    what = "a MiniMax-M2"
    classes = {"minimax_m2": "MiniMaxM2ForCausalLM"}
    groups = (RotaryDim(YARN_ROPE_TYPES, refused=("pretraining_tp",), top_level=True, share=partial_rotary(None)),)
    # The published files' keys of MiniMax-M2's own code, which MiniMaxM2Config keeps and never reads: its model always
    # norms q and k over the whole projection, scores experts by a sigmoid with a correction bias, has no shared
    # expert and attends with softmax in every layer. A file that says otherwise describes another model.
    refusals = (
        Refusal("use_qk_norm", "(q and k without norms) is not supported", lambda value, hf: value is False),
        Refusal("qk_norm_type", "is not supported (only 'per_layer')", lambda value, hf: value != "per_layer"),
        Refusal("scoring_func", "is not supported (only 'sigmoid')", lambda value, hf: value != "sigmoid"),
        Refusal("use_routing_bias", "(no correction bias) is not supported", lambda value, hf: value is False),
        Refusal("shared_intermediate_size", "(a shared expert) is not supported", lambda value, hf: value != 0),
        Refusal("attn_type_list", "with linear attention (0) is not supported", lambda value, hf: 0 in (value or ())),
    )

    def rope(self, layer: int = 0) -> Rope:
        """The first dr = int(dh x partial_rotary_factor) numbers of each head turn."""
        turned = int(self.d_head * self.partial_rotary_factor)
        return Rope(turned, self.rope_theta, self.rope_scaling, self.n_positions)

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {"dr": self.rope().turned}


# MiniMaxAI/MiniMax-M2's config.json (refs/pr/57 of its repository; M2.1, M2.5 and M2.7 have the same shapes,
# ai-dynamo/aiconfigurator's copies): 62 layers, hidden 3072, 48 heads of 128 and 8 key/value heads, rotary_dim 64 of
# 128, 256 experts of 1536 (8 a token), vocabulary 200064, 196608 positions, rope_theta 5e6, rms_norm_eps 1e-6,
# untied; bos and eos null (generation_config.json's eos is 200020). Its 3 multi-token-prediction modules are not
# part of the model here, nor of transformers'.
M2 = dict(head_dim=128, partial_rotary_factor=0.5, bos_token_id=None, eos_token_id=None)
PRESETS = {"minimax-m2": preset(MiniMaxM2Config, "minimax-m2", 62, 48, 8, 3072, 1536, 200064, 196608, **M2)}
ROUTER = GroupLimitedRouter(groups=False, renormalise=True, eps=0.0, scale=None, bias="e_score_correction_bias")
NAMES = ("input_layernorm", "self_attn", "post_attention_layernorm", "block_sparse_moe")
BLOCK = PreNorm(GroupedQueryAttention(qk_norm=WHOLE), Mixture(ROUTER, EXPERTS), names=NAMES)
MINIMAX_M2 = Decoder(BLOCK, biases="", symbols=SYMBOLS + ", dr rotated numbers of a head")


NOTE = (
    "  (transformers' float64 MiniMax-M2 computes RMSNorm, the rotary tables and the router's sigmoid in float32; its\n"
    "  reference here has them in float64, as families/minimax_m2/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """validate's float64 truth: the Llama family's (RMSNorm, the q and k norms included, and the rotary tables in
    float64) and the router's sigmoid, which transformers takes in float32 (MiniMaxM2TopKRouter:
    `sigmoid(router_logits.float())`), in the model's dtype; its eager loop over the experts (grouped_mm takes no
    float64)."""
    llama_float64_throughout(reference, model, torch, norms_per_layer=4)
    reference.set_experts_implementation("eager")

    def router(module, hidden_states, correction_bias):
        logits = torch.nn.functional.linear(hidden_states.reshape(-1, module.hidden_dim), module.weight)
        scores = logits.sigmoid()
        chosen = torch.topk(scores + correction_bias, module.top_k, dim=-1, sorted=False)[1]
        gates = scores.gather(1, chosen)
        return logits, gates / gates.sum(dim=-1, keepdim=True), chosen

    routers = [m for m in reference.modules() if type(m).__name__ == "MiniMaxM2TopKRouter"]
    if len(routers) != model.config.n_layer:
        raise UserError(
            f"validate in float64 found {len(routers)} MiniMax-M2 routers for {model.config.n_layer} layers"
        )
    for module in routers:
        module.forward = types.MethodType(router, module)


RECORD: dict[str, Any] = dict(config=MiniMaxM2Config, presets=PRESETS, label="MiniMax-M2")
ARCHITECTURE = composed("minimax_m2", MINIMAX_M2, float64_reference=float64_throughout, float64_note=NOTE, **RECORD)
