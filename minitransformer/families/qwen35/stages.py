"""The Qwen3.5 stage table: the Llama block (families/llama/stages.py) whose mixer is, layer by layer, a Gated DeltaNet
(linear attention: its projections, conv, and the delta rule, recurrent in a decode step and in chunks over a
prompt) or gated full attention (q with its gate from one q_proj, q and k normed, partial rotary, the output gated),
and whose MLP is a SwiGLU or, in the MoE models, Qwen3-MoE's router and experts beside a gated shared expert."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...engine.stages import (
    ATTENTION_PROJECTIONS,
    CONV_WINDOWS,
    MLP,
    READS_STATE,
    STATE,
    WRITES_STATE,
    Stage,
    StageTable,
)
from ..llama.stages import llama_family
from ..parts.moe import COMBINE, SHARED_ADD, SHARED_EXPERT
from ..parts.moe import SOFTMAX_ROUTER as ROUTER
from ..parts.moe import SWIGLU_EXPERTS as QWEN_EXPERTS

SHARED = (*SHARED_EXPERT, SHARED_ADD)

LINEAR_PROJECTIONS = "linear attention projections and conv"

LINEAR = (
    Stage("linear.pads", ("linear_attn.unpadded",), "mask",
          "h = 0 at a left-padded row's pad slots (none enters the state)", "h [T, D]"),
    Stage("linear.qkv", ("linear_attn.in_proj_qkv",), "matmul",
          "[q k v] = h W_qkv", "h [T, D], W_qkv [D, Dc]", LINEAR_PROJECTIONS, product="projection"),
    Stage("linear.z", ("linear_attn.in_proj_z",), "matmul", "z = h W_z  (the output gate)",
          "h [T, D], W_z [D, Hv*dv]", LINEAR_PROJECTIONS, product="projection"),
    Stage("linear.b", ("linear_attn.in_proj_b",), "matmul", "b = h W_b  (a value head's write strength)",
          "h [T, D], W_b [D, Hv]", LINEAR_PROJECTIONS, product="projection"),
    Stage("linear.a", ("linear_attn.in_proj_a",), "matmul", "a = h W_a  (a value head's decay)",
          "h [T, D], W_a [D, Hv]", LINEAR_PROJECTIONS, product="projection"),
    Stage("linear.conv", ("linear_attn.conv",), "matmul",
          "c = conv([q k v]): each channel's last Kc inputs . its kernel", "windows [Dc, T, Kc], w [Dc, Kc, 1]", LINEAR_PROJECTIONS,
          state=CONV_WINDOWS, product="conv"),
    Stage("linear.conv_act", ("linear_attn.conv_act",), "activation", "c = act(c)  (SiLU)", "c [T, Dc]"),
    Stage("linear.split", ("linear_attn.q", "linear_attn.k", "linear_attn.v"), "reshape",
          "q, k -> Hk heads of dk; v -> Hv heads of dv", "c [T, Dc]"),
    Stage("linear.l2norm", ("linear_attn.q_normed", "linear_attn.k_normed"), "norm",
          "q, k = x / |x|  (each head)", "q, k [Hk, T, dk]"),
    Stage("linear.scale", ("linear_attn.q_scaled",), "scale", "q = q / sqrt(dk)", "q [Hk, T, dk]"),
    Stage("linear.beta", ("linear_attn.beta",), "activation", "beta = sigmoid(b)",
          "b [T, Hv]"),
    Stage("linear.decay", ("linear_attn.g",), "activation",
          "g = -exp(A_log) softplus(a + dt_bias)  (log decay)", "a [T, Hv]"),
)  # fmt: skip
# The delta rule, one position at a time (a decode step) and in chunks (a prompt): delta_rule.py. read, write, query
# and update are the recurrent form's, and over a prompt the same steps for a chunk at once.
DELTA_RULE = (
    Stage("delta.decay", ("linear_attn.state_decayed",), "scale", "S = e^g S",
          "S [Hv, dk, dv]"),
    Stage("delta.chunks", ("linear_attn.q_chunks", "linear_attn.k_chunks", "linear_attn.v_chunks",
                           "linear_attn.g_chunks", "linear_attn.beta_chunks"), "reshape",
          "q, k, v, g, beta in N chunks of C (zero-padded)", "q, k, v, g, beta [.., T, ..]"),
    Stage("delta.cumdecay", ("linear_attn.cumdecay",), "scale", "log gamma = cumsum(g) in each chunk",
          "g [Hv, N, C]"),
    Stage("delta.decays", ("linear_attn.decays",), "scale", "gamma_i / gamma_j  (j <= i; 0 above)", "gamma [Hv, N, C]"),
    Stage("delta.kk", ("linear_attn.kk",), "matmul", "K K^T  (within each chunk)",
          "K [Hk, N, C, dk], K^T [Hk, N, dk, C]", STATE),
    Stage("delta.system", ("linear_attn.system",), "scale", "L = beta_i k_i.k_j gamma_i / gamma_j  (j < i)",
          "K K^T [Hk, N, C, C]"),
    Stage("delta.rhs", ("linear_attn.rhs",), "scale", "[beta v, beta gamma k]",
          "v [Hv, N, C, dv], k [Hk, N, C, dk]"),
    Stage("delta.solve", ("linear_attn.solved",), "matmul",
          "[U W] = (I + L)^-1 [beta v, beta gamma k]  (row by row)", "L [Hv, N, C, C], [U W] [Hv, N, C, dv+dk]", STATE),
    Stage("delta.qk", ("linear_attn.qk",), "matmul", "Q K^T  (within each chunk)",
          "Q [Hk, N, C, dk], K^T [Hk, N, dk, C]", STATE),
    Stage("delta.attn", ("linear_attn.attn",), "scale", "A = Q K^T . gamma_i / gamma_j  (j <= i)", "Q K^T [Hk, N, C, C]"),
    Stage("delta.q_decayed", ("linear_attn.q_decayed",), "scale", "gamma Q  (decayed from the chunk's start)",
          "q [Hk, N, C, dk]"),
    Stage("delta.k_decayed", ("linear_attn.k_decayed",), "scale", "K' = K gamma_C / gamma  (to the chunk's end)",
          "k [Hk, N, C, dk]"),
    Stage("delta.read", ("linear_attn.read",), "matmul",
          "S^T k  (a prompt: W S, a chunk at once)",
          "k [Hk, 1, T, dk] or W [Hv, N, C, dk], S [Hv, dk, dv]", STATE, state=READS_STATE),
    Stage("delta.delta", ("linear_attn.delta",), "scale", "delta = beta (v - S^T k)",
          "v, S^T k [Hv, T, dv]"),
    Stage("delta.corrected", ("linear_attn.corrected",), "add",
          "V' = U - W S  (a chunk's deltas)", "U, W S [Hv, C, dv]"),
    Stage("delta.query", ("linear_attn.query",), "matmul",
          "o = S^T q  (a prompt: (gamma Q) S)",
          "q [Hk, 1, T, dk] or gamma Q [Hv, N, C, dk], S [Hv, dk, dv]", STATE, state=READS_STATE),
    Stage("delta.mix", ("linear_attn.mix",), "matmul", "A V'  (within the chunk)",
          "A [Hv, N, C, C], V' [Hv, N, C, dv]", STATE),
    Stage("delta.chunk_out", ("linear_attn.chunk_out",), "add", "o = (gamma Q) S + A V'", "[Hv, C, dv]"),
    Stage("delta.write", ("linear_attn.write",), "matmul",
          "k delta^T  (an outer product; a prompt: K'^T V')", "k^T [Hk, 1, dk, T], delta [Hv, T, dv]",
          STATE, state=WRITES_STATE),
    Stage("delta.update", ("linear_attn.state",), "add",
          "S = S + k delta^T  (a prompt: gamma_C S + K'^T V')", "S [Hv, dk, dv]"),
    Stage("delta.out", ("linear_attn.core_out",), "reshape", "o: the chunks' outputs in order",
          "o [Hv, N, C, dv]"),
)  # fmt: skip
LINEAR_OUT = (
    Stage("linear.norm", ("linear_attn.normed",), "norm",
          "o = RMSNorm(o) * silu(z)  (each head)", "o, z [Hv, T, dv]"),
    Stage("linear.merge", ("linear_attn.z",), "reshape", "o -> [T, Hv*dv]", "o [Hv, T, dv]"),
    Stage("linear.out", ("linear_attn.out",), "matmul", "o = o W_out", "o [T, Hv*dv], W_out [Hv*dv, D]",
          LINEAR_PROJECTIONS, product="projection"),
)  # fmt: skip
GATED_QUERY = (
    Stage("q", ("attn.q_proj",), "matmul", "[q gate] = h W_q  (each head's q and a gate as wide)",
          "h [T, D], W_q [D, H*2*dh]", ATTENTION_PROJECTIONS),
    Stage("q_gate_split", ("attn.q", "attn.gate"), "reshape", "q -> H heads of dh; the gates [T, H*dh]",
          "[q gate] [T, H*2*dh]"),
)  # fmt: skip
NORMS = {
    "ln_1": "h = RMSNorm_1(x)  (gains 1 + w)",
    "ln_2": "h = RMSNorm_2(x)  (gains 1 + w)",
    "ln_f": "h = RMSNorm_f(x)  (gains 1 + w)",
}
QK_NORM = (
    Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains 1 + w)",
          "q [H, T, dh]"),
    Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains 1 + w)",
          "k [Hkv, T, dh]"),
)  # fmt: skip
ROPE = Stage(
    "rope",
    ("attn.q_rot", "attn.k_rot"),
    "rotate",
    "q, k = RoPE(the first dr numbers of each head): each pair turned by position x frequency",
    "q [H, T, dh], k [Hkv, T, dh]",
)
GATE = Stage(
    "gate", ("attn.gated",), "multiply", "Z = Z * sigmoid(gate)  (each number by its own gate)", "Z, gate [T, H*dh]"
)
SHARED_GATE = (
    Stage("shared.score", ("moe.shared_score",), "matmul", "s = h W_shared_gate  (one number a token)",
          "h [T, D], W_shared_gate [D, 1]", MLP, product="router"),
    Stage("shared.weigh", ("moe.shared_weighed",), "multiply", "y_s = y_s * sigmoid(s)", "y_s [T, D], s [T, 1]"),
)  # fmt: skip


@cache
def qwen35_family(moe: bool | None = False, bias: bool = False) -> StageTable:
    """The stages of a block: ln_1, a DeltaNet's or the gated attention's (a layer has one or the other), resid_mid,
    ln_2, then the SwiGLU MLP's (moe False), the experts' (True) or both (None: every stage the family can have)."""
    llama = llama_family(bias, bias)
    by_op = {s.op: replace(s, equation=NORMS[s.op]) if s.op in NORMS else s for s in (*llama.block, *llama.final)}
    attention = [
        GATED_QUERY[0],
        GATED_QUERY[1],
        by_op["k"],
        by_op["v"],
        replace(by_op["split_heads"], names=("attn.k", "attn.v"), equation="k, v -> Hkv heads of dh"),
        *QK_NORM,
        ROPE,
        *(by_op[op] for op in ("cache", "scores", "scale", "mask", "softmax", "mix", "merge_heads")),
        GATE,
        by_op["out"],
    ]
    dense = [by_op[op] for op in ("mlp.gate", "mlp.up", "mlp.act", "mlp.mul", "mlp.down")] if moe is not True else []
    shared = [s for s in SHARED if s.op != "moe.shared_add"]
    experts = [*ROUTER, *QWEN_EXPERTS, COMBINE, *shared, *SHARED_GATE, SHARED[-1]] if moe is not False else []
    block = (
        by_op["ln_1"],
        *LINEAR,
        *DELTA_RULE,
        *LINEAR_OUT,
        *attention,
        by_op["resid_mid"],
        by_op["ln_2"],
        *dense,
        *experts,
        by_op["resid_post"],
    )
    final = (by_op["ln_f"], *llama.final[1:])
    symbols = (
        "T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
        "dr its rotated numbers; a DeltaNet layer's Hk key heads of dk, Hv value heads of dv, Gv = Hv/Hk, Dc = "
        "2 Hk dk + Hv dv conv channels, Kc its kernel (Ks = Kc - 1 kept), C positions a chunk, N chunks; "
        "F MLP width (an expert's in the MoE models: Fe, the shared expert's Fs), E experts, k a token, V "
        "vocabulary, R logit rows"
    )
    return StageTable("qwen3_5", llama.embed, block, final, symbols)


def stages_of(config) -> StageTable:
    return qwen35_family(config.is_moe, config.attention_bias)
