"""Where a Gemma model keeps its numbers in a Hugging Face checkpoint (Gemma2ForCausalLM, Gemma3ForCausalLM): the
Llama layout with four norms a block, and Gemma 3's norms of q and k. nn.Linear weights are stored [out, in]."""

from __future__ import annotations

import re

from ..llama.layout import EMBEDDING, LAYERS, PREFIX
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from ..llama.layout import KINDS as LLAMA_KINDS
from .config import GemmaConfig

__all__ = ["EMBEDDING", "IGNORED", "KINDS", "KIND_OF", "LAYERS", "PREFIX", "gemma_shapes"]

# Buffers the model computes itself: none are saved by transformers' Gemma models.
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq"


def gemma_shapes(config: GemmaConfig) -> dict[str, tuple[int, ...]]:
    """A Gemma checkpoint, in transformers' order: attention_bias puts biases on q, k, v and o."""
    D, F, V, dh = config.n_embd, config.d_ff, config.vocab_size, config.d_head
    q, kv = config.n_head * dh, config.n_kv_head * dh
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        for name, (rows, cols) in (("q_proj", (q, D)), ("k_proj", (kv, D)), ("v_proj", (kv, D)), ("o_proj", (D, q))):
            shapes[f"{a}.{name}.weight"] = (rows, cols)
            if config.qkv_bias:
                shapes[f"{a}.{name}.bias"] = (rows,)
        if config.qk_norm:
            shapes[f"{a}.q_norm.weight"] = (dh,)
            shapes[f"{a}.k_norm.weight"] = (dh,)
        for name, (rows, cols) in (("gate_proj", (F, D)), ("up_proj", (F, D)), ("down_proj", (D, F))):
            shapes[f"{m}.{name}.weight"] = (rows, cols)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):  # fmt: skip
            shapes[f"layers.{i}.{norm}.weight"] = (D,)
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


KINDS: dict[str, str] = {
    **{k: v for k, v in LLAMA_KINDS.items() if k not in ("norms", "unembedding")},
    "qk_norms": "RMSNorm gains of each head of q and k, w_q and w_k [dh] (Gemma 3)",
    "norms": "RMSNorm gains (less one: scaled by 1 + w), four a block and one at the end",
    "unembedding": LLAMA_KINDS["unembedding"],
}

KIND_OF = (
    *(rule for rule in LLAMA_KIND_OF if rule[1] != "norms"),
    (re.compile(r"^layers\.\d+\.self_attn\.[qk]_norm\.weight$"), "qk_norms"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention|pre_feedforward|post_feedforward)_layernorm|norm)\.weight$"),
     "norms"),
)  # fmt: skip
