"""DeepSeek-V3.2 in the table of families (transformers' DeepseekV32ForCausalLM): DeepSeek-V3's (families/deepseek_v3/
family.py: latent attention, the router, routed and shared experts after dense layers, here as mlp_layer_types says),
with DeepSeek Sparse Attention in each layer's attention (families/parts/indexer.py's `IndexedLatentAttention`):
- the lightning indexer scores every key a query can see: its own query heads from the query's
  latent, q_i = c_q W_iq [T, Hi, di], and one key a position, k_i = LayerNorm(h W_ik) [T, di], both turned on their
  first dr numbers (in halves, rotate_half, where MLA's rotary pairs are interleaved); each head's score q_i k_i /
  sqrt(di) through a ReLU, weighed by w = h W_iw / sqrt(Hi) [T, Hi] and summed over the heads: I [T, t]. The keys k_i
  are cached beside K and V (the indexer scores every earlier position at every step);
- each query attends to the s = min(t, ki) keys of largest I alone (ki = index_topk): its scores and mix are over
  those s keys, gathered for it, [H, T, 1, s]. transformers' eager attention computes every T x t score and masks the
  keys not chosen; the ledger counts what is computed here and keeps that dense form beside it (engine/row_chunks.py's
  on_chosen_keys; a watched or --dense-attention pass computes it that way).

Its checkpoint: DeepSeek-V3's names, and in each layer's attention the indexer's, as transformers' DeepseekV32Indexer
names them: self_attn.indexer.wq_b [Hi*di, dq], wk [di, D], k_norm (a LayerNorm's weight and bias, [di] each) and
weights_proj [Hi, D]."""

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
DECODER = Decoder(
    PreNorm(ATTENTION_V32, MLP),
    biases="",
    ignored=IGNORED,
    kind_order=("dense", "moe"),
    symbols=SYMBOLS + "; Hi index heads of di, ki the keys a query attends to (index_topk), s = min(t, ki) the keys it "
    "reads",
)


class DeepseekV32Formulas(DeepseekFormulas):
    activations = (*ATTENTION_ROLES, "index.scores", "index.sum")  # the indexer's over the keys, no weights


ARCHITECTURE = composed(
    "deepseek_v32",
    DECODER,
    DeepseekV32Formulas,
    config=DeepseekV32Config,
    presets=PRESETS,
    label="DeepSeek-V3.2",
    reference=reference,
)
