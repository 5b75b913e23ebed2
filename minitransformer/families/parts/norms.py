"""The norms: RMSNorm (the Llama family's), RMSNorm with gains 1 + w (Gemma's, Qwen3.5's), LayerNorm with gains and
biases (GPT-2's, GPT-NeoX's) or gains alone (Cohere's). A norm is a part of the stream's width D: its tensors under the
module a block names ("input_layernorm"), and what the block's equation calls it ("RMSNorm", "LayerNorm"); its stage is
the block's (`ln_1: h = RMSNorm_1(x)`), which names it."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...engine.ops import constant, layer_norm, rms_norm
from .part import Part, Tensor, Tensors


@dataclass(frozen=True)
class RMSNorm(Part):
    """x / sqrt(mean(x^2) + eps) * w over the last axis; `one_plus`: the gains are stored less one (1 + w: Gemma's,
    Qwen3.5's), which its equations say as `gains_note`; eps is the config's norm_eps; `description`: what params
    calls its gains."""

    one_plus: bool = False
    gains_note: str = "  (gains 1 + w)"
    description: str = "RMSNorm gains"

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {"norms": self.description}

    @property
    def label(self) -> str:
        return "RMSNorm"

    @property
    def note(self) -> str:
        """What an equation adds after the norm's name: how its gains scale."""
        return self.gains_note if self.one_plus else ""

    def __call__(self, x, w: SimpleNamespace, config: Any):
        gains = w.weight + constant(w.weight, 1.0) if self.one_plus else w.weight
        return rms_norm(x, gains, config.norm_eps)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {"weight": Tensor((config.n_embd,), "norms")}


@dataclass(frozen=True)
class LayerNorm(Part):
    """(x - mean) / sqrt(var + eps) * w + b over the last axis, eps the config's norm_eps; without b where not `bias`
    (Cohere's). `kind`, `description`: the parameter kind its gains and biases are counted under."""

    kind: str = "layer_norms"
    description: str = "layer-norm gains and biases"
    bias: bool = True

    label = "LayerNorm"
    note = ""

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {self.kind: self.description}

    def __call__(self, x, w: SimpleNamespace, config: Any):
        return layer_norm(x, w.weight, w.bias if self.bias else None, config.norm_eps)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D = config.n_embd
        return {"weight": Tensor((D,), self.kind), **({"bias": Tensor((D,), self.kind)} if self.bias else {})}
