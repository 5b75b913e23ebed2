"""The vocabulary of a forward pass: every stage's op name, capture name(s), kind and equation, in order.

This table is the map users read: the ledger, the trace and the JSON all name stages by it, and
the forward pass (model.py) records each stage under its op. Only `kind == "matmul"` stages hold
dot products; the others are here so that the map of a block is complete.

Dimension symbols used in shapes:
    B  batch (absent for a single prompt)       T  positions computed in this pass
    t  positions attended to (past + T)          D  d_model
    H  heads        dh  d_head = D / H           F  MLP width (n_inner, usually 4 D)
    V  vocabulary   R  rows of logits: 1 during generation, T for model.logits()
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    op: str  # ledger vocabulary (JSON "op")
    names: tuple[str, ...]  # capture name(s) inside the block or model, for run_with_cache and hooks
    kind: str  # matmul | lookup | norm | reshape | cache | scale | mask | softmax | activation | residual | select
    equation: str
    reads: str  # symbolic shape(s) of the input, for traces


EMBED = Stage("embed", ("embed",), "lookup", "x = W_te[ids] + W_pe[positions]", "ids [T]")

BLOCK = (
    Stage("ln_1", ("ln_1",), "norm", "h = LayerNorm_1(x)", "x [T, D]"),
    Stage("qkv", ("attn.qkv",), "matmul", "[Q K V] = h W_qkv + b_qkv", "h [T, D], W_qkv [D, 3D]"),
    Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape", "Q, K, V -> H heads of dh", "[T, 3D]"),
    Stage("cache", ("attn.keys", "attn.values"), "cache", "K, V of all t positions (new rows written to the cache)",
          "k, v [H, T, dh]"),
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (per head)", "Q [H, T, dh], K^T [H, dh, t]"),
    Stage("scale", ("attn.scaled",), "scale", "S = S * scale  (1/sqrt(dh) unless configured otherwise)", "S [H, T, t]"),
    Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
    Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A V  (per head)", "A [H, T, t], V [H, t, dh]"),
    Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, D]", "Z [H, T, dh]"),
    Stage("out", ("attn.out",), "matmul", "o = Z W_o + b_o", "Z [T, D], W_o [D, D]"),
    Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]"),
    Stage("ln_2", ("ln_2",), "norm", "h = LayerNorm_2(x)", "x [T, D]"),
    Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up + b_up", "h [T, D], W_up [D, F]"),
    Stage("mlp.act", ("mlp.act",), "activation", "g = act(u)", "u [T, F]"),
    Stage("mlp.down", ("mlp.down",), "matmul", "m = g W_down + b_down", "g [T, F], W_down [F, D]"),
    Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]"),
)  # fmt: skip

FINAL = (
    Stage("ln_f", ("ln_f",), "norm", "h = LayerNorm_f(x)", "x [T, D]"),
    Stage("last", ("last",), "select", "h = h[last position]  (generation needs only the next token)", "h [T, D]"),
    Stage("logits", ("logits",), "matmul", "logits = h W_U^T  (W_U = W_te when tied)", "h [R, D], W_te^T [D, V]"),
)

STAGES: dict[str, Stage] = {s.op: s for s in (EMBED, *BLOCK, *FINAL)}
MATMUL_OPS = tuple(s.op for s in STAGES.values() if s.kind == "matmul")
BLOCK_OPS = tuple(s.op for s in BLOCK)
