"""Mamba-2's forward pass, as transformers' Mamba2ForCausalLM computes it: the Llama family's pre-RMSNorm residual
stream with one branch a block, a Mamba-2 mixer (mixer.py) where a Llama block has attention and an MLP:

    x = W_te[ids]
    x = x + Mixer(RMSNorm(x))        in every layer: no attention, no MLP, no positions
    logits = RMSNorm_f(x) W_U^T

The cache keeps each layer's conv and scan states (mixer.py), not keys and values: a decode step costs the same
whatever the context.
"""

from __future__ import annotations

from ...engine.ops import rms_norm
from ...engine.tape import Tape
from .config import Mamba2Config
from .mixer import mamba_mixer


def mamba2(ids, p, config: Mamba2Config, cache, tape: Tape, all_positions: bool, pads=None):
    """Token ids [T] (or [B, T], left-padded by `pads`) -> logits [R, V]: for every position, or the last one only."""
    x = tape.stage("embed", p.embeddings.weight[ids], "T D")
    for i, layer in enumerate(p.layers):
        at = tape.layer(i)
        state = cache.layer(i) if cache is not None else None
        h = at.stage("ln_1", rms_norm(x, layer.norm.weight, config.layer_norm_epsilon), "T D")
        x = at.stage("resid_post", x + mamba_mixer(h, layer.mixer, config, at, state, pads), "T D")
    h = tape.stage("ln_f", rms_norm(x, p.norm_f.weight, config.layer_norm_epsilon), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(tape.dims.T)
    unembedding = p.embeddings.weight if config.tie_word_embeddings else p.lm_head.weight
    return tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")
