"""Transitional (issue 35): the mixture of experts of the families not yet built from parts (the hybrids'), on the
machinery of families/parts/moe.py (the routing assumed, each expert's rows), which the families built from parts
use as parts (routers, experts, shared experts)."""

from __future__ import annotations

import numpy as np

from ..engine.ops import ACTIVATIONS, softmax
from ..engine.shapes import ShapeOnly
from .parts.moe import add_rows, routed, top_k


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
