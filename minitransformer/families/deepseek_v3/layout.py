"""Where a DeepSeek-V3 keeps its numbers in a Hugging Face checkpoint (as transformers 5 writes it with
save_pretrained, and as DeepSeek's own checkpoints name them): the Llama family's names for the embedding, the norms
and the dense MLPs; MLA's q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm,
kv_b_proj and o_proj; in each layer past the dense ones, `mlp.gate` (the router [E, D] and its
e_score_correction_bias [E], a buffer transformers does not count among the parameters), E experts of three
nn.Linear weights and the shared experts' three."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import EMBEDDINGS, L, gated_mlp_shapes, linear, llama_layout, pre_norm_shapes
from .config import DeepseekConfig

# DeepSeek-V3's checkpoint keeps its multi-token-prediction module as a 62nd layer (layers.61), which transformers
# skips on loading (DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected), as does this loader.
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.61\..*"


def latent_attention_shapes(config: DeepseekConfig, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """MLA's q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj."""
    D, H, dh, dc, dr = config.n_embd, config.n_head, config.d_head, config.kv_lora_rank, config.qk_rope_head_dim
    dn, dv, dq = config.qk_nope_head_dim, config.v_head_dim, config.q_lora_rank
    q = (
        linear("q_proj", H * dh, D, False)
        if dq is None
        else (
            linear("q_a_proj", dq, D, False) | {"q_a_layernorm.weight": (dq,)} | linear("q_b_proj", H * dh, dq, False)
        )
    )
    kv = linear("kv_a_proj_with_mqa", dc + dr, D, False) | {"kv_a_layernorm.weight": (dc,)}
    return q | kv | linear("kv_b_proj", H * (dn + dv), dc, False) | linear("o_proj", D, H * dv, False)


def mlp_shapes(config: DeepseekConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """A dense layer's gated MLP; past them the router (`gate` [E, D] and its e_score_correction_bias [E]), E experts
    of width Fe and the shared experts' gated MLP of width Fs."""
    if not config.is_moe(layer):
        return gated_mlp_shapes(config)
    D, E = config.n_embd, config.n_experts
    router = {"gate.weight": (E, D), "gate.e_score_correction_bias": (E,)}
    expert = gated_mlp_shapes(config, F=config.moe_inner)
    experts = {f"experts.{e}.{name}": shape for e in range(E) for name, shape in expert.items()}
    shared = {f"shared_experts.{name}": shape for name, shape in gated_mlp_shapes(config, F=config.d_shared).items()}
    return router | experts | shared


def deepseek_shapes(config: DeepseekConfig) -> dict[str, tuple[int, ...]]:
    """A DeepSeek-V3 checkpoint: nn.Linear weights are [out, in], no biases."""
    return pre_norm_shapes(config, latent_attention_shapes, mlp_shapes)


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

KIND_OF = kind_rules(
    *EMBEDDINGS,
    (L + r"self_attn\.(q_proj|q_a_proj|q_b_proj)\.weight", "attention_q"),
    (L + r"self_attn\.kv_a_proj_with_mqa\.weight", "attention_kv_a"),
    (L + r"self_attn\.kv_b_proj\.weight", "attention_kv_b"),
    (L + r"self_attn\.o_proj\.weight", "attention_out"),
    (L + r"mlp\.(gate|up|down)_proj\.weight", "mlp"),
    (L + r"mlp\.gate\.weight", "router"),
    (L + r"mlp\.gate\.e_score_correction_bias", "router_bias"),
    *((L + rf"mlp\.experts\.\d+\.{x}_proj\.weight", f"expert_{x}") for x in ("gate", "up", "down")),
    (L + r"mlp\.shared_experts\.(gate|up|down)_proj\.weight", "shared_expert"),
    (
        L + r"(input_layernorm|post_attention_layernorm|self_attn\.q_a_layernorm|self_attn\.kv_a_layernorm)\.weight",
        "norms",
    ),
    (r"norm\.weight", "norms"),
)
LAYOUT = llama_layout(deepseek_shapes, KINDS, KIND_OF, IGNORED, routed_kinds=ROUTED_KINDS, buffer_kinds=BUFFER_KINDS)
