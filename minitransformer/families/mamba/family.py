"""Mamba (Mamba-1) in the table of families (transformers' MambaForCausalLM): the Llama family's pre-RMSNorm residual
stream with one branch a layer, a Mamba-1 mixer (families/parts/mamba1.py) where a Llama block has attention and an
MLP:

    x = W_te[ids]
    x = x + Mixer(RMSNorm(x))        in every layer: no attention, no MLP, no positions
    logits = RMSNorm_f(x) W_U^T

The cache keeps each layer's conv and scan states, not keys and values: a decode step costs the same whatever the
context."""

from __future__ import annotations

from typing import Any

from ..parts.blocks import Residual
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mamba1 import Mamba1Mixer
from ..parts.norms import RMSNorm
from . import reference
from .config import PRESETS, MambaConfig

SYMBOLS = (
    "T new positions, D d_model, I the mixer's channels, N the state per channel, Rdt the rank of dt, K the conv's "
    "kernel, Ks = K - 1, V vocabulary, R logit rows"
)
MIXER = Mamba1Mixer()
# Falcon-Mamba's decoder too: the mixer reads from the config whether it norms dt, B and C
MAMBA = Decoder(
    Residual(MIXER, RMSNorm()),
    RMSNorm(),
    TokenEmbedding("embeddings", "x = W_te[ids]  (no positions: the scan is in order)"),
    embedding="embeddings",
    final_norm="norm_f",
    prefix="backbone.",
    ignored=r"$^",  # its checkpoint: weights alone
    biases="in_proj's and out_proj's biases, where the config has them",
    symbols=SYMBOLS,
)


class MambaFormulas(HybridFormulas):
    """Every layer a Mamba-1 mixer: no layer attends, a generation is summed pass by pass, and count's words are the
    selective scan's."""

    sums_generation = True
    layers_called = "Mamba-1"  # what count's lines call its layers

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        return MIXER.attention_vs_weights(config)

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        return MIXER.scan_notes(config, config.n_layer, n_prompt, n_new, self.layers_called)


# Its channels are the mixer's, which the header says as state-space channels (heads_in_headers=False).
ARCHITECTURE = composed("mamba", MAMBA, MambaFormulas(MAMBA), config=MambaConfig, presets=PRESETS, label="Mamba",
                        heads_in_headers=False, reference=reference)  # fmt: skip
