"""The double-gated short convolution, as transformers' Lfm2ShortConv computes it (LFM2's and LFM2-MoE's conv
layers): a mixer with no attention and no scan, whose memory of the past is the last L - 1 inputs of its conv.

    [B, C, x] = h W_in                  three D-wide streams from one product (W_in [D, 3D]; B first, then C, then x)
    u = B * x                           the input gate, elementwise
    y = causal_conv(u)                  depthwise, kernel L (conv_L_cache): each channel's last L values of u . its
                                        kernel (engine/causal_conv.py), no activation
    z = C * y                           the output gate, elementwise
    o = z W_out

Biases on in_proj, the conv and out_proj where the config's conv_bias. Its state (the layer's `State`: "conv" [L - 1,
D], the last L - 1 values of u) is what the cache keeps between passes, the same size at any context. A left-padded
row's pad slots enter it as zeros: u is zeroed there (transformers zeroes the layer's input h, which leaves
b_B * b_x in u where in_proj has a bias; without biases the two are the same).

Symbols: D d_model, L the conv's kernel (Ls = L - 1 kept). Per position, its products with weights: in_proj 3 D D,
the conv D L (each channel a dot product of length L with its kernel, as every causal conv here is counted), out_proj
D D; the gates are elementwise, no dot products.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.causal_conv import causal_conv
from ...engine.ops import without_pads
from ...engine.stages import CONV_WINDOWS, Stage, by_op
from ...engine.tape import Tape
from .attention import bias_of
from .blocks import LayerInputs
from .part import Part, Products, Tensor, Tensors, linear, plus

SHORT_CONV = "short conv projections and conv"  # count's summary group of its products (all with weights)


@dataclass(frozen=True)
class ShortConv(Part):
    """LFM2's double-gated short conv of a config with n_embd, conv_kernel (L) and conv_bias."""

    kinds = {
        "conv_in": "short conv in-projection W_in [3D, D] (B, C, x)",
        "conv_kernel": "short conv kernels [D, 1, L]",
        "conv_out": "short conv out-projection W_out [D, D]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        b = config.conv_bias
        return by_op(
            Stage("conv.in_proj", ("conv.in_proj",), "matmul", f"[B C x] = h W_in{plus(b, 'in')}",
                  "h [T, D], W_in [D, 3D]", SHORT_CONV, product="projection"),
            Stage("conv.split", ("conv.B", "conv.C", "conv.x"), "reshape", "B, C, x: its three D-wide thirds",
                  "[T, 3D]"),
            Stage("conv.input_gate", ("conv.u",), "multiply",
                  "u = B * x  (elementwise; 0 at a left-padded row's pad slots)", "B, x [T, D]"),
            Stage("conv.conv", ("conv.conv",), "matmul",
                  f"y = conv(u){plus(b, 'conv')}: each channel's last L values of u . its kernel (L - 1 of them kept in "
                  "the state)",
                  "windows [D, T, L], w [D, L, 1]", SHORT_CONV,
                  state=CONV_WINDOWS, product="conv"),
            Stage("conv.y", ("conv.y",), "reshape", "y -> [T, D]  (no activation)", "y [D, T, 1]"),
            Stage("conv.output_gate", ("conv.z",), "multiply", "z = C * y  (elementwise)", "C, y [T, D]"),
            Stage("conv.out_proj", ("conv.out",), "matmul", f"o = z W_out{plus(b, 'out')}", "z [T, D], W_out [D, D]",
                  SHORT_CONV, product="projection"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """h [T, D] -> o [T, D]; `inputs.cache` (the layer's state, or None: no cache) holds the conv's last L - 1
        inputs, read and overwritten in place; `inputs.pads`, a left-padded batch's pad slots."""
        at, D = at.declaring(self.declared(config)), config.n_embd
        bcx = at.matmul("conv.in_proj", h, p.in_proj.weight.T, "T D, D 3D -> T 3D", bias=bias_of(p.in_proj))
        B, C, x = at.stage("conv.split", (bcx[..., :D], bcx[..., D : 2 * D], bcx[..., 2 * D :]), "T D")
        u = at.stage("conv.input_gate", without_pads(B * x, at.dims.past, inputs.pads), "T D")
        state = None if inputs.cache is None else inputs.cache["conv"]
        # the conv's bias added to its sums before they are rounded, once, as torch's conv1d does (and every product's)
        y = causal_conv(at, "conv.conv", u, p.conv.weight[:, 0, :], state, "D", "L", bias=bias_of(p.conv))
        y = at.stage("conv.y", y[..., 0].swapaxes(-1, -2), "T D")
        z = at.stage("conv.output_gate", np.multiply(C, y, out=at.scratch(y)), "T D")
        return at.matmul("conv.out_proj", z, p.out_proj.weight.T, "T D, D D -> T D", bias=bias_of(p.out_proj))

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """in_proj [3D, D], the conv's kernels [D, 1, L], out_proj [D, D]; each with its bias where conv_bias."""
        D, b = config.n_embd, config.conv_bias
        return {
            **linear("in_proj", 3 * D, D, b, "conv_in"),
            "conv.weight": Tensor((D, 1, config.conv_kernel), "conv_kernel"),
            **({"conv.bias": Tensor((D,), "biases")} if b else {}),
            **linear("out_proj", D, D, b, "conv_out"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D = config.n_embd
        return {
            "conv.in_proj": (B * T * 3 * D, D),  # h [T, D] x W_in [D, 3D]
            "conv.conv": (B * T * D, config.conv_kernel),  # each channel's L-wide window of u x its kernel
            "conv.out_proj": (B * T * D, D),  # z [T, D] x W_out [D, D]
        }
