"""The vocabulary of a forward pass: every stage's op name, capture name(s), kind and equation, in order.

This table is the map users read: the ledger, the trace and the JSON all name stages by it, and
the forward pass (gpt2.py, llama.py) records each stage under its op. Only `kind == "matmul"`
stages hold dot products; the others are here so that the map of a block is complete.

Each family has its own table (`Family`): what a GPT-2 block and a Llama block compute differs,
and the equations say how. Stages that play the same part have the same op and capture names in
both (ln_1, scores, softmax, mix, out, mlp.up, mlp.down, resid_post, ...), so a hook or a query
written for one family reads the other.

Dimension symbols used in shapes:
    B  batch (absent for a single prompt)       T  positions computed in this pass
    t  positions attended to (past + T; at most the sliding window + T - 1 where there is one)
    D  d_model      H  query heads      dh  d_head (D / H unless the config says otherwise)
    Hkv  key/value heads (H for GPT-2)          G  query heads per key/value head (H / Hkv)
    F  MLP width    V  vocabulary   R  rows of logits: 1 during generation, T for model.logits()
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache


@dataclass(frozen=True)
class Stage:
    op: str  # ledger vocabulary (JSON "op")
    names: tuple[str, ...]  # capture name(s) inside the block or model, for run_with_cache and hooks
    kind: str  # matmul | lookup | norm | reshape | rotate | cache | scale | mask | softmax | activation | multiply
    #            | residual | select
    equation: str
    reads: str  # symbolic shape(s) of the input, for traces
    group: str = ""  # for matrix products: which part of the model's arithmetic they are (count's summary)


@dataclass(frozen=True)
class Family:
    """The stages of one architecture, in the order its forward pass runs them."""

    name: str
    embed: tuple[Stage, ...]
    block: tuple[Stage, ...]
    final: tuple[Stage, ...]
    symbols: str  # the dimension symbols its shapes use, for traces

    @cached_property
    def stages(self) -> dict[str, Stage]:
        return {s.op: s for s in (*self.embed, *self.block, *self.final)}

    @cached_property
    def matmul_ops(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.stages.values() if s.kind == "matmul")

    @cached_property
    def block_ops(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.block)

    def stage_names(self, n_layer: int) -> list[str]:
        """Every capture name of a model with n_layer blocks, in the order the forward pass produces them."""
        names = [name for stage in self.embed for name in stage.names]
        for i in range(n_layer):
            names += [f"blocks.{i}.{name}" for stage in self.block for name in stage.names]
        return names + [name for stage in self.final for name in stage.names]


ATTENTION_PROJECTIONS = "attention projections"
ATTENTION_SCORES = "attention scores and mix"
MLP = "MLP"
UNEMBEDDING = "logits"

# --- GPT-2 --------------------------------------------------------------------------------------------
EMBED = Stage("embed", ("embed",), "lookup", "x = W_te[ids] + W_pe[positions]", "ids [T]")

BLOCK = (
    Stage("ln_1", ("ln_1",), "norm", "h = LayerNorm_1(x)", "x [T, D]"),
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
    Stage("ln_2", ("ln_2",), "norm", "h = LayerNorm_2(x)", "x [T, D]"),
    Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up + b_up", "h [T, D], W_up [D, F]", MLP),
    Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
    Stage("mlp.down", ("mlp.down",), "matmul", "m = g W_down + b_down", "g [T, F], W_down [F, D]", MLP),
    Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
)  # fmt: skip

FINAL = (
    Stage("ln_f", ("ln_f",), "norm", "h = LayerNorm_f(x)", "x [T, D]"),
    Stage("last", ("last",), "select", "h = h[last position]  (generation needs only the next token)", "h [T, D]"),
    Stage("logits", ("logits",), "matmul", "logits = h W_U^T  (W_U = W_te when tied)", "h [R, D], W_te^T [D, V]",
          UNEMBEDDING),
)

GPT2 = Family("gpt2", (EMBED,), BLOCK, FINAL,
              "T new positions, t attended (past + T), D d_model, H heads, dh = D/H, F MLP width, V vocabulary, "
              "R logit rows")  # fmt: skip

# The GPT-2 table under its old names (the ledger's first vocabulary).
STAGES = GPT2.stages
MATMUL_OPS = GPT2.matmul_ops
BLOCK_OPS = GPT2.block_ops


# --- Llama (Llama 2/3, Mistral, Qwen2) -----------------------------------------------------------------
def _plus(bias: bool, name: str) -> str:
    return f" + b_{name}" if bias else ""


@lru_cache(maxsize=None)
def llama_family(qkv_bias: bool = False, o_bias: bool = False, mlp_bias: bool = False, window: bool = False) -> Family:
    """The Llama block's stages; the equations show the biases and the sliding window where a config has them."""
    q, o, m = (lambda n: _plus(qkv_bias, n)), _plus(o_bias, "o"), (lambda n: _plus(mlp_bias, n))
    mask = ("S[i, j] = -inf where j is in i's future or more than the window behind" if window
            else "S[i, j] = -inf where j is in i's future")  # fmt: skip
    embed = (Stage("embed", ("embed",), "lookup", "x = W_te[ids]  (positions enter later, by rotating q and k)",
                   "ids [T]"),)  # fmt: skip
    block = (
        Stage("ln_1", ("ln_1",), "norm", "h = RMSNorm_1(x)", "x [T, D]"),
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
        Stage("ln_2", ("ln_2",), "norm", "h = RMSNorm_2(x)", "x [T, D]"),
        Stage("mlp.gate", ("mlp.gate",), "matmul", f"g = h W_gate{m('gate')}", "h [T, D], W_gate [D, F]", MLP),
        Stage("mlp.up", ("mlp.up",), "matmul", f"u = h W_up{m('up')}", "h [T, D], W_up [D, F]", MLP),
        Stage("mlp.act", ("mlp.act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, F]"),
        Stage("mlp.mul", ("mlp.mul",), "multiply", "a = a * u  (the gate, elementwise)", "a, u [T, F]"),
        Stage("mlp.down", ("mlp.down",), "matmul", f"m = a W_down{m('down')}", "a [T, F], W_down [F, D]", MLP),
        Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
    )  # fmt: skip
    final = (
        Stage("ln_f", ("ln_f",), "norm", "h = RMSNorm_f(x)", "x [T, D]"),
        FINAL[1],
        FINAL[2],
    )
    symbols = ("T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
               "F MLP width, V vocabulary, R logit rows")  # fmt: skip
    return Family("llama", embed, block, final, symbols)


def family_of(config) -> Family:
    """The stage table of a config's family."""
    if config.family == "llama":
        return llama_family(config.qkv_bias, config.o_bias, config.mlp_bias, config.sliding_window is not None)
    return GPT2
