"""Where a Qwen3-MoE model keeps its numbers: Qwen3's attention tensors (families/qwen3/attention.py: q_norm and k_norm
after o_proj), then each layer's mlp: a sparse layer's router (mlp.gate [E, D]) and E experts (mlp.experts.{e}.gate_proj,
up_proj [F, D] and down_proj [D, F]), a dense layer's gate_proj, up_proj [F, D] and down_proj [D, F] of intermediate_size.
These are the names of Qwen's checkpoints and of what transformers 5 writes with save_pretrained (it holds the experts
fused in memory, experts.gate_up_proj [E, 2F, D] and experts.down_proj [E, D, F], and converts on loading and saving)."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from ..llama.layout import KINDS as LLAMA_KINDS
from ..llama.layout import L, gated_mlp_shapes, linear, llama_layout, pre_norm_shapes
from ..qwen3.attention import QK_NORMED
from ..qwen3.attention import shapes as qwen3_attention
from .config import Qwen3MoeConfig


def mlp_shapes(config: Qwen3MoeConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """A dense layer's gated MLP of intermediate_size; a sparse layer's router (gate [E, D]) and E experts of three
    nn.Linear weights, gate_proj, up_proj [F, D] and down_proj [D, F] (F = moe_intermediate_size)."""
    if layer in config.dense_layers:
        return gated_mlp_shapes(config, layer, F=config.dense_inner)
    D, E = config.n_embd, config.n_experts
    experts = {f"experts.{e}.{name}": shape for e in range(E) for name, shape in gated_mlp_shapes(config).items()}
    return linear("gate", E, D, False) | experts


def qwen3_moe_shapes(config: Qwen3MoeConfig) -> dict[str, tuple[int, ...]]:
    """Qwen3's attention tensors, then each layer's experts or dense MLP (nn.Linear weights are [out, in]; no biases
    but attention_bias's)."""
    return pre_norm_shapes(config, qwen3_attention, mlp_shapes)


KINDS: dict[str, str] = {
    **{
        kind: LLAMA_KINDS[kind]
        for kind in ("token_embedding", "attention_q", "attention_k", "attention_v", "attention_out")
    },
    "router": "router weights W_router [E, D]",
    "expert_gate": "experts' gate weights W_gate [F, D], E a sparse layer",
    "expert_up": "experts' up weights W_up [F, D], E a sparse layer",
    "expert_down": "experts' down weights W_down [D, F], E a sparse layer",
    "mlp_gate": "dense layers' MLP gate weights W_gate [F, D] (F = intermediate_size)",
    "mlp_up": "dense layers' MLP up weights W_up [F, D]",
    "mlp_down": "dense layers' MLP down weights W_down [D, F]",
    "biases": LLAMA_KINDS["biases"],
    "norms": "RMSNorm gains (q_norm and k_norm included)",
    "unembedding": LLAMA_KINDS["unembedding"],
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")

EXPERTS = tuple((L + rf"mlp\.experts\.\d+\.{x}_proj\.weight", f"expert_{x}") for x in ("gate", "up", "down"))
KIND_OF = kind_rules((L + r"mlp\.gate\.weight", "router"), *EXPERTS) + LLAMA_KIND_OF + kind_rules(*QK_NORMED.kind_of)
LAYOUT = llama_layout(qwen3_moe_shapes, KINDS, KIND_OF, routed_kinds=ROUTED_KINDS)
