"""Mixtral's stage table: the Llama family's block (families/llama/stages.py) with its MLP replaced by a router
and k of E SwiGLU experts (forward.py's `mixture`)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import MLP, Stage, StageTable
from ..llama import stages as llama

ROUTER = (
    Stage("router", ("moe.router_logits",), "matmul", "r = h W_router  (one logit per expert)", "h [T, D], "
          "W_router [D, E]", MLP, product="router"),
    Stage("router.softmax", ("moe.router_probs",), "softmax", "p = softmax(r) over the E experts", "r [T, E]"),
    Stage("router.topk", ("moe.chosen", "moe.top_probs"), "select",
          "the k experts of largest p for each token, and their p (highest first)", "p [T, E]"),
    Stage("router.renorm", ("moe.gates",), "scale", "gates = top p / their sum  (= softmax over the k chosen r)",
          "p [T, k]"),
)  # fmt: skip
# Each expert e runs these on the Te tokens routed to it; the ledger has one record per op for all of a layer's
# experts (T k rows between them, whichever experts they were), and each record's breakdown says which got what.
EXPERTS = (
    Stage("expert.gather", ("moe.expert_in",), "select", "h_e = h[the Te tokens routed to e]  (for each expert e)",
          "h [T, D]"),
    Stage("expert.gate", ("moe.expert_gate",), "matmul", "g = h_e W1_e  (expert e's gate, on its Te rows)",
          "h_e [T, k*D] (each token in its k experts), W1_e [D, F]", MLP, product="expert"),
    Stage("expert.up", ("moe.expert_up",), "matmul", "u = h_e W3_e  (expert e's up, on its Te rows)",
          "h_e [T, k*D], W3_e [D, F]", MLP, product="expert"),
    Stage("expert.act", ("moe.expert_act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, k*F]"),
    Stage("expert.mul", ("moe.expert_mul",), "multiply", "a = a * u", "a, u [T, k*F]"),
    Stage("expert.down", ("moe.expert_down",), "matmul", "y = a W2_e  (expert e's down, on its Te rows)",
          "a [T, k*F], W2_e [F, D]", MLP, product="expert"),
    Stage("expert.weigh", ("moe.expert_out",), "multiply", "y = y * gate of e for each of its tokens", "y [T, k*D]"),
)  # fmt: skip
COMBINE = Stage("moe.combine", ("moe.out",), "scatter",
                "m = sum over each token's k experts of their weighted y  (added back to the tokens' rows)",
                "each token's k weighted y [T, k*D]")  # fmt: skip
MOE = (*ROUTER, *EXPERTS, COMBINE)
SYMBOLS = llama.SYMBOLS + ", E experts, k experts per token, Te tokens routed to expert e (T k over all E)"


@cache
def mixtral_family(window: bool = False) -> StageTable:
    """Mixtral's stages: the Llama block's, its MLP's replaced by the router's and the experts'; the mask's equation
    shows the sliding window where a config has one."""
    block = llama.pre_norm(llama.attention(mask=llama.mask(window)), MOE)
    return StageTable("mixtral", llama.EMBED, block, llama.FINAL, SYMBOLS)


def stages_of(config) -> StageTable:
    return mixtral_family(config.sliding_window is not None)
