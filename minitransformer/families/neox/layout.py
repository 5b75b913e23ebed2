"""Where a GPT-NeoX model keeps its numbers in a Hugging Face checkpoint: every tensor's name and shape, and what
kind of parameter each is. nn.Linear weights are stored [out, in]: the forward pass multiplies by W.T, a view."""

from __future__ import annotations

from ..architecture import Layout, kind_rules
from .config import NeoXConfig


def neox_shapes(config: NeoXConfig) -> dict[str, tuple[int, ...]]:
    """A GPT-NeoX checkpoint: query_key_value's 3D rows are head by head ([H, 3, dh]); biases on the attention's two
    products only where attention_bias says so, always on the MLP's and the LayerNorms'."""
    D, F, V = config.n_embd, config.d_ff, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"embed_in.weight": (V, D)}
    for i in range(config.n_layer):
        a, m = f"layers.{i}.attention", f"layers.{i}.mlp"
        shapes[f"layers.{i}.input_layernorm.weight"] = shapes[f"layers.{i}.input_layernorm.bias"] = (D,)
        shapes[f"layers.{i}.post_attention_layernorm.weight"] = shapes[f"layers.{i}.post_attention_layernorm.bias"] = (
            D,
        )
        for name, rows in (("query_key_value", 3 * D), ("dense", D)):
            shapes[f"{a}.{name}.weight"] = (rows, D)
            if config.attention_bias:
                shapes[f"{a}.{name}.bias"] = (rows,)
        shapes[f"{m}.dense_h_to_4h.weight"], shapes[f"{m}.dense_h_to_4h.bias"] = (F, D), (F,)
        shapes[f"{m}.dense_4h_to_h.weight"], shapes[f"{m}.dense_4h_to_h.bias"] = (D, F), (D,)
    shapes["final_layer_norm.weight"] = shapes["final_layer_norm.bias"] = (D,)
    if not config.tie_word_embeddings:
        shapes["embed_out.weight"] = (V, D)
    return shapes


# kind -> what it is, in the order a forward pass meets them.
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_in [V, D]",
    "attention_qkv": "attention Q, K, V weights W_qkv [3D, D], head by head",
    "attention_out": "attention output weights W_o [D, D]",
    "mlp_up": "MLP up weights W_up [F, D]",
    "mlp_down": "MLP down weights W_down [D, F]",
    "biases": "biases of the linear layers",
    "layer_norms": "layer-norm gains and biases",
    "unembedding": "unembedding W_out [V, D] (embed_out, untied)",
}

KIND_OF = kind_rules(
    (r"embed_in\.weight", "token_embedding"),
    (r"layers\.\d+\.attention\.query_key_value\.weight", "attention_qkv"),
    (r"layers\.\d+\.attention\.dense\.weight", "attention_out"),
    (r"layers\.\d+\.mlp\.dense_h_to_4h\.weight", "mlp_up"),
    (r"layers\.\d+\.mlp\.dense_4h_to_h\.weight", "mlp_down"),
    (r"layers\.\d+\.(attention|mlp)\.\w+\.bias", "biases"),
    (r"(layers\.\d+\.(input|post_attention)_layernorm|final_layer_norm)\.(weight|bias)", "layer_norms"),
    (r"embed_out\.weight", "unembedding"),
)

# The base model's prefix is that of every name but embed_out's; older checkpoints carry beside the weights buffers the
# model computes itself: the causal mask and the rotary frequencies (transformers ignores the first two on load too).
LAYOUT = Layout(
    prefix="gpt_neox.",
    layers="layers",
    embedding="embed_in.weight",
    ignored=r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",
    shapes=neox_shapes,
    kinds=KINDS,
    kind_of=KIND_OF,
)
