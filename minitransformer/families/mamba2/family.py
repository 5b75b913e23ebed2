"""Mamba-2 in the table of families (transformers' Mamba2ForCausalLM): the backbone below (`backbone`, Mamba's too), a
Mamba-2 mixer (families/parts/mamba2.py, its scan parts/ssd.py) in every layer. The cache keeps each layer's conv and
scan states, not keys and values: a decode step costs the same whatever the context, and a generation's MACs are
summed here (parts/hybrid.py), every pass as it computes its scan; what the families of state-space layers alone
share (Mamba, Falcon-Mamba, Mamba-2) is here too."""

from __future__ import annotations

from typing import Any

from ..architecture import Architecture
from ..parts.blocks import Residual
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mamba2 import Mamba2Mixer
from ..parts.norms import RMSNorm
from . import reference
from .config import PRESETS, Mamba2Config

BIASES = "in_proj's and out_proj's biases, where the config has them"  # a Mamba mixer's, where it has any


def backbone(mixer: Any, norm: Any, symbols: str, **more: Any) -> Decoder:
    """The Llama family's pre-RMSNorm residual stream with one branch a layer, a mixer where a Llama block has attention
    and an MLP, as transformers' Mamba checkpoints keep it (backbone.embeddings, backbone.layers.i.norm and .mixer,
    backbone.norm_f: weights alone):

        x = W_te[ids]
        x = x + Mixer(RMSNorm(x))        in every layer: no attention, no MLP, no positions
        logits = RMSNorm_f(x) W_U^T
    """
    return Decoder(
        Residual(mixer, norm),
        norm,
        TokenEmbedding("embeddings", "x = W_te[ids]  (no positions: the scan is in order)"),
        embedding="embeddings",
        final_norm="norm_f",
        prefix="backbone.",
        ignored=r"$^",  # its checkpoint: weights alone
        biases=BIASES,
        symbols=symbols,
        **more,
    )


class ScanFormulas(HybridFormulas):
    """Every layer a state-space mixer: no layer attends, a generation is summed pass by pass, and count's words are the
    scan's (`words`: what the mixer's scan_notes takes beside the counts, Mamba-1's name for its layers)."""

    sums_generation = True
    words: tuple[str, ...] = ()

    def attention_vs_weights(self, config: Any) -> tuple[str, str, str]:
        return self.mixer(config, 0).attention_vs_weights(config)

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        return self.mixer(config, 0).scan_notes(config, config.n_layer, n_prompt, n_new, *self.words)


def scan_family(
    name: str, decoder: Decoder, formulas: type, reference: Any, config: type, presets: dict, label: str
) -> Architecture:
    """The record of a family of state-space layers alone (parts/family.py's composed): its heads are the mixer's, which
    the header says as state-space heads or channels (heads_in_headers=False)."""
    record = dict(config=config, presets=presets, label=label, heads_in_headers=False)
    return composed(name, decoder, formulas, reference, **record)


SYMBOLS = (
    "T new positions, D d_model, Hs state-space heads of P, Ng groups of Hg heads sharing B and C, N the "
    "state per head and channel of P, I = Hs P, Cv = I + 2 Ng N conv channels, K the conv's kernel, Ks = K - 1, "
    "Nc chunks of L positions, V vocabulary, R logit rows"
)
MIXER = Mamba2Mixer()
NORM = RMSNorm(description="RMSNorm gains (the gated norm's [I] too)")
MAMBA2 = backbone(MIXER, NORM, SYMBOLS, decode_first=True)

ARCHITECTURE = scan_family("mamba2", MAMBA2, ScanFormulas, reference, Mamba2Config, PRESETS, "Mamba-2")
