"""Where a Llama-family model keeps its numbers in a Hugging Face checkpoint: every tensor's name and shape, and
what kind of parameter each is. nn.Linear weights are stored [out, in]: the forward pass multiplies by W.T, a view."""

from __future__ import annotations

import re

from .config import LlamaConfig

PREFIX = "model."  # the base model's prefix of every name but lm_head's
LAYERS = "layers"  # the blocks: layers.0..., layers.1...
EMBEDDING = "embed_tokens.weight"
# Buffers older checkpoints carry beside the weights, which the model computes itself: the rotary frequencies.
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq"


def llama_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """A Llama-family checkpoint: nn.Linear weights are [out, in]; biases only where the config has them."""
    D, F, V = config.n_embd, config.d_ff, config.vocab_size
    q, kv = config.n_head * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        for name, (rows, cols), bias in (
            ("q_proj", (q, D), config.qkv_bias),
            ("k_proj", (kv, D), config.qkv_bias),
            ("v_proj", (kv, D), config.qkv_bias),
            ("o_proj", (D, q), config.o_bias),
        ):
            shapes[f"{a}.{name}.weight"] = (rows, cols)
            if bias:
                shapes[f"{a}.{name}.bias"] = (rows,)
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        for name, (rows, cols) in (("gate_proj", (F, D)), ("up_proj", (F, D)), ("down_proj", (D, F))):
            shapes[f"{m}.{name}.weight"] = (rows, cols)
            if config.mlp_bias:
                shapes[f"{m}.{name}.bias"] = (rows,)
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


# kind -> what it is, in the order a forward pass meets them.
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_q": "attention query weights W_q [H*dh, D]",
    "attention_k": "attention key weights W_k [Hkv*dh, D]",
    "attention_v": "attention value weights W_v [Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp_gate": "MLP gate weights W_gate [F, D]",
    "mlp_up": "MLP up weights W_up [F, D]",
    "mlp_down": "MLP down weights W_down [D, F]",
    "biases": "biases of the linear layers that have them",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(r"^layers\.\d+\.self_attn\.q_proj\.weight$"), "attention_q"),
    (re.compile(r"^layers\.\d+\.self_attn\.k_proj\.weight$"), "attention_k"),
    (re.compile(r"^layers\.\d+\.self_attn\.v_proj\.weight$"), "attention_v"),
    (re.compile(r"^layers\.\d+\.self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(r"^layers\.\d+\.mlp\.gate_proj\.weight$"), "mlp_gate"),
    (re.compile(r"^layers\.\d+\.mlp\.up_proj\.weight$"), "mlp_up"),
    (re.compile(r"^layers\.\d+\.mlp\.down_proj\.weight$"), "mlp_down"),
    (re.compile(r"^layers\.\d+\.(self_attn|mlp)\.\w+_proj\.bias$"), "biases"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention)_layernorm|norm)\.weight$"), "norms"),
)
