"""DeepSeek-V3's stage table: the Llama family's block (families/llama/stages.py) with multi-head latent attention
in place of its q, k and v, and in the layers past the dense ones, a group-limited sigmoid router, routed experts
and a shared expert in place of its MLP (forward.py)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, MLP, Stage, StageTable
from ..llama import stages as llama
from ..mixtral.stages import EXPERTS

Q_PLAIN = (
    Stage("q", ("attn.q_proj",), "matmul", "q = h W_q  (H heads of dh = dn + dr)", "h [T, D], W_q [D, H*dh]",
          ATTENTION_PROJECTIONS),
)  # fmt: skip
Q_LORA = (
    Stage("q_a", ("attn.q_a",), "matmul", "c_q = h W_qa  (down to the query rank dq)", "h [T, D], W_qa [D, dq]",
          ATTENTION_PROJECTIONS),
    Stage("q_a_norm", ("attn.q_a_norm",), "norm", "c_q = RMSNorm_qa(c_q)", "c_q [T, dq]"),
    Stage("q_b", ("attn.q_b",), "matmul", "q = c_q W_qb  (H heads of dh = dn + dr)", "c_q [T, dq], W_qb [dq, H*dh]",
          ATTENTION_PROJECTIONS),
)  # fmt: skip
LATENT = (
    Stage("kv_a", ("attn.kv_a",), "matmul", "[c, k_r] = h W_kva  (the latent c, dc wide, and one rotary key k_r, dr "
          "wide, for all heads)", "h [T, D], W_kva [D, dc+dr]", ATTENTION_PROJECTIONS),
    Stage("kv_split", ("attn.latent", "attn.k_rope_in"), "reshape", "c, k_r = the first dc and the last dr numbers",
          "c and k_r [T, dc+dr]"),
    Stage("kv_a_norm", ("attn.latent_norm",), "norm", "c = RMSNorm_kva(c)", "c [T, dc]"),
    Stage("kv_b", ("attn.kv_b",), "matmul", "[k_n, v] = c W_kvb  (each head's k_n, dn wide, and v, dv wide)",
          "c [T, dc], W_kvb [dc, H*dn+H*dv]", ATTENTION_PROJECTIONS),
    Stage("split_heads", ("attn.q",), "reshape", "q -> H heads of dh", "q [T, H*dh]"),
    Stage("kv_b_split", ("attn.k_nope", "attn.v"), "reshape", "k_n, v -> H heads of dn and of dv",
          "k_n and v [T, H*dn+H*dv]"),
    Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", "q_r, k_r = RoPE(the last dr numbers of q, k_r): each pair "
          "turned by position x frequency (interleaved pairs de-interleaved first)", "q [H, T, dr], k_r [1, T, dr]"),
    Stage("q_join", ("attn.q_full",), "reshape", "q = [q_n, q_r]", "q_n [H, T, dn], q_r [H, T, dr]"),
    Stage("k_join", ("attn.k",), "reshape", "k = [k_n, k_r]  (the one k_r beside every head's k_n)",
          "k_n [H, T, dn], k_r [1, T, dr]"),
    Stage("cache", ("attn.keys", "attn.values"), "cache",
          "K, V of the t attended positions (new rows written to the cache: H dh + H dv numbers a position)",
          "k [H, T, dh], v [H, T, dv]"),
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (every head its own keys, dh = dn + dr wide)",
          "Q [H, T, dh], K^T [H, dh, t]", ATTENTION_SCORES),
    Stage("scale", ("attn.scaled",), "scale", "S = S x dh^-0.5  (x mscale^2 under YaRN)", "S [H, T, t]"),
    Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
    Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A V  (values dv wide)", "A [H, T, t], V [H, t, dv]", ATTENTION_SCORES),
    Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, H*dv]", "Z [H, T, dv]"),
    Stage("out", ("attn.out",), "matmul", "o = Z W_o", "Z [T, H*dv], W_o [H*dv, D]", ATTENTION_PROJECTIONS),
)  # fmt: skip
ROUTER = (
    Stage("router", ("moe.router_logits",), "matmul", "r = h W_router  (one logit per routed expert)",
          "h [T, D], W_router [D, E]", MLP, product="router"),
    Stage("router.sigmoid", ("moe.scores",), "activation", "s = sigmoid(r)", "r [T, E]"),
    Stage("router.choose", ("moe.chosen",), "select", "the k experts of largest s + b (b: the correction bias, "
          "for choosing only) in the topk_group groups whose 2 largest s + b sum highest", "s [T, E], b [E]"),
    Stage("router.weigh", ("moe.gates",), "scale", "gates = the chosen s (no bias) / their sum (norm_topk_prob) "
          "x routed_scaling_factor", "s [T, k]"),
)  # fmt: skip
COMBINE = Stage(
    "moe.combine",
    ("moe.routed_out",),
    "scatter",
    "m = sum over each token's k experts of their weighted y  (added back to the tokens' rows)",
    "each token's k weighted y [T, k*D]",
)
SHARED = (
    Stage("shared.gate", ("moe.shared_gate",), "matmul", "g = h W_gate_s  (the shared experts, on every token)",
          "h [T, D], W_gate_s [D, Fs]", MLP, product="expert"),
    Stage("shared.up", ("moe.shared_up",), "matmul", "u = h W_up_s", "h [T, D], W_up_s [D, Fs]", MLP, product="expert"),
    Stage("shared.act", ("moe.shared_act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, Fs]"),
    Stage("shared.mul", ("moe.shared_mul",), "multiply", "a = a * u", "a, u [T, Fs]"),
    Stage("shared.down", ("moe.shared_down",), "matmul", "y_s = a W_down_s", "a [T, Fs], W_down_s [Fs, D]", MLP,
          product="expert"),
    Stage("moe.shared_add", ("moe.out",), "add", "m = m + y_s", "m, y_s [T, D]"),
)  # fmt: skip


@cache
def deepseek_family(q_lora: bool | None = True) -> StageTable:
    """DeepSeek-V3's stages: q through the low-rank bottleneck (q_lora), in one product (False), or both (None: the
    table of every stage the family can have). Dense layers run the Llama MLP's stages, the others the experts'."""
    q = {True: Q_LORA, False: Q_PLAIN, None: Q_PLAIN + Q_LORA}[q_lora]
    block = llama.pre_norm((*q, *LATENT), (*llama.gated_mlp(), *ROUTER, *EXPERTS, COMBINE, *SHARED))
    symbols = (
        "T new positions, t attended, D d_model, H heads, dh = dn + dr query/key head size (dn without "
        "position, dr rotary), dv value head size, dq query rank, dc latent (kv_lora_rank), F dense MLP width, "
        "E routed experts, k a token, Te tokens routed to expert e, Fe expert width, Fs shared experts' width, "
        "V vocabulary, R logit rows"
    )
    return StageTable("deepseek_v3", llama.EMBED, block, llama.FINAL, symbols)


def stages_of(config) -> StageTable:
    return deepseek_family(config.q_lora_rank is not None)
