"""The Llama family's stage table: every stage of its forward pass (forward.py), in order, with its op, capture names,
kind and equation (the vocabulary is the engine's: engine/stages.py)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, LAST, LOGITS, MLP, Family, Stage


def _plus(bias: bool, name: str) -> str:
    return f" + b_{name}" if bias else ""


@cache
def llama_family(qkv_bias: bool = False, o_bias: bool = False, mlp_bias: bool = False, window: bool = False) -> Family:
    """The Llama block's stages; the equations show the biases and the sliding window where a config has them."""
    q, o, m = (lambda n: _plus(qkv_bias, n)), _plus(o_bias, "o"), (lambda n: _plus(mlp_bias, n))
    mask = ("S[i, j] = -inf where j is in i's future or more than the window behind" if window
            else "S[i, j] = -inf where j is in i's future")  # fmt: skip
    embed = (Stage("embed", ("embed",), "lookup", "x = W_te[ids]  (positions enter later, by rotating q and k)",
                   "ids [T]"),)  # fmt: skip
    block = (
        Stage("ln_1", ("ln_1",), "norm", "h = RMSNorm_1(x)", "x [T, D]", reads_stream=True),
        Stage("q", ("attn.q_proj",), "matmul", f"q = h W_q{q('q')}", "h [T, D], W_q [D, H*dh]", ATTENTION_PROJECTIONS),
        Stage("k", ("attn.k_proj",), "matmul", f"k = h W_k{q('k')}  (Hkv heads: narrower than q when Hkv < H)",
              "h [T, D], W_k [D, Hkv*dh]", ATTENTION_PROJECTIONS),
        Stage("v", ("attn.v_proj",), "matmul", f"v = h W_v{q('v')}", "h [T, D], W_v [D, Hkv*dh]",
              ATTENTION_PROJECTIONS),
        Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "q -> H heads of dh; k, v -> Hkv heads of dh",
              "q [T, H*dh], k, v [T, Hkv*dh]"),
        Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate",
              "q, k = RoPE(q, k): each pair of numbers turned by position x frequency", "q [H, T, dh], k [Hkv, T, dh]"),
        Stage("cache", ("attn.keys", "attn.values"), "cache",
              "K, V of the t attended positions (new rows written to the cache)", "k, v [Hkv, T, dh]"),
        Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (each query head against the K of its group)",
              "Q [Hkv, G, T, dh], K^T [Hkv, 1, dh, t]", ATTENTION_SCORES),
        Stage("scale", ("attn.scaled",), "scale", "S = S / sqrt(dh)", "S [H, T, t]"),
        Stage("mask", ("attn.scores",), "mask", mask, "S [H, T, t]"),
        Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
        Stage("mix", ("attn.mix",), "matmul", "Z = A V  (each query head with the V of its group)",
              "A [Hkv, G, T, t], V [Hkv, 1, t, dh]", ATTENTION_SCORES),
        Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, H*dh]", "Z [H, T, dh]"),
        Stage("out", ("attn.out",), "matmul", f"o = Z W_o{o}", "Z [T, H*dh], W_o [H*dh, D]", ATTENTION_PROJECTIONS),
        Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]"),
        Stage("ln_2", ("ln_2",), "norm", "h = RMSNorm_2(x)", "x [T, D]", reads_stream=True),
        Stage("mlp.gate", ("mlp.gate",), "matmul", f"g = h W_gate{m('gate')}", "h [T, D], W_gate [D, F]", MLP),
        Stage("mlp.up", ("mlp.up",), "matmul", f"u = h W_up{m('up')}", "h [T, D], W_up [D, F]", MLP),
        Stage("mlp.act", ("mlp.act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, F]"),
        Stage("mlp.mul", ("mlp.mul",), "multiply", "a = a * u  (the gate, elementwise)", "a, u [T, F]"),
        Stage("mlp.down", ("mlp.down",), "matmul", f"m = a W_down{m('down')}", "a [T, F], W_down [F, D]", MLP),
        Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
    )  # fmt: skip
    final = (
        Stage("ln_f", ("ln_f",), "norm", "h = RMSNorm_f(x)", "x [T, D]"),
        LAST,
        LOGITS,
    )
    symbols = ("T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
               "F MLP width, V vocabulary, R logit rows")  # fmt: skip
    return Family("llama", embed, block, final, symbols)


def stages_of(config) -> Family:
    """The table of a Llama-family config: its equations show the biases and the sliding window it has."""
    return llama_family(config.qkv_bias, config.o_bias, config.mlp_bias, config.sliding_window is not None)
