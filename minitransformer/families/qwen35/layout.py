"""Where a Qwen3.5 model keeps its numbers in a Hugging Face checkpoint, as transformers 5 writes it with save_pretrained
(its experts fused in memory, written one nn.Linear each): the Llama family's names for the embedding, the norms and
the MLP; in a DeltaNet layer `linear_attn` (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d [Dc, 1, K], dt_bias
and A_log [Hv], the gated norm's gains [dv], out_proj), in a full-attention layer `self_attn` (q_proj twice as wide as
the heads: q and its gate; q_norm and k_norm [dh]); in a MoE layer `mlp.gate` (the router), E experts and one
`shared_expert` with its `shared_expert_gate` [1, D].

The published checkpoints are the multimodal model's: the text model under model.language_model., beside a vision
tower (model.visual.) and a multi-token-prediction module (mtp.), which transformers' Qwen3_5ForCausalLM does not
load; neither does this loader (LAYOUT: its prefixes, what it ignores)."""

from __future__ import annotations

import re

from ..architecture import Layout
from .config import FULL, Qwen35Config


def qwen35_shapes(config: Qwen35Config) -> dict[str, tuple[int, ...]]:
    """Every tensor, layer by layer as each layer's kind has them (nn.Linear weights [out, in])."""
    D, V = config.n_embd, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i, kind in enumerate(config.layer_types):
        layer = f"layers.{i}"
        shapes[f"{layer}.input_layernorm.weight"] = (D,)
        shapes |= (
            _attention(config, f"{layer}.self_attn") if kind == FULL else _deltanet(config, f"{layer}.linear_attn")
        )
        shapes[f"{layer}.post_attention_layernorm.weight"] = (D,)
        shapes |= _experts(config, f"{layer}.mlp") if config.is_moe else _mlp(f"{layer}.mlp", D, config.d_ff)
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


def _deltanet(c: Qwen35Config, at: str) -> dict[str, tuple[int, ...]]:
    D, Hv, dv = c.n_embd, c.linear_value_heads, c.linear_value_dim
    return {f"{at}.in_proj_qkv.weight": (c.conv_channels, D), f"{at}.in_proj_z.weight": (Hv * dv, D),
            f"{at}.in_proj_b.weight": (Hv, D), f"{at}.in_proj_a.weight": (Hv, D),
            f"{at}.conv1d.weight": (c.conv_channels, 1, c.linear_kernel), f"{at}.dt_bias": (Hv,), f"{at}.A_log": (Hv,),
            f"{at}.norm.weight": (dv,), f"{at}.out_proj.weight": (D, Hv * dv)}  # fmt: skip


def _attention(c: Qwen35Config, at: str) -> dict[str, tuple[int, ...]]:
    D, q, kv, dh = c.n_embd, c.n_head * c.head_dim, c.n_kv_head * c.head_dim, c.head_dim
    shapes: dict[str, tuple[int, ...]] = {}
    for name, rows, cols in (("q_proj", 2 * q, D), ("k_proj", kv, D), ("v_proj", kv, D), ("o_proj", D, q)):
        shapes[f"{at}.{name}.weight"] = (rows, cols)
        if c.attention_bias:
            shapes[f"{at}.{name}.bias"] = (rows,)
    return shapes | {f"{at}.q_norm.weight": (dh,), f"{at}.k_norm.weight": (dh,)}


def _mlp(at: str, D: int, F: int) -> dict[str, tuple[int, ...]]:
    return {f"{at}.gate_proj.weight": (F, D), f"{at}.up_proj.weight": (F, D), f"{at}.down_proj.weight": (D, F)}


def _experts(c: Qwen35Config, at: str) -> dict[str, tuple[int, ...]]:
    D, (E, _, Fe, Fs) = c.n_embd, c.experts
    shapes: dict[str, tuple[int, ...]] = {f"{at}.gate.weight": (E, D)}
    for e in range(E):
        shapes |= _mlp(f"{at}.experts.{e}", D, Fe)
    return shapes | _mlp(f"{at}.shared_expert", D, Fs) | {f"{at}.shared_expert_gate.weight": (1, D)}


KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "linear_in": "DeltaNet in-projections W_qkv [Dc, D], W_z [Hv*dv, D], W_b and W_a [Hv, D]",
    "linear_conv": "DeltaNet conv kernels [Dc, 1, Kc]",
    "linear_decay": "DeltaNet decay parameters A_log and dt_bias [Hv]",
    "linear_out": "DeltaNet output weights W_out [D, Hv*dv]",
    "attention_q": "attention query and gate weights W_q [H*2*dh, D]",
    "attention_k": "attention key weights W_k [Hkv*dh, D]",
    "attention_v": "attention value weights W_v [Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp": "MLP weights W_gate, W_up [F, D], W_down [D, F]",
    "router": "router weights W_router [E, D]",
    "expert_gate": "experts' gate weights [Fe, D], E a layer",
    "expert_up": "experts' up weights [Fe, D], E a layer",
    "expert_down": "experts' down weights [D, Fe], E a layer",
    "shared_expert": "shared expert's weights W_gate_s, W_up_s [Fs, D], W_down_s [D, Fs], and its gate [1, D]",
    "biases": "biases of the attention projections that have them",
    "norms": "RMSNorm gains (q_norm, k_norm and the DeltaNet's gated norm included)",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")

L = r"^layers\.\d+\."
KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(L + r"linear_attn\.in_proj_(qkv|z|b|a)\.weight$"), "linear_in"),
    (re.compile(L + r"linear_attn\.conv1d\.weight$"), "linear_conv"),
    (re.compile(L + r"linear_attn\.(A_log|dt_bias)$"), "linear_decay"),
    (re.compile(L + r"linear_attn\.out_proj\.weight$"), "linear_out"),
    (re.compile(L + r"self_attn\.q_proj\.weight$"), "attention_q"),
    (re.compile(L + r"self_attn\.k_proj\.weight$"), "attention_k"),
    (re.compile(L + r"self_attn\.v_proj\.weight$"), "attention_v"),
    (re.compile(L + r"self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(L + r"self_attn\.\w+_proj\.bias$"), "biases"),
    (re.compile(L + r"mlp\.(gate|up|down)_proj\.weight$"), "mlp"),
    (re.compile(L + r"mlp\.gate\.weight$"), "router"),
    (re.compile(L + r"mlp\.experts\.\d+\.gate_proj\.weight$"), "expert_gate"),
    (re.compile(L + r"mlp\.experts\.\d+\.up_proj\.weight$"), "expert_up"),
    (re.compile(L + r"mlp\.experts\.\d+\.down_proj\.weight$"), "expert_down"),
    (re.compile(L + r"mlp\.shared_expert(\.(gate|up|down)_proj|_gate)\.weight$"), "shared_expert"),
    (re.compile(L + r"(input_layernorm|post_attention_layernorm|self_attn\.[qk]_norm|linear_attn\.norm)\.weight$"),
     "norms"),
    (re.compile(r"^norm\.weight$"), "norms"),
)  # fmt: skip

# A multimodal checkpoint keeps its text model under model.language_model. (its vision tower, visual.*, and its
# multi-token-prediction layers, mtp.*, are ignored: AutoModelForCausalLM reads the text model alone).
LAYOUT = Layout(prefix="model.", prefixes=("model.language_model.",), layers="layers", embedding="embed_tokens.weight",
                ignored=r"visual\..*|mtp\..*", shapes=qwen35_shapes, kinds=KINDS, kind_of=KIND_OF,
                routed_kinds=ROUTED_KINDS)  # fmt: skip
