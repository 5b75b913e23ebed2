"""The Llama family's stage table: every stage of its forward pass (forward.py), in order, with its op, capture names,
kind and equation (the vocabulary is the engine's: engine/stages.py), as its parts: the pre-norm block's four stages
around the attention's and the MLP's (the parts other families' tables are written from too)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, LAST, LOGITS, MLP, Stage, StageTable

EMBED = (
    Stage("embed", ("embed",), "lookup", "x = W_te[ids]  (positions enter later, by rotating q and k)", "ids [T]"),
)
FINAL = (Stage("ln_f", ("ln_f",), "norm", "h = RMSNorm_f(x)", "x [T, D]"), LAST, LOGITS)
SYMBOLS = (
    "T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
    "F MLP width, V vocabulary, R logit rows"
)
MASK = "S[i, j] = -inf where j is in i's future"
WINDOW_MASK = "S[i, j] = -inf where j is in i's future or more than the window behind"
SOME_LAYERS = "  (the window: sliding_attention layers only)"


def _plus(bias: bool, name: str) -> str:
    return f" + b_{name}" if bias else ""


def pre_norm(attention: tuple[Stage, ...], mlp: tuple[Stage, ...], norm: str = "RMSNorm") -> tuple[Stage, ...]:
    """The stages of a pre-norm block (blocks.PreNorm) around its attention's and its MLP's."""
    return (
        Stage("ln_1", ("ln_1",), "norm", f"h = {norm}_1(x)", "x [T, D]", reads_stream=True),
        *attention,
        Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]"),
        Stage("ln_2", ("ln_2",), "norm", f"h = {norm}_2(x)", "x [T, D]", reads_stream=True),
        *mlp,
        Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
    )


@cache
def attention(qkv_bias: bool = False, o_bias: bool = False, mask: str = MASK) -> tuple[Stage, ...]:
    """Grouped-query attention's stages (forward.attention); the equations show the biases, and the mask's the
    window, where a config has them."""
    q, o = (lambda n: _plus(qkv_bias, n)), _plus(o_bias, "o")
    return (
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
    )  # fmt: skip


def mask(window: bool, some_layers: bool = False) -> str:
    """The mask's equation: the future only, or the window too (on the sliding_attention layers only)."""
    return (WINDOW_MASK + (SOME_LAYERS if some_layers else "")) if window else MASK


@cache
def gated_mlp(bias: bool = False) -> tuple[Stage, ...]:
    """The gated MLP's stages (forward.mlp)."""
    m = lambda n: _plus(bias, n)  # noqa: E731 - the bias of one of the three products, where they have them
    return (
        Stage("mlp.gate", ("mlp.gate",), "matmul", f"g = h W_gate{m('gate')}", "h [T, D], W_gate [D, F]", MLP),
        Stage("mlp.up", ("mlp.up",), "matmul", f"u = h W_up{m('up')}", "h [T, D], W_up [D, F]", MLP),
        Stage("mlp.act", ("mlp.act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, F]"),
        Stage("mlp.mul", ("mlp.mul",), "multiply", "a = a * u  (the gate, elementwise)", "a, u [T, F]"),
        Stage("mlp.down", ("mlp.down",), "matmul", f"m = a W_down{m('down')}", "a [T, F], W_down [F, D]", MLP),
    )


@cache
def llama_family(
    qkv_bias: bool = False, o_bias: bool = False, mlp_bias: bool = False, window: bool = False
) -> StageTable:
    """The Llama block's stages; the equations show the biases and the sliding window where a config has them."""
    block = pre_norm(attention(qkv_bias, o_bias, mask(window)), gated_mlp(mlp_bias))
    return StageTable("llama", EMBED, block, FINAL, SYMBOLS)


def stages_of(config) -> StageTable:
    """The table of a Llama-family config: its equations show the biases and the sliding window it has."""
    return llama_family(config.qkv_bias, config.o_bias, config.mlp_bias, config.sliding_window is not None)
