"""Where an OLMo 2 model keeps its numbers: the Llama family's checkpoint (families/llama/layout.py) without
input_layernorm, with each layer's q_norm [H*dh], k_norm [Hkv*dh] and post_feedforward_layernorm [D]."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import KIND_OF as LLAMA_KIND_OF
from ..llama.layout import KINDS, L, attention_shapes, gated_mlp_shapes, llama_layout
from .config import Olmo2Config


def olmo2_shapes(config: Olmo2Config) -> dict[str, tuple[int, ...]]:
    """In each layer, the Llama family's attention with q_norm [H dh] and k_norm [Hkv dh] after o_proj, its gated
    MLP, then its two norms (post_attention_layernorm, post_feedforward_layernorm), in the order transformers'
    Olmo2DecoderLayer holds them; no input_layernorm."""
    D, V, q, kv = config.n_embd, config.vocab_size, config.n_head * config.d_head, config.n_kv_head * config.d_head
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        attention = attention_shapes(config) | {"q_norm.weight": (q,), "k_norm.weight": (kv,)}
        shapes |= {f"layers.{i}.self_attn.{name}": shape for name, shape in attention.items()}
        shapes |= {f"layers.{i}.mlp.{name}": shape for name, shape in gated_mlp_shapes(config).items()}
        shapes |= {
            f"layers.{i}.{norm}.weight": (D,) for norm in ("post_attention_layernorm", "post_feedforward_layernorm")
        }
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


KIND_OF = (*LLAMA_KIND_OF, *kind_rules((L + r"(self_attn\.[qk]_norm|post_feedforward_layernorm)\.weight", "norms")))
LAYOUT = llama_layout(olmo2_shapes, KINDS, KIND_OF)
