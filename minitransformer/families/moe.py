"""What every mixture of experts shares, whichever family: the router's choice of k experts per token, and the
tokens each expert gets, from the router's choice in a real run or from an assumed routing when counting from a
config alone (Tape.routing). Each family writes its own experts (Mixtral's SwiGLU: families/mixtral/forward.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..engine.ops import ACTIVATIONS
from ..engine.shapes import ShapeOnly
from ..errors import UserError

ROUTINGS = {
    "balanced": "every expert gets T k / E of the T k token rows; the remainder one more each to the first experts",
    "worst": "every token to the same k experts (experts 0..k-1): the busiest expert computes all T rows",
}


def top_k(probs, k: int):
    """(the k chosen experts [..., k], their probabilities [..., k]), highest first, as torch.topk gives them."""
    if isinstance(probs, ShapeOnly):
        shape = (*probs.shape[:-1], k)
        return ShapeOnly(shape, np.int64), ShapeOnly(shape, probs.dtype)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return chosen, np.take_along_axis(probs, chosen, axis=-1)


def assumed_loads(tokens: int, n_experts: int, k: int, routing: str) -> list[int]:
    """The tokens each expert computes when no router decides (counting from a config alone): `tokens` x k rows in
    all, since every token goes to k different experts, spread as ROUTINGS says."""
    if routing not in ROUTINGS:
        raise UserError(f"routing {routing!r} is not known (known: {', '.join(ROUTINGS)})")
    if routing == "worst":
        return [tokens] * k + [0] * (n_experts - k)
    share, remainder = divmod(tokens * k, n_experts)
    return [share + (e < remainder) for e in range(n_experts)]


@dataclass(frozen=True)
class Routed:
    """The token rows routed to one expert: `rows` (of the batch's tokens, flattened) and `slots` (which of each
    token's k choices it was), or None for both when counting from shapes alone."""

    expert: int
    tokens: int
    rows: np.ndarray | None
    slots: np.ndarray | None

    def gather(self, x):
        """x's rows [n, ...] of the tokens routed here: [tokens, ...]."""
        if self.rows is None:
            return ShapeOnly((self.tokens, *x.shape[1:]), x.dtype)
        return x[self.rows]

    def gates(self, gates):
        """The gate weight of this expert for each of its tokens [tokens, 1] (gates: [n, k])."""
        if self.rows is None:
            return ShapeOnly((self.tokens, 1), gates.dtype)
        return gates[self.rows, self.slots, None]


def routed(chosen, n_experts: int, routing: str) -> Iterator[Routed]:
    """Each expert that gets tokens, in increasing order (as transformers adds their outputs): from `chosen`
    [n, k], the experts the router chose for each of n tokens, or, shape-only, as `routing` assumes."""
    if isinstance(chosen, ShapeOnly):
        n, k = chosen.shape
        for e, tokens in enumerate(assumed_loads(n, n_experts, k, routing)):
            if tokens:
                yield Routed(e, tokens, None, None)
        return
    for e in range(n_experts):
        rows, slots = np.nonzero(chosen == e)
        if len(rows):
            yield Routed(e, len(rows), rows, slots)


def add_rows(out, expert: Routed, y) -> None:
    """out[rows] += y: an expert's weighted outputs added to its tokens' rows (each token once per expert)."""
    if expert.rows is not None:
        out[expert.rows] += y


def expert_shapes(F: str = "F") -> dict[str, str]:
    """The shapes of a layer's SwiGLU expert records, each expert F wide: each token's rows in its k experts ("T D,
    D k*F -> T k*F" is every token's h against its k experts' W_gate side by side), what they computed between
    them."""
    return {"expert.gather": "T k*D", "expert.gate": f"T D, D k*{F} -> T k*{F}", "expert.up": f"T D, D k*{F} -> T k*{F}",
            "expert.act": f"T k*{F}", "expert.mul": f"T k*{F}", "expert.down": f"T {F}, {F} k*D -> T k*D",
            "expert.weigh": "T k*D"}  # fmt: skip


def swiglu_experts(h, chosen, gates, weights, n_experts: int, hidden_act: str, at, F: str = "F"):
    """The routed experts of a layer, each a SwiGLU MLP computing only its Te tokens' rows: h_e = h[its tokens],
    y = (act(h_e W_gate) * h_e W_up) W_down, weighted by the tokens' gates and added back to their rows.

    chosen and gates [T, k]: each token's k experts and their weights; weights(e) -> (W_gate, W_up, W_down) of
    expert e as nn.Linear holds them ([out, in]); F the symbol of an expert's width. One record per op and layer,
    with each expert's share as its breakdown (Tape.record_experts)."""
    k = chosen.shape[-1]
    x, n = h.reshape(-1, h.shape[-1]), h.size // h.shape[-1]  # the batch's tokens, one row each
    out = ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros_like(x)
    experts = at.experts()
    for expert in routed(chosen.reshape(n, k), n_experts, at.routing):
        ex, (w_gate, w_up, w_down) = experts.expert(expert), weights(expert.expert)
        xe = ex.stage("expert.gather", expert.gather(x), "Te D")
        g = ex.matmul("expert.gate", xe, w_gate.T, f"Te D, D {F} -> Te {F}")
        u = ex.matmul("expert.up", xe, w_up.T, f"Te D, D {F} -> Te {F}")
        a = ex.stage("expert.act", ACTIVATIONS[hidden_act](g), f"Te {F}")
        a = ex.stage("expert.mul", np.multiply(a, u, out=ex.scratch(a)), f"Te {F}")
        y = ex.matmul("expert.down", a, w_down.T, f"Te {F}, {F} D -> Te D")
        y = ex.stage("expert.weigh", y * expert.gates(gates.reshape(n, k)), "Te D")
        add_rows(out, expert, y)
    at.record_experts(experts, expert_shapes(F), n_experts)
    return at.stage("moe.combine", out.reshape(h.shape), "T D")
