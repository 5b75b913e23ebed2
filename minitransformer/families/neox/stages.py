"""The GPT-NeoX family's stage table: every stage of its forward pass (forward.py), in order, with its op, capture
names, kind and equation (the vocabulary is the engine's: engine/stages.py)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, LAST, LOGITS, MLP, Stage, StageTable


@cache
def neox_family(
    parallel: bool = True, attention_bias: bool = True, rotary: tuple[int, int] | None = None
) -> StageTable:
    """The GPT-NeoX block's stages: the parallel residual has no resid_mid, and its ln_2 reads the block's input;
    `rotary` (r, dh): the rope stage says how many of each head's numbers turn."""
    b = (lambda n: f" + b_{n}") if attention_bias else (lambda n: "")
    share = (
        "first r = rotary_pct x dh numbers; the other dh - r"
        if rotary is None
        else (f"first r = {rotary[0]} of its {rotary[1]} numbers; the other {rotary[1] - rotary[0]}")
    )
    embed = (
        Stage("embed", ("embed",), "lookup", "x = W_in[ids]  (positions enter later, by rotating q and k)", "ids [T]"),
    )
    attention = (
        Stage("ln_1", ("ln_1",), "norm", "h = LayerNorm_1(x)", "x [T, D]", reads_stream=True),
        Stage("qkv", ("attn.qkv",), "matmul", f"[q k v per head] = h W_qkv{b('qkv')}  (one product, head by head)",
              "h [T, D], W_qkv [D, 3D]", ATTENTION_PROJECTIONS),
        Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape",
              "[T, 3D] as [T, H, 3, dh] -> Q, K, V of H heads of dh", "[T, 3D]"),
        Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate",
              f"q, k = RoPE on each head's {share} pass through",
              "q, k [H, T, dh]"),
        Stage("cache", ("attn.keys", "attn.values"), "cache",
              "K, V of all t positions (new rows written to the cache)", "k, v [H, T, dh]"),
        Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (per head)", "Q [H, 1, T, dh], K^T [H, 1, dh, t]",
              ATTENTION_SCORES),
        Stage("scale", ("attn.scaled",), "scale", "S = S / sqrt(dh)", "S [H, T, t]"),
        Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
        Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
        Stage("mix", ("attn.mix",), "matmul", "Z = A V  (per head)", "A [H, 1, T, t], V [H, 1, t, dh]",
              ATTENTION_SCORES),
        Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, D]", "Z [H, T, dh]"),
        Stage("out", ("attn.out",), "matmul", f"o = Z W_o{b('o')}", "Z [T, D], W_o [D, D]", ATTENTION_PROJECTIONS),
    )  # fmt: skip
    mlp = (
        Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up + b_up", "h [T, D], W_up [D, F]", MLP),
        Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
        Stage("mlp.down", ("mlp.down",), "matmul", "m = g W_down + b_down", "g [T, F], W_down [F, D]", MLP),
    )
    residual: tuple[Stage, ...]
    if parallel:
        residual = (
            Stage("ln_2", ("ln_2",), "norm", "h = LayerNorm_2(x)  (the block's input x, as ln_1's)", "x [T, D]",
                  reads_stream=True),
            *mlp,
            Stage("resid_post", ("resid_post",), "residual", "parallel: x + attn(ln1(x)) + mlp(ln2(x))",
                  "x, o, m [T, D]"),
        )  # fmt: skip
    else:
        residual = (
            Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]"),
            Stage("ln_2", ("ln_2",), "norm", "h = LayerNorm_2(x)", "x [T, D]", reads_stream=True),
            *mlp,
            Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
        )
    final = (
        Stage("ln_f", ("ln_f",), "norm", "h = LayerNorm_f(x)", "x [T, D]"),
        LAST,
        LOGITS,
    )
    symbols = (
        "T new positions, t attended (past + T), D d_model, H heads, dh = D/H, F MLP width, V vocabulary, R logit rows"
    )
    return StageTable("neox", embed, attention + residual, final, symbols)


def stages_of(config) -> StageTable:
    """The table of a GPT-NeoX config: its residual (parallel or serial) and its attention biases."""
    return neox_family(config.use_parallel_residual, config.attention_bias, (config.rotary_dims, config.d_head))
