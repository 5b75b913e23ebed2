"""Where a DeepSeek-V3 keeps its numbers in a Hugging Face checkpoint (as transformers 5 writes it with
save_pretrained, and as DeepSeek's own checkpoints name them): the Llama family's names for the embedding, the norms
and the dense MLPs; MLA's q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm,
kv_b_proj and o_proj; in each layer past the dense ones, `mlp.gate` (the router [E, D] and its
e_score_correction_bias [E], a buffer transformers does not count among the parameters), E experts of three
nn.Linear weights and the shared experts' three."""

from __future__ import annotations

import re

from .config import DeepseekConfig

PREFIX = "model."
LAYERS = "layers"
EMBEDDING = "embed_tokens.weight"
# DeepSeek-V3's checkpoint keeps its multi-token-prediction module as a 62nd layer (layers.61), which transformers
# skips on loading (DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected), as does this loader.
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.61\..*"


def deepseek_shapes(config: DeepseekConfig) -> dict[str, tuple[int, ...]]:
    """A DeepSeek-V3 checkpoint: nn.Linear weights are [out, in], no biases."""
    D, F, V, E, Fe = config.n_embd, config.d_ff, config.vocab_size, config.n_experts, config.moe_inner
    H, dh, dc, dr = config.n_head, config.d_head, config.kv_lora_rank, config.qk_rope_head_dim
    dn, dv = config.qk_nope_head_dim, config.v_head_dim
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        if config.q_lora_rank is None:
            shapes[f"{a}.q_proj.weight"] = (H * dh, D)
        else:
            dq = config.q_lora_rank
            shapes[f"{a}.q_a_proj.weight"] = (dq, D)
            shapes[f"{a}.q_a_layernorm.weight"] = (dq,)
            shapes[f"{a}.q_b_proj.weight"] = (H * dh, dq)
        shapes[f"{a}.kv_a_proj_with_mqa.weight"] = (dc + dr, D)
        shapes[f"{a}.kv_a_layernorm.weight"] = (dc,)
        shapes[f"{a}.kv_b_proj.weight"] = (H * (dn + dv), dc)
        shapes[f"{a}.o_proj.weight"] = (D, H * dv)
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        if not config.is_moe(i):
            for name, shape in (("gate_proj", (F, D)), ("up_proj", (F, D)), ("down_proj", (D, F))):
                shapes[f"{m}.{name}.weight"] = shape
            continue
        shapes[f"{m}.gate.weight"] = (E, D)
        shapes[f"{m}.gate.e_score_correction_bias"] = (E,)
        for e in range(E):
            for name, shape in (("gate_proj", (Fe, D)), ("up_proj", (Fe, D)), ("down_proj", (D, Fe))):
                shapes[f"{m}.experts.{e}.{name}.weight"] = shape
        Fs = config.d_shared
        for name, shape in (("gate_proj", (Fs, D)), ("up_proj", (Fs, D)), ("down_proj", (D, Fs))):
            shapes[f"{m}.shared_experts.{name}.weight"] = shape
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_q": "attention query weights: W_qa [dq, D] and W_qb [H*dh, dq], or W_q [H*dh, D]",
    "attention_kv_a": "the latent's down-projection W_kva [dc+dr, D] (latent and shared rotary key)",
    "attention_kv_b": "the latent's up-projection W_kvb [H*(dn+dv), dc] (keys without position and values)",
    "attention_out": "attention output weights W_o [D, H*dv]",
    "mlp": "dense layers' MLP weights W_gate, W_up [F, D], W_down [D, F]",
    "router": "router weights W_router [E, D]",
    "router_bias": "router's correction bias b [E] (a buffer: chooses experts only; not in transformers' count)",
    "expert_gate": "routed experts' gate weights [Fe, D], E a layer",
    "expert_up": "routed experts' up weights [Fe, D], E a layer",
    "expert_down": "routed experts' down weights [D, Fe], E a layer",
    "shared_expert": "shared experts' weights W_gate_s, W_up_s [Fs, D], W_down_s [D, Fs]",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")
# Kinds a checkpoint holds that are buffers, not parameters: loaded, but not in the parameter count (transformers
# counts model.parameters(); DeepSeek-V3's 671,026,404,352 leaves them out).
BUFFER_KINDS = ("router_bias",)

L = r"^layers\.\d+\."
KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(L + r"self_attn\.(q_proj|q_a_proj|q_b_proj)\.weight$"), "attention_q"),
    (re.compile(L + r"self_attn\.kv_a_proj_with_mqa\.weight$"), "attention_kv_a"),
    (re.compile(L + r"self_attn\.kv_b_proj\.weight$"), "attention_kv_b"),
    (re.compile(L + r"self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(L + r"mlp\.(gate|up|down)_proj\.weight$"), "mlp"),
    (re.compile(L + r"mlp\.gate\.weight$"), "router"),
    (re.compile(L + r"mlp\.gate\.e_score_correction_bias$"), "router_bias"),
    (re.compile(L + r"mlp\.experts\.\d+\.gate_proj\.weight$"), "expert_gate"),
    (re.compile(L + r"mlp\.experts\.\d+\.up_proj\.weight$"), "expert_up"),
    (re.compile(L + r"mlp\.experts\.\d+\.down_proj\.weight$"), "expert_down"),
    (re.compile(L + r"mlp\.shared_experts\.(gate|up|down)_proj\.weight$"), "shared_expert"),
    (re.compile(L + r"(input_layernorm|post_attention_layernorm|self_attn\.q_a_layernorm|self_attn\.kv_a_layernorm)"
                r"\.weight$"), "norms"),
    (re.compile(r"^norm\.weight$"), "norms"),
)  # fmt: skip
