"""Where a DeepSeek-V3.2 keeps its numbers in a Hugging Face checkpoint: DeepSeek-V3's names (families/deepseek_v3/
layout.py), and in each layer's attention the lightning indexer's, as transformers' DeepseekV32Indexer names them:
`self_attn.indexer.wq_b` [Hi*di, dq], `wk` [di, D], `k_norm` (a LayerNorm's weight and bias, [di] each) and
`weights_proj` [Hi, D]. The prefix, the names of the embedding and the layers, what is ignored, which kinds are
routed experts and which buffers are DeepSeek-V3's (family.py takes them from there)."""

from __future__ import annotations

import re

from ..deepseek_v3.layout import KIND_OF as _V3_KIND_OF
from ..deepseek_v3.layout import KINDS as _V3_KINDS
from ..deepseek_v3.layout import deepseek_shapes as deepseek_v3_shapes
from .config import DeepseekV32Config


def deepseek_v32_shapes(config: DeepseekV32Config) -> dict[str, tuple[int, ...]]:
    """DeepSeek-V3's tensors, each layer's indexer after its attention's output projection."""
    D, dq, Hi, di = config.n_embd, config.q_lora_rank or 0, config.index_n_heads, config.index_head_dim
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in deepseek_v3_shapes(config).items():
        shapes[name] = shape
        if name.endswith(".self_attn.o_proj.weight"):
            a = name.removesuffix(".o_proj.weight")
            shapes[f"{a}.indexer.wq_b.weight"] = (Hi * di, dq)
            shapes[f"{a}.indexer.wk.weight"] = (di, D)
            shapes[f"{a}.indexer.k_norm.weight"] = (di,)
            shapes[f"{a}.indexer.k_norm.bias"] = (di,)
            shapes[f"{a}.indexer.weights_proj.weight"] = (Hi, D)
    return shapes


_INDEXER_KINDS = {
    "indexer_q": "the indexer's query weights W_iq [Hi*di, dq] (from the query's latent)",
    "indexer_k": "the indexer's key weights W_ik [di, D]",
    "indexer_norm": "the indexer's key LayerNorm: gain and bias [di]",
    "indexer_weights": "the indexer's head weights W_iw [Hi, D]",
}
# DeepSeek-V3's kinds, the indexer's after the attention's output (the order a pass meets them).
KINDS: dict[str, str] = {}
for _kind, _description in _V3_KINDS.items():
    KINDS[_kind] = _description
    if _kind == "attention_out":
        KINDS.update(_INDEXER_KINDS)

_A = r"^layers\.\d+\.self_attn\.indexer\."
KIND_OF = (
    (re.compile(_A + r"wq_b\.weight$"), "indexer_q"),
    (re.compile(_A + r"wk\.weight$"), "indexer_k"),
    (re.compile(_A + r"k_norm\.(weight|bias)$"), "indexer_norm"),
    (re.compile(_A + r"weights_proj\.weight$"), "indexer_weights"),
    *_V3_KIND_OF,
)
