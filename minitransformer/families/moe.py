"""What every mixture of experts shares, whichever family: the router's choice of k experts per token, and the
tokens each expert gets, from the router's choice in a real run or from an assumed routing when counting from a
config alone (Tape.routing). Each family writes its own experts (Mixtral's SwiGLU: families/mixtral/forward.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..engine.ops import ACTIVATIONS, softmax
from ..engine.shapes import ShapeOnly
from ..errors import UserError

ROUTINGS = {
    "balanced": "every expert gets T k / E of the T k token rows; the remainder one more each to the first experts",
    "worst": "every token to the same k experts (experts 0..k-1): the busiest expert computes all T rows",
}


def top_k(probs, k: int, at):
    """(the k chosen experts [..., k], their probabilities [..., k]), highest first as torch.topk gives them, equal
    ones the lowest expert first (the tape's one rule, engine/selection.py; what it decided is in the ledger as
    router.topk's)."""
    chosen = at.top_k("router.topk", probs, k)
    if isinstance(probs, ShapeOnly):
        return chosen, ShapeOnly(chosen.shape, probs.dtype)
    return chosen, np.take_along_axis(probs, chosen, axis=-1)


def softmax_router(h, w, k: int, at, renormalise: bool = True):
    """(chosen experts [T, k], gates [T, k]) of the softmax router (Mixtral's, Qwen3-MoE's): logits r = h W_router
    [T, E], p = softmax(r) over the E experts, the k largest kept and, where `renormalise`, divided by their sum (=
    a softmax over the k chosen logits; computed as transformers does, so that the floats agree)."""
    logits = at.matmul("router", h, w.T, "T D, D E -> T E")
    probs = at.stage("router.softmax", softmax(logits), "T E")
    chosen, gates = at.stage("router.topk", top_k(probs, k, at), "T k")
    if renormalise:
        gates = at.stage("router.renorm", gates / gates.sum(axis=-1, keepdims=True), "T k")
    return chosen, gates


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
    return {
        "expert.gather": "T k*D",
        "expert.gate": f"T D, D k*{F} -> T k*{F}",
        "expert.up": f"T D, D k*{F} -> T k*{F}",
        "expert.act": f"T k*{F}",
        "expert.mul": f"T k*{F}",
        "expert.down": f"T {F}, {F} k*D -> T k*D",
        "expert.weigh": "T k*D",
    }


def swiglu_experts(h, chosen, gates, weights, n_experts: int, hidden_act: str, at, F: str = "F"):
    """The routed experts of a layer, each a SwiGLU MLP on its tokens' rows: y = (act(h_e W_gate) * h_e W_up) W_down.
    weights(e) -> (W_gate, W_up, W_down) of expert e as nn.Linear holds them ([out, in]); F the symbol of an
    expert's width (the rest as `experts`)."""

    def swiglu(ex, e: int, xe):
        w_gate, w_up, w_down = weights(e)
        g = ex.matmul("expert.gate", xe, w_gate.T, f"Te D, D {F} -> Te {F}")
        u = ex.matmul("expert.up", xe, w_up.T, f"Te D, D {F} -> Te {F}")
        a = ex.stage("expert.act", ACTIVATIONS[hidden_act](g), f"Te {F}")
        a = ex.stage("expert.mul", np.multiply(a, u, out=ex.scratch(a)), f"Te {F}")
        return ex.matmul("expert.down", a, w_down.T, f"Te {F}, {F} D -> Te D")

    return experts(h, chosen, gates, n_experts, at, expert_shapes(F), swiglu)


def experts(h, chosen, gates, n_experts: int, at, shapes: dict[str, str], expert):
    """The routed experts of a layer, each computing only its Te tokens' rows: h_e = h[its tokens] [Te, D],
    y = expert(its tape, e, h_e) [Te, D], weighted by the tokens' gates and added back to their rows.

    chosen and gates [T, k]: each token's k experts and their weights. One record per op and layer, shaped as
    `shapes` states what the experts computed between them, with each expert's share as its breakdown
    (Tape.record_gathered)."""
    k = chosen.shape[-1]
    x, n = h.reshape(-1, h.shape[-1]), h.size // h.shape[-1]  # the batch's tokens, one row each
    out = ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros_like(x)
    tapes = at.experts()
    for tokens in routed(chosen.reshape(n, k), n_experts, at.routing):
        ex = tapes.expert(tokens)
        xe = ex.stage("expert.gather", tokens.gather(x), "Te D")
        y = expert(ex, tokens.expert, xe)
        y = ex.stage("expert.weigh", y * tokens.gates(gates.reshape(n, k)), "Te D")
        add_rows(out, tokens, y)
    at.record_gathered(tapes, shapes, n_experts=n_experts)
    return at.stage("moe.combine", out.reshape(h.shape), "T D")


def shared_expert(h, w, hidden_act: str, at):
    """The shared expert every token goes through (DeepSeek-V3's, Qwen3.5's): a SwiGLU MLP of width Fs,
    act(h W_gate) * h W_up, then W_down."""
    g = at.matmul("shared.gate", h, w.gate_proj.weight.T, "T D, D Fs -> T Fs")
    u = at.matmul("shared.up", h, w.up_proj.weight.T, "T D, D Fs -> T Fs")
    a = at.stage("shared.act", ACTIVATIONS[hidden_act](g), "T Fs")
    a = at.stage("shared.mul", np.multiply(a, u, out=at.scratch(a)), "T Fs")
    return at.matmul("shared.down", a, w.down_proj.weight.T, "T Fs, Fs D -> T D")
