"""Mamba-2 in the table of families (transformers' Mamba2ForCausalLM): the backbone of families/ssm.py, a Mamba-2 mixer
(families/parts/mamba2.py, its scan parts/ssd.py) in every layer. The cache keeps each layer's conv and scan states,
not keys and values: a decode step costs the same whatever the context, and a generation's MACs are summed here
(parts/hybrid.py), every pass as it computes its scan."""

from __future__ import annotations

from ..parts.mamba2 import Mamba2Mixer
from ..parts.norms import RMSNorm
from ..ssm import ScanFormulas, backbone, scan_family
from . import reference
from .config import PRESETS, Mamba2Config

SYMBOLS = (
    "T new positions, D d_model, Hs state-space heads of P, Ng groups of Hg heads sharing B and C, N the "
    "state per head and channel of P, I = Hs P, Cv = I + 2 Ng N conv channels, K the conv's kernel, Ks = K - 1, "
    "Nc chunks of L positions, V vocabulary, R logit rows"
)
MIXER = Mamba2Mixer()
NORM = RMSNorm(description="RMSNorm gains (the gated norm's [I] too)")
MAMBA2 = backbone(MIXER, NORM, SYMBOLS, decode_first=True)

ARCHITECTURE = scan_family("mamba2", MAMBA2, ScanFormulas, reference, Mamba2Config, PRESETS, "Mamba-2")
