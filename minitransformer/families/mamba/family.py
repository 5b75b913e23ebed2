"""Mamba (Mamba-1) in the table of families (transformers' MambaForCausalLM): Mamba-2's backbone
(families/mamba2/family.py), a Mamba-1 mixer (families/parts/mamba1.py) in every layer. The cache keeps each layer's
conv and scan states, not keys and values: a decode step costs the same whatever the context."""

from __future__ import annotations

from ..mamba2.family import ScanFormulas, backbone, scan_family
from ..parts.mamba1 import Mamba1Mixer
from ..parts.norms import RMSNorm
from . import reference
from .config import PRESETS, MambaConfig

SYMBOLS = (
    "T new positions, D d_model, I the mixer's channels, N the state per channel, Rdt the rank of dt, K the conv's "
    "kernel, Ks = K - 1, V vocabulary, R logit rows"
)
# Falcon-Mamba's decoder too: the mixer reads from the config whether it norms dt, B and C
MAMBA = backbone(Mamba1Mixer(), RMSNorm(), SYMBOLS)


class MambaFormulas(ScanFormulas):
    words = ("Mamba-1",)  # what count's lines call its layers


ARCHITECTURE = scan_family("mamba", MAMBA, MambaFormulas, reference, MambaConfig, PRESETS, "Mamba")
