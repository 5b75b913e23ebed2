"""The API's small choices checked in one place, so that a wrong one is a `UserError` saying what is taken,
never NumPy's or Python's own error from deep inside (or, worse, a silent wrong meaning: -1 candidates)."""

from __future__ import annotations

from ..errors import UserError
from ..models.ids import is_whole

__all__ = ["is_whole"]  # the models' rule, which the verbs' choices take as it is


def chosen_layers(layers, n_layer: int, what: str = "layers") -> list[int]:
    """A block number or a collection of them (maybe none), each in 0..n_layer-1: sorted, each once."""
    many = [layers] if is_whole(layers, -(2**63)) else layers
    if isinstance(many, (str, bytes)) or not hasattr(many, "__iter__"):
        raise UserError(f"{what} must be a block number or a list of them (0..{n_layer - 1}), not {layers!r}")
    many = list(many)
    if not all(is_whole(i, 0) and i < n_layer for i in many):
        raise UserError(f"{what} must be block numbers among 0..{n_layer - 1}, not {layers!r}")
    return sorted({int(i) for i in many})
