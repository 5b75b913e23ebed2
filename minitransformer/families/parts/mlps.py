"""The MLPs: the gated MLP (the Llama family's SwiGLU), act(h W_gate) * h W_up, then W_down, and the same with its gate
and up in one product (Phi-3's, GLM-4's); the MLP of two products around an activation (GPT-NeoX's),
act(h W_up) W_down."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS, constant
from ...engine.stages import MLP, Stage, by_op
from ...engine.tape import Tape
from .attention import bias_of
from .part import Part, Products, Tensors, applied, linear, plus


@dataclass(frozen=True)
class GatedMLP(Part):
    """act(h W_gate) * h W_up, then W_down: three products of width F (the config's d_ff), biases where mlp_bias.
    `reads`: what it reads, h (a pre-norm's output) or x (the stream itself: OLMo 2); `width`: the config's field of F
    where it is not d_ff (the dense layers beside experts: Qwen3-MoE's intermediate_size), which its tape sizes F to;
    `activation`: how its equation names the activation (the config's hidden_act computes it); `names`: the
    checkpoint's gate, up and down modules (LFM2's w1, w3, w2); `multipliers`: the config's field of two numbers g
    is multiplied by before the activation and the output after W_down (Falcon-H1's mlp_multipliers)."""

    reads: str = "h"
    width: str = "d_ff"
    activation: str = "SiLU: g sigmoid(g)"
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    multipliers: str = ""
    kinds = {
        "mlp_gate": "MLP gate weights W_gate [F, D]",
        "mlp_up": "MLP up weights W_up [F, D]",
        "mlp_down": "MLP down weights W_down [D, F]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        x, b, reads_x = self.reads, (lambda n: plus(getattr(config, "mlp_bias", False), n)), self.reads == "x"
        return by_op(
            Stage("mlp.gate", ("mlp.gate",), "matmul", f"g = {x} W_gate{b('gate')}", f"{x} [T, D], W_gate [D, F]", MLP,
                  reads_stream=reads_x),
            Stage("mlp.up", ("mlp.up",), "matmul", f"u = {x} W_up{b('up')}", f"{x} [T, D], W_up [D, F]", MLP,
                  reads_stream=reads_x),
            *((Stage("mlp.gate_scale", ("mlp.gate_scaled",), "scale", f"g = {self.multipliers}[0] g", "g [T, F]"),)
              if self.multipliers else ()),
            Stage("mlp.act", ("mlp.act",), "activation", f"a = act(g)  ({self.activation})", "g [T, F]"),
            Stage("mlp.mul", ("mlp.mul",), "multiply", "a = a * u  (the gate, elementwise)", "a, u [T, F]"),
            Stage("mlp.down", ("mlp.down",), "matmul", f"m = a W_down{b('down')}", "a [T, F], W_down [F, D]", MLP),
            *((Stage("mlp.down_scale", ("mlp.down_scaled",), "scale", f"m = {self.multipliers}[1] m", "m [T, D]"),)
              if self.multipliers else ()),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        if self.width != "d_ff":
            at = at.with_sizes(F=getattr(config, self.width))
        gate, up, down = (getattr(p, name) for name in self.names)
        g = at.matmul("mlp.gate", h, gate.weight.T, "T D, D F -> T F", bias=bias_of(gate))
        u = at.matmul("mlp.up", h, up.weight.T, "T D, D F -> T F", bias=bias_of(up))
        gate_multiplier, down_multiplier = getattr(config, self.multipliers) if self.multipliers else (None, None)
        if gate_multiplier is not None:
            g = at.stage("mlp.gate_scale", g * constant(g, gate_multiplier), "T F")
        a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
        a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
        m = at.matmul("mlp.down", a, down.weight.T, "T F, F D -> T D", bias=bias_of(down))
        return m if down_multiplier is None else at.stage("mlp.down_scale", m * constant(m, down_multiplier), "T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """gate_proj, up_proj [F, D] and down_proj [D, F] (as `names` calls them), with biases where mlp_bias."""
        D, F, b = config.n_embd, getattr(config, self.width), getattr(config, "mlp_bias", False)
        gate, up, down = self.names
        return {
            **linear(gate, F, D, b, "mlp_gate"),
            **linear(up, F, D, b, "mlp_up"),
            **linear(down, D, F, b, "mlp_down"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return applied(self.tensors(config), B * T, dict(zip(("mlp.gate", "mlp.up", "mlp.down"), self.names)))


@dataclass(frozen=True)
class OneKindGatedMLP(GatedMLP):
    """The gated MLP with its three matrices one kind, `mlp` (Qwen3.5's MLP; DeepSeek-V3's dense layers', whose
    `kinds` says so), where the parameter table shows it as one line beside experts."""

    kinds = {"mlp": "MLP weights W_gate, W_up [F, D], W_down [D, F]"}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {name: replace(tensor, kind="mlp") for name, tensor in super().tensors(config, layer).items()}


@dataclass(frozen=True)
class UngatedMLP(Part):
    """u = h W_up + b_up, g = act(u), m = g W_down + b_down: two products of width F (the config's d_ff) around the
    activation the config's hidden_act names, biases where `bias` (GPT-NeoX's). `names`: the checkpoint's up and down
    modules (nn.Linear, weights [out, in])."""

    names: tuple[str, str] = ("up_proj", "down_proj")
    bias: bool = True
    kinds = {"mlp_up": "MLP up weights W_up [F, D]", "mlp_down": "MLP down weights W_down [D, F]"}

    def stages(self, config: Any) -> dict[str, Stage]:
        up, down = f"u = h W_up{plus(self.bias, 'up')}", f"m = g W_down{plus(self.bias, 'down')}"
        return by_op(
            Stage("mlp.up", ("mlp.up",), "matmul", up, "h [T, D], W_up [D, F]", MLP),
            Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
            Stage("mlp.down", ("mlp.down",), "matmul", down, "g [T, F], W_down [F, D]", MLP),
        )

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        up, down = (getattr(p, name) for name in self.names)
        u = at.matmul("mlp.up", h, up.weight.T, "T D, D F -> T F", bias=bias_of(up))
        g = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](u), "T F")
        return at.matmul("mlp.down", g, down.weight.T, "T F, F D -> T D", bias=bias_of(down))

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, F = config.n_embd, config.d_ff
        return {
            **linear(self.names[0], F, D, self.bias, "mlp_up"),
            **linear(self.names[1], D, F, self.bias, "mlp_down"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return applied(self.tensors(config), B * T, dict(zip(("mlp.up", "mlp.down"), self.names)))


@dataclass(frozen=True)
class FusedGatedMLP(GatedMLP):
    """The gated MLP whose gate and up are one product, cut in two (gate first: transformers' chunk(2)): act(g) * u,
    then W_down (Phi-3's, GLM-4's gate_up_proj [2F, D])."""

    kinds = {
        "mlp_gate_up": "MLP gate and up weights in one, W_gate_up [2F, D]",
        "mlp_down": "MLP down weights W_down [D, F]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        gated = super().stages(config)
        return by_op(
            Stage(
                "mlp.gate_up",
                ("mlp.gate_up",),
                "matmul",
                "[g u] = h W_gate_up  (one product: 2F columns)",
                "h [T, D], W_gate_up [D, 2F]",
                MLP,
            ),
            Stage(
                "mlp.split",
                ("mlp.gate", "mlp.up"),
                "reshape",
                "g, u = the first F, last F columns (gate first)",
                "gu [T, 2F]",
            ),
            *(gated[op] for op in ("mlp.act", "mlp.mul", "mlp.down")),
        )

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        F = config.d_ff
        gu = at.matmul("mlp.gate_up", h, p.gate_up_proj.weight.T, "T D, D 2F -> T 2F")
        g, u = at.stage("mlp.split", (gu[..., :F], gu[..., F:]), "T F")
        a = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](g), "T F")
        a = at.stage("mlp.mul", np.multiply(a, u, out=at.scratch(a)), "T F")
        return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """gate_up_proj [2F, D] (the gate's rows first) and down_proj [D, F], no biases."""
        D, F = config.n_embd, config.d_ff
        return {
            **linear("gate_up_proj", 2 * F, D, False, "mlp_gate_up"),
            **linear("down_proj", D, F, False, "mlp_down"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return applied(self.tensors(config), B * T, {"mlp.gate_up": "gate_up_proj", "mlp.down": "down_proj"})
