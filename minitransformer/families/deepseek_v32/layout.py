"""Where a DeepSeek-V3.2 keeps its numbers in a Hugging Face checkpoint: DeepSeek-V3's names (families/deepseek_v3/
layout.py), and in each layer's attention the lightning indexer's, as transformers' DeepseekV32Indexer names them:
`self_attn.indexer.wq_b` [Hi*di, dq], `wk` [di, D], `k_norm` (a LayerNorm's weight and bias, [di] each) and
`weights_proj` [Hi, D]. The rest (prefix, ignored names, routed experts, buffers) is DeepSeek-V3's."""

from __future__ import annotations

from dataclasses import replace

from ..architecture import kind_rules
from ..deepseek_v3 import layout as v3
from ..llama.layout import L, linear, pre_norm_shapes
from .config import DeepseekV32Config


def indexed_attention_shapes(config: DeepseekV32Config, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """MLA's tensors, then the indexer's."""
    D, dq, Hi, di = config.n_embd, config.q_lora_rank or 0, config.index_n_heads, config.index_head_dim
    k_norm = {"k_norm.weight": (di,), "k_norm.bias": (di,)}  # a LayerNorm: a gain and a bias
    indexer = (
        linear("wq_b", Hi * di, dq, False) | linear("wk", di, D, False) | k_norm | linear("weights_proj", Hi, D, False)
    )
    return v3.latent_attention_shapes(config, layer) | {f"indexer.{name}": shape for name, shape in indexer.items()}


def deepseek_v32_shapes(config: DeepseekV32Config) -> dict[str, tuple[int, ...]]:
    """DeepSeek-V3's tensors, each layer's indexer after its attention's output projection."""
    return pre_norm_shapes(config, indexed_attention_shapes, v3.mlp_shapes)


INDEXER_KINDS = {
    "indexer_q": "the indexer's query weights W_iq [Hi*di, dq] (from the query's latent)",
    "indexer_k": "the indexer's key weights W_ik [di, D]",
    "indexer_norm": "the indexer's key LayerNorm: gain and bias [di]",
    "indexer_weights": "the indexer's head weights W_iw [Hi, D]",
}
# DeepSeek-V3's kinds, the indexer's after the attention's output (the order a pass meets them).
_at = list(v3.KINDS).index("attention_out") + 1
KINDS: dict[str, str] = dict([*list(v3.KINDS.items())[:_at], *INDEXER_KINDS.items(), *list(v3.KINDS.items())[_at:]])

_INDEXER = L + r"self_attn\.indexer\."
KIND_OF = (
    kind_rules(
        (_INDEXER + r"wq_b\.weight", "indexer_q"),
        (_INDEXER + r"wk\.weight", "indexer_k"),
        (_INDEXER + r"k_norm\.(weight|bias)", "indexer_norm"),
        (_INDEXER + r"weights_proj\.weight", "indexer_weights"),
    )
    + v3.KIND_OF
)
LAYOUT = replace(v3.LAYOUT, shapes=deepseek_v32_shapes, kinds=KINDS, kind_of=KIND_OF)
