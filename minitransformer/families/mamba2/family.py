"""Mamba-2 in the table of families (transformers' Mamba2ForCausalLM): the Llama family's pre-RMSNorm residual stream
with one branch a layer, a Mamba-2 mixer (families/parts/mamba2.py, its scan parts/ssd.py) where a Llama block has
attention and an MLP:

    x = W_te[ids]
    x = x + Mixer(RMSNorm(x))        in every layer: no attention, no MLP, no positions
    logits = RMSNorm_f(x) W_U^T

The cache keeps each layer's conv and scan states, not keys and values: a decode step costs the same whatever the
context, and a generation's MACs are summed here (parts/hybrid.py), every pass as it computes its scan."""

from __future__ import annotations

from typing import Any

from ..parts.blocks import Residual
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mamba2 import Mamba2Mixer
from ..parts.norms import RMSNorm
from . import reference
from .config import PRESETS, Mamba2Config

SYMBOLS = (
    "T new positions, D d_model, Hs state-space heads of P, Ng groups of Hg heads sharing B and C, N the "
    "state per head and channel of P, I = Hs P, Cv = I + 2 Ng N conv channels, K the conv's kernel, Ks = K - 1, "
    "Nc chunks of L positions, V vocabulary, R logit rows"
)
MIXER = Mamba2Mixer()
NORM = RMSNorm(description="RMSNorm gains (the gated norm's [I] too)")
MAMBA2 = Decoder(
    Residual(MIXER, NORM),
    NORM,
    TokenEmbedding("embeddings", "x = W_te[ids]  (no positions: the scan is in order)"),
    embedding="embeddings",
    final_norm="norm_f",
    prefix="backbone.",
    ignored=r"$^",  # its checkpoint: weights alone
    biases="in_proj's and out_proj's biases, where the config has them",
    symbols=SYMBOLS,
    decode_first=True,
)


class Mamba2Formulas(HybridFormulas):
    """Every layer a Mamba-2 mixer: no layer attends, a generation is summed pass by pass, and count's words are the
    scan's."""

    sums_generation = True

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        return MIXER.attention_vs_weights(config)

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        return MIXER.scan_notes(config, config.n_layer, n_prompt, n_new)


# Its heads are the mixer's, which the header says as state-space heads (heads_in_headers=False).
ARCHITECTURE = composed(
    "mamba2",
    MAMBA2,
    Mamba2Formulas(MAMBA2),
    config=Mamba2Config,
    presets=PRESETS,
    label="Mamba-2",
    heads_in_headers=False,
    reference=reference,
)
