"""What a part is: a value that owns its checkpoint tensors, its forward pass and its closed forms.

A part's forward pass declares each of its stages at the line that computes it (`product(...)` for a matrix product,
`step(...)` for any other stage, handed to the tape); a family's stage table is then what a dry run of its parts
meets (decoder.py). Its tensors are stated once, with their shapes and kinds, by `tensors(config, layer)`: the loader
checks a checkpoint against them and `params` counts them. Its closed forms, `products(config, T, t, B, layer)`, are
written from its equations alone (nothing runs), so that the tests can hold them to the ledger of a real run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Tensor:
    """A checkpoint tensor a part holds: its shape and its kind (Part.kinds)."""

    shape: tuple[int, ...]
    kind: str


Tensors = dict[str, Tensor]  # name under the part's module -> the tensor
Products = dict[str, tuple[int, int]]  # op -> (dot products, dot-product length)


def linear(name: str, rows: int, cols: int, bias: bool, kind: str, bias_kind: str = "biases") -> Tensors:
    """An nn.Linear's weight [out, in] = [rows, cols] (a GPT-2 Conv1D's [in, out]: pass them so) and, where it has one,
    its bias [rows] (or [cols], a Conv1D's: `bias` then says nothing of which; see Conv1D users)."""
    return {
        f"{name}.weight": Tensor((rows, cols), kind),
        **({f"{name}.bias": Tensor((rows,), bias_kind)} if bias else {}),
    }


def plus(bias: bool, name: str) -> str:
    """An equation's bias term: " + b_q" where the product has one."""
    return f" + b_{name}" if bias else ""


class Part:
    """A part of a model. `kinds`: the parameter kinds its tensors are of, each described, in the order a forward pass
    meets them (params lists them so); `module`: where a layer's checkpoint keeps it ("self_attn", "mlp")."""

    kinds: ClassVar[dict[str, str]] = {}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """Its checkpoint tensors in a layer, by name under its module, in the order the checkpoint holds them."""
        return {}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """(dot products, dot-product length) of each of its matrix products in a pass of T positions attending to t,
        a batch of B, in a layer, from its equations alone."""
        return {}
