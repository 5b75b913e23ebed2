"""Where a Phi-3 model keeps its numbers in a Hugging Face checkpoint: the Llama layout with q, k and v in one tensor
(qkv_proj) and the MLP's gate and up in another (gate_up_proj); nn.Linear weights are [out, in], no biases."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import EMBEDDINGS, NORMS, L, linear, llama_layout, pre_norm_shapes
from .config import Phi3Config


def phi3_shapes(config: Phi3Config) -> dict[str, tuple[int, ...]]:
    """A Phi-3 checkpoint: qkv_proj [H dh + 2 Hkv dh, D] (q rows first, then k, then v), gate_up_proj [2F, D]
    (gate rows first), no biases."""
    D, F, q, kv = config.n_embd, config.d_ff, config.n_head * config.d_head, config.n_kv_head * config.d_head

    def attention(config: Phi3Config, layer: int) -> dict[str, tuple[int, ...]]:
        return linear("qkv_proj", q + 2 * kv, D, False) | linear("o_proj", D, q, False)

    def mlp(config: Phi3Config, layer: int) -> dict[str, tuple[int, ...]]:
        return linear("gate_up_proj", 2 * F, D, False) | linear("down_proj", D, F, False)

    return pre_norm_shapes(config, attention, mlp)


# kind -> what it is, in the order a forward pass meets them.
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_qkv": "attention query, key and value weights in one, W_qkv [H*dh + 2*Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp_gate_up": "MLP gate and up weights in one, W_gate_up [2F, D]",
    "mlp_down": "MLP down weights W_down [D, F]",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

KIND_OF = kind_rules(
    *EMBEDDINGS,
    (L + r"self_attn\.qkv_proj\.weight", "attention_qkv"),
    (L + r"self_attn\.o_proj\.weight", "attention_out"),
    (L + r"mlp\.gate_up_proj\.weight", "mlp_gate_up"),
    (L + r"mlp\.down_proj\.weight", "mlp_down"),
    NORMS,
)
LAYOUT = llama_layout(phi3_shapes, KINDS, KIND_OF)
