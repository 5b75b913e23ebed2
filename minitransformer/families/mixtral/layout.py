"""Where a Mixtral keeps its numbers in a Hugging Face checkpoint: the Llama family's names for attention and norms
(families/llama/layout.py), and in each layer's `block_sparse_moe` the router (`gate`, [E, D]) and E experts of
three nn.Linear weights each, w1 (gate) and w3 (up) [F, D], w2 (down) [D, F].

This is the layout of Mistral's checkpoints and of what transformers 5 writes with save_pretrained; transformers 5
holds the experts fused in memory (experts.gate_up_proj [E, 2F, D], experts.down_proj [E, D, F]) and converts on
loading and saving."""

from __future__ import annotations

from ..architecture import kind_rules
from ..llama.layout import ATTENTION, EMBEDDINGS, NORMS, L, attention_shapes, linear, llama_layout, pre_norm_shapes
from ..llama.layout import KINDS as LLAMA_KINDS
from .config import MixtralConfig


def expert_shapes(config: MixtralConfig, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """The router `gate` [E, D] and E experts' w1 (gate) [F, D], w2 (down) [D, F] and w3 (up) [F, D]."""
    D, F, E = config.n_embd, config.d_ff, config.n_experts
    experts = {
        f"experts.{e}.{name}.weight": shape
        for e in range(E)
        for name, shape in (("w1", (F, D)), ("w2", (D, F)), ("w3", (F, D)))
    }
    return linear("gate", E, D, False) | experts


def mixtral_shapes(config: MixtralConfig) -> dict[str, tuple[int, ...]]:
    """A Mixtral checkpoint: nn.Linear weights are [out, in], no biases."""
    return pre_norm_shapes(config, attention_shapes, expert_shapes, ("self_attn", "block_sparse_moe"))


KINDS: dict[str, str] = {
    **{
        kind: LLAMA_KINDS[kind]
        for kind in ("token_embedding", "attention_q", "attention_k", "attention_v", "attention_out")
    },
    "router": "router weights W_router [E, D]",
    "expert_gate": "experts' gate weights W1 [F, D], E a layer",
    "expert_up": "experts' up weights W3 [F, D], E a layer",
    "expert_down": "experts' down weights W2 [D, F], E a layer",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")

M = L + r"block_sparse_moe\."
KIND_OF = kind_rules(
    *EMBEDDINGS,
    *ATTENTION,
    (M + r"gate\.weight", "router"),
    *(
        (M + rf"experts\.\d+\.{w}\.weight", f"expert_{kind}")
        for w, kind in (("w1", "gate"), ("w3", "up"), ("w2", "down"))
    ),
    NORMS,
)
LAYOUT = llama_layout(mixtral_shapes, KINDS, KIND_OF, routed_kinds=ROUTED_KINDS)
