"""The MLPs: the gated MLP (the Llama family's SwiGLU), act(h W_gate) * h W_up, then W_down."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS
from ...engine.stages import MLP, product, step
from ...engine.tape import Tape
from .attention import bias_of
from .part import Part, Products, Tensors, linear, plus


@dataclass(frozen=True)
class GatedMLP(Part):
    """act(h W_gate) * h W_up, then W_down: three products of width F (the config's d_ff), biases where mlp_bias.
    `reads`: what it reads, h (a pre-norm's output) or x (the stream itself: OLMo 2)."""

    reads: str = "h"
    kinds = {
        "mlp_gate": "MLP gate weights W_gate [F, D]",
        "mlp_up": "MLP up weights W_up [F, D]",
        "mlp_down": "MLP down weights W_down [D, F]",
    }

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        x, b = self.reads, getattr(config, "mlp_bias", False)
        stream = {"reads_stream": True} if x == "x" else {}
        g = at.matmul(product("mlp.gate", "mlp.gate", f"g = {x} W_gate{plus(b, 'gate')}", f"{x} [T, D], W_gate [D, F]",
                              MLP, **stream), h, p.gate_proj.weight.T, "T D, D F -> T F", bias=bias_of(p.gate_proj))  # fmt: skip
        u = at.matmul(product("mlp.up", "mlp.up", f"u = {x} W_up{plus(b, 'up')}", f"{x} [T, D], W_up [D, F]", MLP,
                              **stream), h, p.up_proj.weight.T, "T D, D F -> T F", bias=bias_of(p.up_proj))  # fmt: skip
        a = at.stage(step("activation", "mlp.act", "mlp.act", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, F]"),
                     ACTIVATIONS[config.hidden_act](g), "T F")  # fmt: skip
        a = at.stage(step("multiply", "mlp.mul", "mlp.mul", "a = a * u  (the gate, elementwise)", "a, u [T, F]"),
                     np.multiply(a, u, out=at.scratch(a)), "T F")  # fmt: skip
        return at.matmul(product("mlp.down", "mlp.down", f"m = a W_down{plus(b, 'down')}", "a [T, F], W_down [F, D]", MLP),
                         a, p.down_proj.weight.T, "T F, F D -> T D", bias=bias_of(p.down_proj))  # fmt: skip

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """gate_proj, up_proj [F, D] and down_proj [D, F], with biases where mlp_bias."""
        D, F, b = config.n_embd, config.d_ff, getattr(config, "mlp_bias", False)
        return {**linear("gate_proj", F, D, b, "mlp_gate"), **linear("up_proj", F, D, b, "mlp_up"),
                **linear("down_proj", D, F, b, "mlp_down")}  # fmt: skip

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F = config.n_embd, config.d_ff
        return {
            "mlp.gate": (B * T * F, D),  # h [T, D] x W_gate [D, F]
            "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
            "mlp.down": (B * T * D, F),  # a [T, F] x W_down [F, D]
        }
