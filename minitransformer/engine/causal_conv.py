"""The depthwise causal convolution of the hybrids' recurrent layers (Gated DeltaNet, Mamba-2), as a counted product.

Each channel c has its own kernel w_c of K numbers, and its output at position p is the dot product of w_c with the
channel's last K inputs, x_c[p - K + 1 .. p] (zeros before the first position): for each channel and position, a dot
product of length K with weights. So it goes through the one door as the product of each channel's windows with its
kernel, [C, T, K] x [C, K, 1] -> [C, T, 1]: C T dot products of length K, C T K MACs (the windows are a strided view
of the inputs, not a copy).

The K - 1 inputs before a pass's first position are the layer's conv state (engine/kvcache.py's State): zeros for a
fresh sequence, the last K - 1 inputs of the earlier passes after that, which this pass then overwrites with its own.
"""

from __future__ import annotations

import numpy as np

from .shapes import ShapeOnly
from .tape import Tape


def causal_conv(at: Tape, op: str, x, weight, state=None, channels: str = "C", kernel: str = "K", bias=None):
    """x [..., T, C] -> the convolution [..., C, T, 1], each channel's T dot products with its kernel (`weight` [C, K];
    transformers' conv1d weight [C, 1, K] without its middle axis), through at.matmul under `op`; `channels` and
    `kernel` name C and K in the shapes. `state` [..., K - 1, C]: the inputs before this pass's first position, read
    and then overwritten in place with the last K - 1 inputs seen (None: a fresh sequence, no state kept). `bias` [C]:
    added to the sums in float32 before the output is rounded, as a product's bias is (torch's conv1d rounds once)."""
    *lead, T, C = x.shape
    K = weight.shape[-1]
    spec = f"{channels} T {kernel}, {channels} {kernel} 1 -> {channels} T 1"
    if isinstance(x, ShapeOnly):
        return at.matmul(op, ShapeOnly((*lead, C, T, K), x.dtype), weight[..., None], spec)
    before = np.zeros((*lead, K - 1, C), x.dtype) if state is None else state
    seen = np.concatenate([before, x], axis=-2)  # [..., K - 1 + T, C]: every input a window of this pass reads
    if state is not None:
        state[...] = seen[..., T:, :]  # the last K - 1: what the next pass's first window reads before its own
    windows = np.lib.stride_tricks.sliding_window_view(seen.swapaxes(-1, -2), K, axis=-1)  # [..., C, T, K], a view
    return at.matmul(op, windows, weight[..., None], spec, bias=None if bias is None else bias[:, None, None])
