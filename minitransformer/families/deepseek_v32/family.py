"""DeepSeek-V3.2 in the table of families (transformers' DeepseekV32ForCausalLM): DeepSeek-V3's (families/deepseek_v3/
family.py: latent attention, the router, routed and shared experts after dense layers, here as mlp_layer_types says),
with DeepSeek Sparse Attention in each layer's attention (families/parts/indexer.py's `IndexedLatentAttention`: a
lightning indexer scores every key a query can see, and the query attends to the index_topk it ranks highest). Its
checkpoint: DeepSeek-V3's names, and the indexer's in each layer's attention (self_attn.indexer.wq_b, wk, k_norm and
weights_proj, as transformers' DeepseekV32Indexer names them)."""

from __future__ import annotations

from ...engine.stages import ATTENTION_ROLES
from ..deepseek_v3.family import ATTENTION, IGNORED, MLP, SYMBOLS, DeepseekFormulas
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.indexer import IndexedLatentAttention
from . import reference
from .config import PRESETS, DeepseekV32Config

ATTENTION_V32 = IndexedLatentAttention(runnable=ATTENTION.runnable)
INDEX_SYMBOLS = "; Hi index heads of di, ki the keys a query attends to (index_topk), s = min(t, ki) the keys it reads"
DECODER = Decoder(
    PreNorm(ATTENTION_V32, MLP),
    biases="",
    ignored=IGNORED,
    kind_order=("dense", "moe"),
    symbols=SYMBOLS + INDEX_SYMBOLS,
)


class DsaFormulas(DeepseekFormulas):
    activations = (*ATTENTION_ROLES, "index.scores", "index.sum")  # the indexer's over the keys, no weights


ARCHITECTURE = composed(
    "deepseek_v32", DECODER, DsaFormulas, reference, config=DeepseekV32Config, presets=PRESETS, label="DeepSeek-V3.2"
)
