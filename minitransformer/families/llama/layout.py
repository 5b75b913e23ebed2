"""Where a Llama-family model keeps its numbers in a Hugging Face checkpoint: every tensor's name and shape, and what
kind of parameter each is. nn.Linear weights are stored [out, in]: the forward pass multiplies by W.T, a view.

The checkpoint is laid out as the block is built, from its parts: each layer's first norm, its attention's tensors,
its second norm and its MLP's (`pre_norm_shapes`); the families whose block is the Llama block with other parts
(Qwen3, Mixtral, Qwen3-MoE, gpt-oss, Phi-3, DeepSeek-V3) lay theirs out with it, each part's tensors its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..architecture import Layout, kind_rules
from .config import LlamaConfig

Shapes = dict[str, tuple[int, ...]]
L = r"layers\.\d+\."  # a layer's tensors, in the kinds' patterns
# Buffers older checkpoints carry beside the weights, which the model computes itself: the rotary frequencies.
IGNORED = L + r"self_attn\.rotary_emb\.inv_freq"


def pre_norm_shapes(
    config: Any,
    attention: Callable[[Any, int], Shapes],
    mlp: Callable[[Any, int], Shapes],
    names: tuple[str, str] = ("self_attn", "mlp"),
) -> Shapes:
    """A checkpoint of pre-norm blocks (blocks.PreNorm): the token embedding; in each layer its input_layernorm,
    the attention's tensors (attention(config, layer), under names[0]), its post_attention_layernorm and the MLP's
    (under names[1]); the final norm, and lm_head where it is not the embedding."""
    D, V = config.n_embd, config.vocab_size
    shapes: Shapes = {"embed_tokens.weight": (V, D)}
    for i in range(config.n_layer):
        shapes[f"layers.{i}.input_layernorm.weight"] = (D,)
        shapes |= {f"layers.{i}.{names[0]}.{name}": shape for name, shape in attention(config, i).items()}
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = (D,)
        shapes |= {f"layers.{i}.{names[1]}.{name}": shape for name, shape in mlp(config, i).items()}
    shapes["norm.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


def linear(name: str, rows: int, cols: int, bias: bool) -> Shapes:
    """An nn.Linear's weight [out, in] and, where it has one, its bias [out]."""
    return {f"{name}.weight": (rows, cols), **({f"{name}.bias": (rows,)} if bias else {})}


def attention_shapes(config: Any, layer: int = 0) -> Shapes:
    """Grouped-query attention's q_proj, k_proj, v_proj [H dh or Hkv dh, D] and o_proj [D, H dh], each with its bias
    where the config has them."""
    D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
    b = config.qkv_bias
    return {
        **linear("q_proj", q, D, b),
        **linear("k_proj", kv, D, b),
        **linear("v_proj", kv, D, b),
        **linear("o_proj", D, q, config.o_bias),
    }


def gated_mlp_shapes(config: Any, layer: int = 0, F: int | None = None) -> Shapes:
    """The gated MLP's gate_proj, up_proj [F, D] and down_proj [D, F] (F the config's d_ff unless given), with biases
    where mlp_bias."""
    D, F, b = config.n_embd, F or config.d_ff, getattr(config, "mlp_bias", False)
    return {**linear("gate_proj", F, D, b), **linear("up_proj", F, D, b), **linear("down_proj", D, F, b)}


def llama_shapes(config: LlamaConfig) -> Shapes:
    """A Llama-family checkpoint: nn.Linear weights are [out, in]; biases only where the config has them."""
    return pre_norm_shapes(config, attention_shapes, gated_mlp_shapes)


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

# (pattern, kind) of the embedding and of grouped-query attention's weights, which the families of the Llama block
# share; then the gated MLP's, the biases' and the two norms' of each layer and the final one.
EMBEDDINGS = ((r"lm_head\.weight", "unembedding"), (r"embed_tokens\.weight", "token_embedding"))
ATTENTION = tuple(
    (L + rf"self_attn\.{x}_proj\.weight", f"attention_{kind}")
    for x, kind in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out"))
)
GATED_MLP = tuple((L + rf"mlp\.{x}_proj\.weight", f"mlp_{x}") for x in ("gate", "up", "down"))
NORMS = (rf"({L}(input|post_attention)_layernorm|norm)\.weight", "norms")
KIND_OF = kind_rules(*EMBEDDINGS, *ATTENTION, *GATED_MLP, (L + r"(self_attn|mlp)\.\w+_proj\.bias", "biases"), NORMS)


def llama_layout(
    shapes: Callable[[Any], Shapes], kinds: dict[str, str], kind_of: tuple, ignored: str = IGNORED, **more: Any
) -> Layout:
    """The layout of a checkpoint named as the Llama family's are (model.layers..., model.embed_tokens.weight; the
    rotary frequencies of older checkpoints ignored): its shapes and kinds; `more`, the rest of Layout's fields."""
    return Layout(
        prefix="model.",
        layers="layers",
        embedding="embed_tokens.weight",
        ignored=ignored,
        shapes=shapes,
        kinds=kinds,
        kind_of=kind_of,
        **more,
    )
