"""What the families of state-space layers alone share (Mamba, Falcon-Mamba, Mamba-2): the checkpoint's backbone around
their mixers, the names every family's config answers to, and their closed forms' words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.kvcache import State
from .architecture import Architecture
from .parts.blocks import Residual
from .parts.decoder import Decoder, TokenEmbedding
from .parts.family import composed
from .parts.hybrid import HybridFormulas

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


class MixersAlone:
    """The names every family's config answers to, in a model of state-space layers alone: no attention and no MLP; its
    heads are the mixer's (its d_inner channels I in heads of d_head), and d_ff, what count and the headers ask of every
    family's MLP, is I. Every layer "mamba" (transformers calls them "linear_attention") keeps its conv and scan states
    (mixer_state), whatever the context: no keys, no values."""

    n_layer: int
    d_inner: int
    if TYPE_CHECKING:  # each config's own

        @property
        def d_head(self) -> int: ...

        @property
        def mixer_state(self) -> State: ...

    @property
    def n_head(self) -> int:
        return self.d_inner // self.d_head

    @property
    def d_ff(self) -> int:
        return self.d_inner

    @property
    def layer_types(self) -> tuple[str, ...]:
        return ("mamba",) * self.n_layer

    def layer_cache(self, layer: int) -> State:
        return self.mixer_state


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
