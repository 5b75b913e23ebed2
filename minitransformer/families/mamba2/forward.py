"""Mamba-2's forward pass, as transformers' Mamba2ForCausalLM computes it: the Llama family's pre-RMSNorm residual
stream with one branch a layer (families/blocks.py's Residual), a Mamba-2 mixer (mixer.py) where a Llama block has
attention and an MLP:

    x = W_te[ids]
    x = x + Mixer(RMSNorm(x))        in every layer: no attention, no MLP, no positions
    logits = RMSNorm_f(x) W_U^T

The cache keeps each layer's conv and scan states (mixer.py), not keys and values: a decode step costs the same
whatever the context.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...engine.tape import Tape
from ..blocks import LayerInputs, Residual, rms
from ..decoder import Decoder
from .mixer import mamba_mixer


def mixer(h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
    """The Mamba-2 mixer as a block's part: its cache's handle is the layer's state; a batch's pads enter no state."""
    return mamba_mixer(h, p, config, at, inputs.cache, inputs.pads)


# Token ids [T] (or [B, T], left-padded by `pads`) -> logits [R, V]: for every position, or the last one only.
mamba2 = Decoder(Residual(mixer, rms), rms, embedding="embeddings", final_norm="norm_f")
