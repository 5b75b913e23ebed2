"""Where a gpt-oss keeps its numbers in a Hugging Face checkpoint (as transformers 5 saves GptOssForCausalLM): the
Llama family's names for attention (with biases) and norms, each layer's `self_attn.sinks` [H], and in `mlp` the
router (`router.weight` [E, D], `router.bias` [E]) and the E experts fused in 3-D tensors stored [in, out], unlike
nn.Linear: `experts.gate_up_proj` [E, D, 2F] (gate and up columns interleaved: gate at even columns, up at odd
ones), `experts.gate_up_proj_bias` [E, 2F], `experts.down_proj` [E, F, D], `experts.down_proj_bias` [E, D]."""

from __future__ import annotations

import re

from .config import GptOssConfig

PREFIX = "model."
LAYERS = "layers"
EMBEDDING = "embed_tokens.weight"
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq"


def gpt_oss_shapes(config: GptOssConfig) -> dict[str, tuple[int, ...]]:
    """A gpt-oss checkpoint, tensor by tensor, in transformers' order within each layer."""
    D, F, V, E, H = config.n_embd, config.d_ff, config.vocab_size, config.n_experts, config.n_head
    q, kv = H * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        for name, (rows, cols) in (("q_proj", (q, D)), ("k_proj", (kv, D)), ("v_proj", (kv, D)), ("o_proj", (D, q))):
            shapes[f"{a}.{name}.weight"] = (rows, cols)
            if config.qkv_bias:
                shapes[f"{a}.{name}.bias"] = (rows,)
        shapes[f"{a}.sinks"] = (H,)
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        shapes[f"{m}.router.weight"] = (E, D)
        shapes[f"{m}.router.bias"] = (E,)
        shapes[f"{m}.experts.gate_up_proj"] = (E, D, 2 * F)
        shapes[f"{m}.experts.gate_up_proj_bias"] = (E, 2 * F)
        shapes[f"{m}.experts.down_proj"] = (E, F, D)
        shapes[f"{m}.experts.down_proj_bias"] = (E, D)
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


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

KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(r"^layers\.\d+\.self_attn\.q_proj\.weight$"), "attention_q"),
    (re.compile(r"^layers\.\d+\.self_attn\.k_proj\.weight$"), "attention_k"),
    (re.compile(r"^layers\.\d+\.self_attn\.v_proj\.weight$"), "attention_v"),
    (re.compile(r"^layers\.\d+\.self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(r"^layers\.\d+\.self_attn\.[qkvo]_proj\.bias$"), "attention_biases"),
    (re.compile(r"^layers\.\d+\.self_attn\.sinks$"), "attention_sinks"),
    (re.compile(r"^layers\.\d+\.mlp\.router\.(weight|bias)$"), "router"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.gate_up_proj$"), "expert_gate_up"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.down_proj$"), "expert_down"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.(gate_up|down)_proj_bias$"), "expert_biases"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention)_layernorm|norm)\.weight$"), "norms"),
)
