"""Where GPT-2 keeps its numbers in a Hugging Face checkpoint: every tensor's name and shape, and what kind of
parameter each is. Conv1D weights are stored [in, out], so x W needs no transpose."""

from __future__ import annotations

from ..architecture import Layout, kind_rules
from .config import GPT2Config


def gpt2_shapes(config: GPT2Config) -> dict[str, tuple[int, ...]]:
    """A GPT-2 checkpoint (Conv1D weights are [in, out])."""
    D, F, V, P = config.n_embd, config.d_ff, config.vocab_size, config.n_positions
    shapes: dict[str, tuple[int, ...]] = {"wte.weight": (V, D), "wpe.weight": (P, D)}
    for i in range(config.n_layer):
        shapes |= {
            f"h.{i}.ln_1.weight": (D,),
            f"h.{i}.ln_1.bias": (D,),
            f"h.{i}.attn.c_attn.weight": (D, 3 * D),
            f"h.{i}.attn.c_attn.bias": (3 * D,),
            f"h.{i}.attn.c_proj.weight": (D, D),
            f"h.{i}.attn.c_proj.bias": (D,),
            f"h.{i}.ln_2.weight": (D,),
            f"h.{i}.ln_2.bias": (D,),
            f"h.{i}.mlp.c_fc.weight": (D, F),
            f"h.{i}.mlp.c_fc.bias": (F,),
            f"h.{i}.mlp.c_proj.weight": (F, D),
            f"h.{i}.mlp.c_proj.bias": (D,),
        }
    shapes |= {"ln_f.weight": (D,), "ln_f.bias": (D,)}
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


# kind -> what it is, in the order a forward pass meets them.
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "position_embedding": "position embedding W_pe [P, D]",
    "attention_qkv": "attention Q, K, V weights W_qkv [D, 3D]",
    "attention_out": "attention output weights W_o [D, D]",
    "mlp_up": "MLP up weights W_up [D, F]",
    "mlp_down": "MLP down weights W_down [F, D]",
    "biases": "biases of the four linear layers",
    "layer_norms": "layer-norm gains and biases",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

KIND_OF = kind_rules(
    (r"wte\.weight", "token_embedding"),
    (r"wpe\.weight", "position_embedding"),
    (r"h\.\d+\.attn\.c_attn\.weight", "attention_qkv"),
    (r"h\.\d+\.attn\.c_proj\.weight", "attention_out"),
    (r"h\.\d+\.mlp\.c_fc\.weight", "mlp_up"),
    (r"h\.\d+\.mlp\.c_proj\.weight", "mlp_down"),
    (r"h\.\d+\.(attn|mlp)\.c_\w+\.bias", "biases"),
    (r"(h\.\d+\.)?ln_(1|2|f)\.(weight|bias)", "layer_norms"),
    (r"lm_head\.weight", "unembedding"),
)

# The base model's prefix is that of every name but lm_head's; its blocks are h.0..., h.1...; some checkpoints carry
# beside the weights a buffer the model computes itself, the causal mask.
LAYOUT = Layout(
    prefix="transformer.",
    layers="h",
    embedding="wte.weight",
    ignored=r"h\.\d+\.attn\.(bias|masked_bias)",
    shapes=gpt2_shapes,
    kinds=KINDS,
    kind_of=KIND_OF,
)
