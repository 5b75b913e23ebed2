"""GPT-2's stage table: every stage of its forward pass (forward.py), in order, with its op, capture names, kind
and equation (the vocabulary is the engine's: engine/stages.py)."""

from __future__ import annotations

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, LAST, LOGITS, MLP, Stage, StageTable

EMBED = Stage("embed", ("embed",), "lookup", "x = W_te[ids] + W_pe[positions]", "ids [T]")

BLOCK = (
    Stage("ln_1", ("ln_1",), "norm", "h = LayerNorm_1(x)", "x [T, D]", reads_stream=True),
    Stage("qkv", ("attn.qkv",), "matmul", "[Q K V] = h W_qkv + b_qkv", "h [T, D], W_qkv [D, 3D]",
          ATTENTION_PROJECTIONS),
    Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "Q, K, V -> H heads of dh", "[T, 3D]"),
    Stage("cache", ("attn.keys", "attn.values"), "cache", "K, V of all t positions (new rows written to the cache)",
          "k, v [H, T, dh]"),
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (per head)", "Q [H, T, dh], K^T [H, dh, t]",
          ATTENTION_SCORES),
    Stage("scale", ("attn.scaled",), "scale", "S = S * scale  (1/sqrt(dh) unless configured otherwise)", "S [H, T, t]"),
    Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
    Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A V  (per head)", "A [H, T, t], V [H, t, dh]", ATTENTION_SCORES),
    Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, D]", "Z [H, T, dh]"),
    Stage("out", ("attn.out",), "matmul", "o = Z W_o + b_o", "Z [T, D], W_o [D, D]", ATTENTION_PROJECTIONS),
    Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]"),
    Stage("ln_2", ("ln_2",), "norm", "h = LayerNorm_2(x)", "x [T, D]", reads_stream=True),
    Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up + b_up", "h [T, D], W_up [D, F]", MLP),
    Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
    Stage("mlp.down", ("mlp.down",), "matmul", "m = g W_down + b_down", "g [T, F], W_down [F, D]", MLP),
    Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
)  # fmt: skip

FINAL = (
    Stage("ln_f", ("ln_f",), "norm", "h = LayerNorm_f(x)", "x [T, D]"),
    LAST,
    LOGITS,
)

GPT2 = StageTable(
    "gpt2",
    (EMBED,),
    BLOCK,
    FINAL,
    "T new positions, t attended (past + T), D d_model, H heads, dh = D/H, F MLP width, V vocabulary, R logit rows",
)

# The GPT-2 table under its old names (the ledger's first vocabulary).
STAGES = GPT2.stages
MATMUL_OPS = GPT2.matmul_ops
BLOCK_OPS = GPT2.block_ops


def stages_of(config) -> StageTable:
    """Every GPT-2 has the same stages."""
    return GPT2
