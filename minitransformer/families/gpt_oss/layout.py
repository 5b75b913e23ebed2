"""Where a gpt-oss keeps its numbers in a Hugging Face checkpoint (as transformers 5 saves GptOssForCausalLM): the
Llama family's names for attention (with biases) and norms, each layer's `self_attn.sinks` [H], and in `mlp` the
router (`router.weight` [E, D], `router.bias` [E]) and the E experts fused in 3-D tensors stored [in, out], unlike
nn.Linear: `experts.gate_up_proj` [E, D, 2F] (gate and up columns interleaved: gate at even columns, up at odd
ones), `experts.gate_up_proj_bias` [E, 2F], `experts.down_proj` [E, F, D], `experts.down_proj_bias` [E, D]."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import ATTENTION, EMBEDDINGS, NORMS, L, attention_shapes, linear, llama_layout, pre_norm_shapes
from .config import GptOssConfig


def attention_with_sinks(config: GptOssConfig, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """The Llama family's attention tensors (biases on q, k, v and o under attention_bias) and the sinks [H]."""
    return attention_shapes(config) | {"sinks": (config.n_head,)}


def expert_shapes(config: GptOssConfig, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """The router [E, D] and its bias, and the E experts' fused tensors, stored [in, out]."""
    D, F, E = config.n_embd, config.d_ff, config.n_experts
    return linear("router", E, D, True) | {
        "experts.gate_up_proj": (E, D, 2 * F),
        "experts.gate_up_proj_bias": (E, 2 * F),
        "experts.down_proj": (E, F, D),
        "experts.down_proj_bias": (E, D),
    }


def gpt_oss_shapes(config: GptOssConfig) -> dict[str, tuple[int, ...]]:
    """A gpt-oss checkpoint, tensor by tensor, in transformers' order within each layer."""
    return pre_norm_shapes(config, attention_with_sinks, expert_shapes)


KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_q": "attention query weights W_q [H*dh, D]",
    "attention_k": "attention key weights W_k [Hkv*dh, D]",
    "attention_v": "attention value weights W_v [Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "attention_biases": "attention biases b_q, b_k, b_v, b_o",
    "attention_sinks": "attention sinks: one logit per head [H]",
    "router": "router weights W_router [E, D] and bias [E]",
    "expert_gate_up": "experts' fused gate and up weights W_gu [D, 2F], E a layer",
    "expert_down": "experts' down weights W_down [F, D], E a layer",
    "expert_biases": "experts' biases b_gu [2F] and b_down [D], E a layer",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate_up", "expert_down", "expert_biases")

KIND_OF = kind_rules(
    *EMBEDDINGS,
    *ATTENTION,
    (L + r"self_attn\.[qkvo]_proj\.bias", "attention_biases"),
    (L + r"self_attn\.sinks", "attention_sinks"),
    (L + r"mlp\.router\.(weight|bias)", "router"),
    (L + r"mlp\.experts\.gate_up_proj", "expert_gate_up"),
    (L + r"mlp\.experts\.down_proj", "expert_down"),
    (L + r"mlp\.experts\.(gate_up|down)_proj_bias", "expert_biases"),
    NORMS,
)
LAYOUT = llama_layout(gpt_oss_shapes, KINDS, KIND_OF, routed_kinds=ROUTED_KINDS)
