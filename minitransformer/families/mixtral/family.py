"""Mixtral in the table of families (transformers' MixtralForCausalLM): the Llama family's pre-norm block (Mistral's
grouped-query attention, with its sliding window where the config sets one) whose MLP is a sparse mixture of experts
(families/parts/moe.py): a softmax router picks k of E experts for each token, its top k renormalised to sum to 1,
and each expert, a SwiGLU MLP (w1 gate, w3 up, w2 down), computes only the rows of its tokens, weighted by their
gates. Every token's rows are computed by exactly k experts, so a layer's expert MACs are T k x 3 D F whichever
experts the router chose.

Its checkpoint is Mistral's (what transformers 5 writes with save_pretrained: it holds the experts fused in memory,
experts.gate_up_proj [E, 2F, D] and experts.down_proj [E, D, F], and converts on loading and saving): the mixture in
each layer's block_sparse_moe, the router `gate` [E, D] and E experts of three nn.Linear weights each."""

from __future__ import annotations

from ..llama.family import SYMBOLS as LLAMA_SYMBOLS
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.moe import Mixture, SoftmaxRouter, SwiGLUExperts
from . import reference
from .config import PRESETS, MixtralConfig

SYMBOLS = LLAMA_SYMBOLS + ", E experts, k experts per token, Te tokens routed to expert e (T k over all E)"
EXPERTS = SwiGLUExperts(
    names=(("w1", "gate"), ("w2", "down"), ("w3", "up")),
    symbols=("W1_e", "W3_e", "W2_e"),
    described=(
        "experts' gate weights W1 [F, D], E a layer",
        "experts' up weights W3 [F, D], E a layer",
        "experts' down weights W2 [D, F], E a layer",
    ),
)
MIXTURE = Mixture(SoftmaxRouter(), EXPERTS)
MIXTRAL = Decoder(
    PreNorm(
        GroupedQueryAttention(),
        MIXTURE,
        names=("input_layernorm", "self_attn", "post_attention_layernorm", "block_sparse_moe"),
    ),
    biases="",
    symbols=SYMBOLS,
)

ARCHITECTURE = composed("mixtral", MIXTRAL, config=MixtralConfig, presets=PRESETS, label="Mixtral", reference=reference)
