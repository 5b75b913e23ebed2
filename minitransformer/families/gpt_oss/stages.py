"""gpt-oss's stage table: the Llama family's block (families/llama/stages.py) with attention biases, the sinks
between the mask and the softmax, and in place of the MLP a router with a bias, a softmax over the k chosen logits
and k of E clamped-SwiGLU experts with biases (forward.py's `mixture`)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import MLP, Stage, StageTable, edited
from ..llama import stages as llama
from ..mixtral.stages import COMBINE, SYMBOLS

SINKS = Stage(
    "sinks",
    ("attn.with_sinks",),
    "mask",
    "S' = [S | s_h]: each head's learned sink logit s_h as one more column of every query's scores",
    "S [H, T, t], s [H]",
)
SOFTMAX = Stage(
    "softmax",
    ("attn.weights",),
    "softmax",
    "A = softmax(S') over j and the sink, the sink's column dropped (rows sum to 1 - the sink's weight)",
    "S' [H, T, t+1]",
)
ROUTER = (
    Stage("router", ("moe.router_logits",), "matmul", "r = h W_router + b_router  (one logit per expert)",
          "h [T, D], W_router [D, E]", MLP, product="router"),
    Stage("router.topk", ("moe.chosen", "moe.top_logits"), "select",
          "the k experts of largest r for each token, and their r (highest first)", "r [T, E]"),
    Stage("router.softmax", ("moe.gates",), "softmax", "gates = softmax of the k chosen r", "r [T, k]"),
)  # fmt: skip
EXPERTS = (
    Stage("expert.gather", ("moe.expert_in",), "select", "h_e = h[the Te tokens routed to e]  (for each expert e)",
          "h [T, D]"),
    Stage("expert.gate_up", ("moe.expert_gate_up",), "matmul",
          "gu = h_e W_gu_e + b_gu_e  (expert e's gate and up in one product: gate at even columns, up at odd)",
          "h_e [T, k*D] (each token in its k experts), W_gu_e [D, 2F]", MLP, product="expert"),
    Stage("expert.clamp", ("moe.expert_clamped",), "activation",
          "g = min(gate, limit), u = clip(up, -limit, limit)", "gu [T, k*2F]"),
    Stage("expert.act", ("moe.expert_act",), "activation", "a = g sigmoid(alpha g)  (alpha 1.702)", "g [T, k*F]"),
    Stage("expert.mul", ("moe.expert_mul",), "multiply", "a = (u + 1) * a", "a, u [T, k*F]"),
    Stage("expert.down", ("moe.expert_down",), "matmul", "y = a W_down_e + b_down_e  (expert e's down, on its rows)",
          "a [T, k*F], W_down_e [F, D]", MLP, product="expert"),
    Stage("expert.weigh", ("moe.expert_out",), "multiply", "y = y * gate of e for each of its tokens", "y [T, k*D]"),
)  # fmt: skip


@cache
def gpt_oss_family(bias: bool = True, window: bool = True) -> StageTable:
    """gpt-oss's stages; the mask's equation shows the sliding window (on the sliding_attention layers)."""
    attention = llama.attention(bias, bias, llama.mask(window, some_layers=True))
    block = llama.pre_norm(edited(attention, instead={"softmax": (SINKS, SOFTMAX)}), (*ROUTER, *EXPERTS, COMBINE))
    return StageTable("gpt_oss", llama.EMBED, block, llama.FINAL, SYMBOLS)


def stages_of(config) -> StageTable:
    return gpt_oss_family(config.qkv_bias, config.sliding_window is not None)
