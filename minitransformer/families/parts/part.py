"""What a part is: a value that owns its checkpoint tensors, its stages, its forward pass and its closed forms.

A part declares its stages once (`stages(config)`: each one's op, capture names, equation and what it reads, as
transformers' modules declare their submodules in __init__), and its forward pass names each by its op on a tape that
knows them (Tape.declaring); a family's stage table is what a dry run of its parts meets (decoder.py), so a stage
declared and never computed, or computed and never declared, cannot be in it. Its tensors are stated once, with their shapes and kinds, by `tensors(config, layer)`: the loader
checks a checkpoint against them and `params` counts them. Its closed forms, `products(config, T, t, B, layer)`, are
written from its equations alone (nothing runs), so that the tests can hold them to the ledger of a real run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from functools import lru_cache
from typing import Any, ClassVar

from ...engine.stages import Stage


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


def applied(tensors: Tensors, rows: int, ops: Mapping[str, str]) -> Products:
    """The products of `rows` rows with nn.Linear weights [out, in] (`ops`: each op's module among `tensors`): rows x
    out dot products of length in."""
    shapes = {op: tensors[f"{name}.weight"].shape for op, name in ops.items()}
    return {op: (rows * out, length) for op, (out, length) in shapes.items()}


@lru_cache(maxsize=1024)
def _declared(part: Part, config: Any) -> dict[str, Stage]:
    return part.stages(config)


def module_of(tree: Any, name: str) -> Any:
    """The module `name` of a tree of weights (a dotted path: "block_sparse_moe.router.layer"; "": the tree itself)."""
    for part in name.split(".") if name else ():
        tree = getattr(tree, part)
    return tree


def plus(bias: bool, name: str) -> str:
    """An equation's bias term: " + b_q" where the product has one."""
    return f" + b_{name}" if bias else ""


def held_parts(part: Any) -> Iterator[Any]:
    """A part and every part it holds (its fields, and the values of a field that maps kinds of layer to parts), depth
    first: what a family's record gathers from its parts (their routed experts' kinds, their buffers)."""
    yield part
    for f in fields(part) if is_dataclass(part) else ():
        value = getattr(part, f.name)
        for held in value.values() if isinstance(value, Mapping) else (value,):
            if isinstance(held, Part):
                yield from held_parts(held)


class Part:
    """A part of a model. `kinds`: the parameter kinds its tensors are of, each described, in the order a forward pass
    meets them (params lists them so); `module`: where a layer's checkpoint keeps it ("self_attn", "mlp")."""

    kinds: ClassVar[dict[str, str]] = {}

    def stages(self, config: Any) -> dict[str, Stage]:
        """Its stages, by op, in the order its forward pass runs them (engine.stages.by_op): each one's op, capture
        names, kind, equation and what it reads, for a config (its equations show the biases it has). Its forward pass
        runs on `tape.declaring(self.declared(config))` and names each by its op."""
        return {}

    def declared(self, config: Any) -> dict[str, Stage]:
        """stages(config), made once for each config."""
        return _declared(self, config)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """Its checkpoint tensors in a layer, by name under its module, in the order the checkpoint holds them."""
        return {}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """(dot products, dot-product length) of each of its matrix products in a pass of T positions attending to t,
        a batch of B, in a layer, from its equations alone."""
        return {}
