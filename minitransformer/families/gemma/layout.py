"""Where a Gemma model keeps its numbers in a Hugging Face checkpoint (Gemma2ForCausalLM, Gemma3ForCausalLM): the
Llama layout with four norms a block, and Gemma 3's norms of q and k. nn.Linear weights are stored [out, in]."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from ..llama.layout import KINDS as LLAMA_KINDS
from ..llama.layout import L, attention_shapes, gated_mlp_shapes, llama_layout
from .config import GemmaConfig

NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


def gemma_shapes(config: GemmaConfig) -> dict[str, tuple[int, ...]]:
    """A Gemma checkpoint, in transformers' order: each layer's attention (attention_bias puts biases on q, k, v and
    o; Gemma 3's q_norm and k_norm [dh]), its gated MLP, then its four norms."""
    D, V, dh = config.n_embd, config.vocab_size, config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        shapes |= {f"layers.{i}.self_attn.{name}": shape for name, shape in attention_shapes(config).items()}
        if config.qk_norm:
            shapes |= {f"layers.{i}.self_attn.q_norm.weight": (dh,), f"layers.{i}.self_attn.k_norm.weight": (dh,)}
        shapes |= {f"layers.{i}.mlp.{name}": shape for name, shape in gated_mlp_shapes(config).items()}
        shapes |= {f"layers.{i}.{norm}.weight": (D,) for norm in NORMS}
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
    *kind_rules(
        (L + r"self_attn\.[qk]_norm\.weight", "qk_norms"), (rf"({L}({'|'.join(NORMS)})|norm)\.weight", "norms")
    ),
)
# Buffers the model computes itself: none are saved by transformers' Gemma models, older Llama checkpoints' aside.
LAYOUT = llama_layout(gemma_shapes, KINDS, KIND_OF)
