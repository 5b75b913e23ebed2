"""Where a Mixtral keeps its numbers in a Hugging Face checkpoint: the Llama family's names for attention and norms
(families/llama/layout.py), and in each layer's `block_sparse_moe` the router (`gate`, [E, D]) and E experts of
three nn.Linear weights each, w1 (gate) and w3 (up) [F, D], w2 (down) [D, F].

This is the layout of Mistral's checkpoints and of what transformers 5 writes with save_pretrained; transformers 5
holds the experts fused in memory (experts.gate_up_proj [E, 2F, D], experts.down_proj [E, D, F]) and converts on
loading and saving."""

from __future__ import annotations

import re

from .config import MixtralConfig

PREFIX = "model."
LAYERS = "layers"
EMBEDDING = "embed_tokens.weight"
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq"


def mixtral_shapes(config: MixtralConfig) -> dict[str, tuple[int, ...]]:
    """A Mixtral checkpoint: nn.Linear weights are [out, in], no biases."""
    D, F, V, E = config.n_embd, config.d_ff, config.vocab_size, config.n_experts
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.block_sparse_moe"
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        for name, shape in (("q_proj", (q, D)), ("k_proj", (kv, D)), ("v_proj", (kv, D)), ("o_proj", (D, q))):
            shapes[f"{a}.{name}.weight"] = shape
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        shapes[f"{m}.gate.weight"] = (E, D)
        for e in range(E):
            for name, shape in (("w1", (F, D)), ("w2", (D, F)), ("w3", (F, D))):
                shapes[f"{m}.experts.{e}.{name}.weight"] = shape
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
    "router": "router weights W_router [E, D]",
    "expert_gate": "experts' gate weights W1 [F, D], E a layer",
    "expert_up": "experts' up weights W3 [F, D], E a layer",
    "expert_down": "experts' down weights W2 [D, F], E a layer",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")

KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(r"^layers\.\d+\.self_attn\.q_proj\.weight$"), "attention_q"),
    (re.compile(r"^layers\.\d+\.self_attn\.k_proj\.weight$"), "attention_k"),
    (re.compile(r"^layers\.\d+\.self_attn\.v_proj\.weight$"), "attention_v"),
    (re.compile(r"^layers\.\d+\.self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(r"^layers\.\d+\.block_sparse_moe\.gate\.weight$"), "router"),
    (re.compile(r"^layers\.\d+\.block_sparse_moe\.experts\.\d+\.w1\.weight$"), "expert_gate"),
    (re.compile(r"^layers\.\d+\.block_sparse_moe\.experts\.\d+\.w3\.weight$"), "expert_up"),
    (re.compile(r"^layers\.\d+\.block_sparse_moe\.experts\.\d+\.w2\.weight$"), "expert_down"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention)_layernorm|norm)\.weight$"), "norms"),
)
