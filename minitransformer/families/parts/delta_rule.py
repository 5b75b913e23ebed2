"""The gated delta rule of a Gated DeltaNet layer (linear attention with a delta-rule state: parts/deltanet.py), as
transformers' torch_recurrent_gated_delta_rule and torch_chunk_gated_delta_rule compute it, every product through
Tape.matmul: its stages, its two forms and their closed forms.

Each value head keeps a state S [dk, dv]: a map from keys to values. For each new position, with its key k and
query q (its key head's, l2-normed, q scaled by dk^-1/2), its value v, its decay g <= 0 and its write strength
beta in (0, 1):

    S = e^g S                      the state fades (the decay gate)
    delta = beta (v - S^T k)       what the state gets wrong about v: read with k, compared (the delta rule)
    S = S + k delta^T              the correction written back, at k (an outer product: dk x dv MACs of length 1)
    o = S^T q                      the output: the state read with q

Three products a position and value head, each dk dv MACs: read S^T k, write k (x) delta, query S^T q. That is
the recurrent form, which a decode step computes (`recurrent`).

A prompt of T positions is computed in chunks of C = min(64, T) positions (`chunked`, the last chunk padded with
zeros as transformers pads it), so that most of its work is in products of C rows rather than T products of one.
Within a chunk, with gamma_i the decay accumulated from the chunk's start to position i:
- the positions' deltas depend on one another through the state; they are the solution X = (I + L)^-1 [beta v,
  beta gamma k] of a unit lower-triangular system, L[i, j] = beta_i (k_i . k_j) gamma_i / gamma_j for j < i: the
  keys' dot products (`delta.kk`), then the solve row by row (`delta.solve`, forward substitution);
- what the state entering the chunk predicts for the values is subtracted, W S (`delta.read`), W = the solved
  beta gamma k: the chunk's reads of the state at once; the chunk's output is its queries against that state,
  (gamma q) S (`delta.query`), plus the attention within the chunk, (Q K^T . decays) times the corrected values
  (`delta.qk`, `delta.mix`); the state leaving the chunk is e^(sum g) S + (decayed K)^T (corrected values)
  (`delta.write`).
Read, query and write are the recurrent form's three products done for C positions at once (the same MACs, but
for the padding); kk, qk, solve and mix are what the chunks add. The ledger counts the chunks as computed, and
gives each of their records the recurrent form's cost beside it (Record.recurrent).

In closed form (`scan_products`), Hk key heads of dk, Hv value heads of dv: per position and value head, 3 dk dv MACs
in the recurrent form, whatever the context; over a prompt of T positions in N = ceil(T / C) chunks, read, query and
write cost the same for N C positions, and the chunks add K K^T and Q K^T (Hk N C^2 dk each), the triangular solve
(Hv N (dk + dv) C (C - 1) / 2) and the mix within each chunk (Hv N C^2 dv).

Kimi Delta Attention's decay (`per_channel`, parts/kda.py) is one number a key channel instead of one a head: g [dk]
a position and head, S = diag(e^g) S. The recurrent form's three products are the same. In chunks, gamma_i / gamma_j
is a [dk] vector a pair (i, j), so the keys' and the queries' dot products within a chunk fold it in: each row i reads
the chunk's keys decayed to it, K_i[j] = k_j . gamma_i / gamma_j (`delta.decayed_keys`, an elementwise stage), and
kk, qk become k_i K_i^T and q_i K_i^T: the same C^2 dot products of length dk a chunk, but one set a value head (the
decays are a value head's), where the scalar decay shares K K^T and Q K^T among a key head's value heads. A decode
step is flat in context either way: 3 dk dv MACs a value head, whatever t.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...engine.ops import constant
from ...engine.shapes import ShapeOnly
from ...engine.stages import READS_STATE, STATE, WRITES_STATE, Stage, by_op
from ...engine.tape import Tape
from ..qwen35.config import CHUNK

# The delta rule's stages, one position at a time (a decode step) and in chunks (a prompt). read, write, query and
# update are the recurrent form's, and over a prompt the same steps for a chunk at once.
DELTA_RULE = by_op(
    Stage("delta.decay", ("linear_attn.state_decayed",), "scale", "S = e^g S", "S [Hv, dk, dv]"),
    Stage("delta.chunks", ("linear_attn.q_chunks", "linear_attn.k_chunks", "linear_attn.v_chunks",
                           "linear_attn.g_chunks", "linear_attn.beta_chunks"), "reshape",
          "q, k, v, g, beta in N chunks of C (zero-padded)", "q, k, v, g, beta [.., T, ..]"),
    Stage("delta.cumdecay", ("linear_attn.cumdecay",), "scale", "log gamma = cumsum(g) in each chunk", "g [Hv, N, C]"),
    Stage("delta.decays", ("linear_attn.decays",), "scale", "gamma_i / gamma_j  (j <= i; 0 above)", "gamma [Hv, N, C]"),
    Stage("delta.kk", ("linear_attn.kk",), "matmul", "K K^T  (within each chunk)",
          "K [Hk, N, C, dk], K^T [Hk, N, dk, C]", STATE),
    Stage("delta.system", ("linear_attn.system",), "scale", "L = beta_i k_i.k_j gamma_i / gamma_j  (j < i)",
          "K K^T [Hk, N, C, C]"),
    Stage("delta.rhs", ("linear_attn.rhs",), "scale", "[beta v, beta gamma k]", "v [Hv, N, C, dv], k [Hk, N, C, dk]"),
    Stage("delta.solve", ("linear_attn.solved",), "matmul",
          "[U W] = (I + L)^-1 [beta v, beta gamma k]  (row by row)", "L [Hv, N, C, C], [U W] [Hv, N, C, dv+dk]", STATE),
    Stage("delta.qk", ("linear_attn.qk",), "matmul", "Q K^T  (within each chunk)",
          "Q [Hk, N, C, dk], K^T [Hk, N, dk, C]", STATE),
    Stage("delta.attn", ("linear_attn.attn",), "scale", "A = Q K^T . gamma_i / gamma_j  (j <= i)", "Q K^T [Hk, N, C, C]"),
    Stage("delta.q_decayed", ("linear_attn.q_decayed",), "scale", "gamma Q  (decayed from the chunk's start)",
          "q [Hk, N, C, dk]"),
    Stage("delta.k_decayed", ("linear_attn.k_decayed",), "scale", "K' = K gamma_C / gamma  (to the chunk's end)",
          "k [Hk, N, C, dk]"),
    Stage("delta.read", ("linear_attn.read",), "matmul", "S^T k  (a prompt: W S, a chunk at once)",
          "k [Hk, 1, T, dk] or W [Hv, N, C, dk], S [Hv, dk, dv]", STATE, state=READS_STATE),
    Stage("delta.delta", ("linear_attn.delta",), "scale", "delta = beta (v - S^T k)", "v, S^T k [Hv, T, dv]"),
    Stage("delta.corrected", ("linear_attn.corrected",), "add", "V' = U - W S  (a chunk's deltas)", "U, W S [Hv, C, dv]"),
    Stage("delta.query", ("linear_attn.query",), "matmul", "o = S^T q  (a prompt: (gamma Q) S)",
          "q [Hk, 1, T, dk] or gamma Q [Hv, N, C, dk], S [Hv, dk, dv]", STATE, state=READS_STATE),
    Stage("delta.mix", ("linear_attn.mix",), "matmul", "A V'  (within the chunk)", "A [Hv, N, C, C], V' [Hv, N, C, dv]",
          STATE),
    Stage("delta.chunk_out", ("linear_attn.chunk_out",), "add", "o = (gamma Q) S + A V'", "[Hv, C, dv]"),
    Stage("delta.write", ("linear_attn.write",), "matmul", "k delta^T  (an outer product; a prompt: K'^T V')",
          "k^T [Hk, 1, dk, T], delta [Hv, T, dv]", STATE, state=WRITES_STATE),
    Stage("delta.update", ("linear_attn.state",), "add", "S = S + k delta^T  (a prompt: gamma_C S + K'^T V')",
          "S [Hv, dk, dv]"),
    Stage("delta.out", ("linear_attn.core_out",), "reshape", "o: the chunks' outputs in order", "o [Hv, N, C, dv]"),
)  # fmt: skip


# The same rule with one decay a key channel (Kimi Delta Attention's): the stages whose equations say so, and the keys
# decayed to each row of a chunk, which its kk and qk read.
DECAYED_KEYS = Stage("delta.decayed_keys", ("linear_attn.decayed_keys",), "scale",
                     "K_i[j] = k_j . gamma_i / gamma_j  (row i's keys decayed to it, each channel its own; 0 for j > i)",
                     "k [Hk, N, C, dk], gamma_i / gamma_j [Hv, N, C, C, dk]")  # fmt: skip
PER_CHANNEL_EQUATIONS = {
    "delta.decay": ("S = diag(e^g) S  (each key channel its own decay)", "S [Hv, dk, dv], g [Hv, dk]"),
    "delta.cumdecay": ("log gamma = cumsum(g) in each chunk, each key channel", "g [Hv, N, C, dk]"),
    "delta.decays": ("gamma_i / gamma_j, a [dk] vector a pair  (j <= i; 0 above)", "gamma [Hv, N, C, dk]"),
    "delta.kk": (
        "k_i K_i^T  (row i's key against the keys decayed to it)",
        "k [Hk, N, C, 1, dk], K_i [Hv, N, C, C, dk]",
    ),
    "delta.system": ("L = beta_i k_i K_i^T  (j < i)", "k_i K_i^T [Hv, N, C, C]"),
    "delta.rhs": ("[beta v, beta gamma . k]  (gamma a [dk] vector a position)", "v [Hv, N, C, dv], k [Hk, N, C, dk]"),
    "delta.qk": (
        "q_i K_i^T  (row i's query against the keys decayed to it)",
        "q [Hk, N, C, 1, dk], K_i [Hv, N, C, C, dk]",
    ),
    "delta.attn": ("A = q_i K_i^T  (decayed already; j <= i)", "q_i K_i^T [Hv, N, C, 1, C]"),
    "delta.q_decayed": ("gamma . Q  (each channel decayed from the chunk's start)", "q [Hk, N, C, dk]"),
    "delta.k_decayed": ("K' = K . gamma_C / gamma  (each channel to the chunk's end)", "k [Hk, N, C, dk]"),
    "delta.update": ("S = S + k delta^T  (a prompt: diag(gamma_C) S + K'^T V')", "S [Hv, dk, dv]"),
}


def _per_channel() -> dict[str, Stage]:
    """DELTA_RULE with one decay a key channel: its equations, and the decayed keys before kk reads them."""
    stages = []
    for op, stage in DELTA_RULE.items():
        if op == "delta.kk":
            stages.append(DECAYED_KEYS)
        equation, reads = PER_CHANNEL_EQUATIONS.get(op, (stage.equation, stage.reads))
        stages.append(replace(stage, equation=equation, reads=reads))
    return by_op(*stages)


PER_CHANNEL = _per_channel()

# The recurrent form's products, each (dot products, MACs) for T positions of Hv value heads: read S^T k (dv dot
# products of length dk), write k (x) delta (dk dv of length 1), query S^T q (dv of length dk).
RECURRENT = {
    "delta.read": lambda T, Hv, dk, dv: (T * Hv * dv, T * Hv * dv * dk),
    "delta.write": lambda T, Hv, dk, dv: (T * Hv * dk * dv, T * Hv * dk * dv),
    "delta.query": lambda T, Hv, dk, dv: (T * Hv * dv, T * Hv * dv * dk),
}
# A chunk's products over the state, each as the whole prompt's record shows the chunks side by side.
ACROSS_CHUNKS = {
    "delta.read": "Hk Gv N C dk, Hk Gv N dk dv -> Hk Gv N C dv",
    "delta.corrected": "Hk Gv N C dv",
    "delta.query": "Hk Gv N C dk, Hk Gv N dk dv -> Hk Gv N C dv",
    "delta.mix": "Hk Gv N C C, Hk Gv N C dv -> Hk Gv N C dv",
    "delta.chunk_out": "Hk Gv N C dv",
    "delta.write": "Hk Gv N dk C, Hk Gv N C dv -> Hk Gv N dk dv",
    "delta.update": "Hk Gv N dk dv",
}
NO_RECURRENT = (0, 0)  # what the recurrent form computes of a product it does not have


def delta_rule(at: Tape, q, k, v, g, beta, state=None, per_channel: bool = False):
    """q, k [..., Hk, T, dk], v [..., Hk, Gv, T, dv], g and beta [..., Hk, Gv, T] (`per_channel`: g [..., Hk, Gv, T,
    dk], a decay a key channel) -> o [..., Hk, Gv, T, dv]: the recurrent form for one position, chunks for more.
    `state` [..., Hk, Gv, dk, dv] is read and overwritten in place (None: a fresh sequence whose state is not kept)."""
    at = at.declaring(PER_CHANNEL if per_channel else DELTA_RULE)
    S = state if state is not None else _zeros(v, (*v.shape[:-2], k.shape[-1], v.shape[-1]))
    if q.shape[-2] == 1:
        o, S = recurrent(at, q, k, v, g, beta, S, per_channel)
    else:
        o, S = chunked(at, q, k, v, g, beta, S, per_channel)
    if state is not None and not isinstance(state, ShapeOnly):
        state[...] = S
    return o


def recurrent(at: Tape, q, k, v, g, beta, S, per_channel: bool = False):
    """One position (T = 1), as a decode step computes it: the state decayed, read with k, corrected at k, read
    with q. Returns (o [..., Hk, Gv, T, dv], the new state)."""
    fade = _exp(g).swapaxes(-1, -2) if per_channel else _exp(g)[..., None]  # [dk, 1] a head, or (T = 1) one number
    S = at.stage("delta.decay", S * fade, "Hk Gv dk dv")
    k1, q1 = k[..., None, :, :], q[..., None, :, :]  # the key head's k and q, for each of its Gv value heads
    read = at.matmul("delta.read", k1, S, "Hk 1 T dk, Hk Gv dk dv -> Hk Gv T dv")
    delta = at.stage("delta.delta", (v - read) * beta[..., None], "Hk Gv T dv")
    write = at.matmul("delta.write", k1.swapaxes(-1, -2), delta, "Hk 1 dk T, Hk Gv T dv -> Hk Gv dk dv")
    S = at.stage("delta.update", S + write, "Hk Gv dk dv")
    return at.matmul("delta.query", q1, S, "Hk 1 T dk, Hk Gv dk dv -> Hk Gv T dv"), S


def chunked(at: Tape, q, k, v, g, beta, S, per_channel: bool = False):
    """T > 1 positions in chunks of C = min(64, T), the last padded with zeros (zero keys, values and write strength,
    no decay: the state passes it unchanged). Returns (o [..., Hk, Gv, T, dv], the state after the last position).
    `per_channel`: g a decay a key channel, folded into each row's keys (decayed_scores)."""
    T, dv = q.shape[-2], v.shape[-1]
    C, N = chunking(T)
    at = at.with_sizes(C=C, N=N)
    channel = " dk" if per_channel else ""  # a decay's own axis: its key channels, or none (one number a head)
    g = _chunks(g, N, C) if per_channel else _chunks(g[..., None], N, C)[..., 0]
    pieces = (_chunks(q, N, C), _chunks(k, N, C), _chunks(v, N, C), g, _chunks(beta[..., None], N, C)[..., 0])
    q, k, v, g, beta = at.stage(
        "delta.chunks", pieces, f"Hk N C dk; Hk N C dk; Hk Gv N C dv; Hk Gv N C{channel}; Hk Gv N C"
    )
    # log gamma_i: the decay from the chunk's start to i
    cum = at.stage("delta.cumdecay", _cumsum(g, -2 if per_channel else -1), f"Hk Gv N C{channel}")
    # gamma_i / gamma_j, j <= i; else 0
    decays = at.stage("delta.decays", _pairwise_decays(cum, per_channel), f"Hk Gv N C C{channel}")
    keys = None
    if per_channel:  # row i's keys decayed to it, channel by channel: what its kk and qk read
        keys = at.stage("delta.decayed_keys", k[..., None, :, None, :, :] * decays, "Hk Gv N C C dk")
    X = solved(at, k, v, beta, cum, decays, keys)
    u, w = X[..., :dv], X[..., dv:]  # the values to write and the keys that read the state, beta-weighted
    if keys is None:
        qk = at.matmul("delta.qk", q, k.swapaxes(-1, -2), "Hk N C dk, Hk N dk C -> Hk N C C", recurrent=NO_RECURRENT)
        A = at.stage("delta.attn", qk[..., None, :, :, :] * decays, "Hk Gv N C C")  # within the chunk, causal, decayed
        q_decayed = at.stage("delta.q_decayed", q[..., None, :, :, :] * _exp(cum)[..., None], "Hk Gv N C dk")
        to_end = _exp(cum[..., -1:] - cum)[..., None]  # the decay from each position to its chunk's end
        fade = _exp(cum[..., -1])[..., None, None]  # the chunk's whole decay, one number a head
    else:
        A = at.stage("delta.attn", decayed_scores(at, "delta.qk", q, keys), "Hk Gv N C C")
        q_decayed = at.stage("delta.q_decayed", q[..., None, :, :, :] * _exp(cum), "Hk Gv N C dk")
        to_end = _exp(cum[..., -1:, :] - cum)
        fade = _exp(cum[..., -1, :])[..., None]  # [dk, 1]: each key channel's row of the state
    k_decayed = at.stage("delta.k_decayed", k[..., None, :, :, :] * to_end, "Hk Gv N C dk")
    outputs, S = across_chunks(at, u, w, q_decayed, A, k_decayed, fade, S, T)
    return at.stage("delta.out", _unchunk(outputs, T, v), "Hk Gv T dv"), S


def decayed_scores(at: Tape, op: str, x, keys):
    """x_i K_i^T [..., Hk, Gv, N, C, C]: each row i of x [..., Hk, N, C, dk] (a chunk's keys or queries) against the
    chunk's keys decayed to it, `keys` [..., Hk, Gv, N, C, C, dk] (per channel: C^2 dot products of length dk a value
    head and chunk, zero where j > i)."""
    rows = x[..., None, :, :, None, :]  # [..., Hk, 1, N, C, 1, dk]: row i, read by each of its value heads
    scores = at.matmul(
        op, rows, keys.swapaxes(-1, -2), "Hk 1 N C 1 dk, Hk Gv N C dk C -> Hk Gv N C 1 C", recurrent=NO_RECURRENT
    )
    return scores[..., 0, :]


def solved(at: Tape, k, v, beta, cum, decays, keys=None):
    """[U W] = (I + L)^-1 [beta v, beta gamma k] [..., Hk, Gv, N, C, dv+dk]: each chunk's deltas, from the keys' dot
    products within it (L[i, j] = beta_i k_i.k_j gamma_i / gamma_j, j < i), solved row by row. `keys`: row i's keys
    decayed to it, where the decay is a key channel's (gamma then a [dk] vector a position)."""
    if keys is None:
        kk = at.matmul("delta.kk", k, k.swapaxes(-1, -2), "Hk N C dk, Hk N dk C -> Hk N C C", recurrent=NO_RECURRENT)
        L = at.stage("delta.system", _strictly_lower(beta[..., None] * kk[..., None, :, :, :] * decays), "Hk Gv N C C")
        gamma = _exp(cum)[..., None]
    else:
        kk = decayed_scores(at, "delta.kk", k, keys)
        L = at.stage("delta.system", _strictly_lower(beta[..., None] * kk), "Hk Gv N C C")
        gamma = _exp(cum)
    rhs = _join(v * beta[..., None], k[..., None, :, :, :] * (beta[..., None] * gamma))
    rhs = at.stage("delta.rhs", rhs, "Hk Gv N C dv+dk")
    return forward_substitution(at, "delta.solve", L, rhs, "Hk Gv N")


def across_chunks(at: Tape, u, w, q_decayed, A, k_decayed, fade, S, T: int):
    """The chunks in order, each needing the state the one before it left: its read of the state, its corrected
    values, its output (its queries against the state and its attention within), its write to the state. Written as
    one record per op of the whole prompt (Tape.record_gathered), each with the recurrent form's cost beside it.
    Returns (each chunk's output, the state after the last)."""
    pieces = at.in_pieces()
    outputs = []
    for n in range(u.shape[-3]):
        read = pieces.matmul("delta.read", w[..., n, :, :], S, "Hk Gv C dk, Hk Gv dk dv -> Hk Gv C dv")
        corrected = pieces.stage("delta.corrected", u[..., n, :, :] - read, "Hk Gv C dv")
        query = pieces.matmul("delta.query", q_decayed[..., n, :, :], S, "Hk Gv C dk, Hk Gv dk dv -> Hk Gv C dv")
        mix = pieces.matmul("delta.mix", A[..., n, :, :], corrected, "Hk Gv C C, Hk Gv C dv -> Hk Gv C dv")
        outputs.append(pieces.stage("delta.chunk_out", query + mix, "Hk Gv C dv"))
        k_t = k_decayed[..., n, :, :].swapaxes(-1, -2)
        write = pieces.matmul("delta.write", k_t, corrected, "Hk Gv dk C, Hk Gv C dv -> Hk Gv dk dv")
        S = pieces.stage("delta.update", S * fade[..., n, :, :] + write, "Hk Gv dk dv")
    Hv, dk, dv = int(np.prod(u.shape[-5:-3])), w.shape[-1], u.shape[-1]
    batch = int(np.prod(u.shape[:-5]))  # the recurrent form's counts are a sequence's, times the batch
    recurrent_form = {op: tuple(batch * n for n in form(T, Hv, dk, dv)) for op, form in RECURRENT.items()}
    at.record_gathered(pieces, ACROSS_CHUNKS, along="N", recurrent=recurrent_form | {"delta.mix": NO_RECURRENT})
    return outputs, S


def forward_substitution(at: Tape, op: str, L, B, heads: str):
    """X = (I + L)^-1 B for a strictly lower-triangular L [..., C, C] and B [..., C, n]: row i is B_i - L[i, :i] X[:i],
    each a product of i numbers with the rows before it (n C (C - 1) / 2 MACs of the C^2 n a full product would
    take), counted row by row and written as one record of the whole product (Tape.record_gathered), showing X.
    `heads` names the axes before the last two ("Hk Gv N")."""
    C = L.shape[-1]
    X = ShapeOnly(B.shape, B.dtype) if isinstance(B, ShapeOnly) else B.copy()
    pieces = at.in_pieces()
    for i in range(1, C):
        row = pieces.with_sizes(i=i)
        correction = row.matmul(
            op, L[..., i : i + 1, :i], X[..., :i, :], f"{heads} 1 i, {heads} i dv+dk -> {heads} 1 dv+dk"
        )
        if not isinstance(X, ShapeOnly):  # the row's difference in the format, as a stage's (the product's was)
            X[..., i : i + 1, :] = at.in_format(X[..., i : i + 1, :] - correction, op)
    whole = {op: f"{heads} C C, {heads} C dv+dk -> {heads} C dv+dk"}
    at.record_gathered(pieces, whole, values={op: X}, recurrent={op: NO_RECURRENT})
    return X


def chunking(T: int) -> tuple[int, int]:
    """(C, N): a prompt of T positions in N chunks of C = min(64, T) positions."""
    C = min(CHUNK, T)
    return C, -(-T // C)


def scan_products(c: Any, T: int, B: int = 1, per_channel: bool = False) -> dict[str, tuple[int, int]]:
    """(dot products, MACs) of each product of one Gated DeltaNet layer's delta rule over T positions (a config with
    its shapes): the recurrent form's three where T = 1, the chunks' seven where T > 1 (the solve's rows are of
    lengths 1 .. C - 1), in the order they run. `per_channel` (a decay a key channel): the chunks' K K^T and Q K^T
    once a value head, each with its own decays, instead of once a key head."""
    Hk, Hv, dk, dv = c.linear_key_heads, c.linear_value_heads, c.linear_key_dim, c.linear_value_dim
    Hs = Hv if per_channel else Hk  # the heads whose scores within a chunk are computed apart
    if T == 1:
        one = {op: form(1, Hv, dk, dv) for op, form in RECURRENT.items()}  # read, write, query
        return {op: (B * dots, B * macs) for op, (dots, macs) in one.items()}
    C, N = chunking(T)
    n = dk + dv  # the solve's right-hand side: the values and the keys, beta-weighted
    return {
        "delta.kk": (B * Hs * N * C * C, B * Hs * N * C * C * dk),
        "delta.solve": (B * Hv * N * (C - 1) * n, B * Hv * N * n * C * (C - 1) // 2),
        "delta.qk": (B * Hs * N * C * C, B * Hs * N * C * C * dk),
        "delta.read": (B * Hv * N * C * dv, B * Hv * N * C * dv * dk),
        "delta.query": (B * Hv * N * C * dv, B * Hv * N * C * dv * dk),
        "delta.mix": (B * Hv * N * C * dv, B * Hv * N * C * dv * C),
        "delta.write": (B * Hv * N * dk * dv, B * Hv * N * dk * dv * C),
    }


def recurrent_macs(c: Any, T: int) -> int:
    """The delta rule of T positions in the recurrent form: 3 dk dv a position and value head."""
    return 3 * T * c.linear_value_heads * c.linear_key_dim * c.linear_value_dim


def _zeros(like, shape):
    return ShapeOnly(shape, like.dtype) if isinstance(like, ShapeOnly) else np.zeros(shape, like.dtype)


def _exp(x):
    return ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.exp(x)


def _cumsum(x, axis: int = -1):
    return ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.cumsum(x, axis=axis)


def _chunks(x, N: int, C: int):
    """[..., T, n] -> [..., N, C, n]: the positions in chunks of C, the last padded with zeros."""
    *lead, T, width = x.shape
    if isinstance(x, ShapeOnly):
        return ShapeOnly((*lead, N, C, width), x.dtype)
    padded = np.zeros((*lead, N * C, width), x.dtype)
    padded[..., :T, :] = x
    return padded.reshape(*lead, N, C, width)


def _unchunk(outputs: list, T: int, like):
    """The chunks' outputs [..., C, dv] back in one row of positions, [..., T, dv] (the padding dropped)."""
    first = outputs[0]
    if isinstance(first, ShapeOnly):
        return ShapeOnly((*first.shape[:-2], T, first.shape[-1]), like.dtype)
    return np.concatenate(outputs, axis=-2)[..., :T, :]


def _pairwise_decays(cum, per_channel: bool = False):
    """gamma_i / gamma_j = exp(cum_i - cum_j) for j <= i (the decay between positions j and i of a chunk), 0 above
    the diagonal: [..., C] -> [..., C, C] (`per_channel`: [..., C, dk] -> [..., C, C, dk], each channel's). The
    exponent is masked to -inf before exp, so that the upper triangle cannot overflow."""
    if per_channel:
        C = cum.shape[-2]
        if isinstance(cum, ShapeOnly):
            return ShapeOnly((*cum.shape[:-1], C, cum.shape[-1]), cum.dtype)
        exponent = cum[..., :, None, :] - cum[..., None, :, :]
        above = ~np.tri(C, dtype=bool)[:, :, None]
    else:
        C = cum.shape[-1]
        if isinstance(cum, ShapeOnly):
            return ShapeOnly((*cum.shape, C), cum.dtype)
        exponent = cum[..., :, None] - cum[..., None, :]
        above = ~np.tri(C, dtype=bool)
    # in place: [C, C] a head (per channel [C, C, dk], the largest array of a KDA layer) once, not three times
    np.copyto(exponent, constant(cum, -np.inf), where=above)
    return np.exp(exponent, out=exponent)


def _strictly_lower(x):
    """x with its diagonal and upper triangle zeroed: [..., C, C]."""
    if isinstance(x, ShapeOnly):
        return x
    return np.where(np.tri(x.shape[-1], k=-1, dtype=bool), x, constant(x, 0.0))


def _join(a, b):
    """[..., n] and [..., m] side by side: [..., n + m]."""
    if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
        return ShapeOnly((*a.shape[:-1], a.shape[-1] + b.shape[-1]), a.dtype)
    return np.concatenate([a, b], axis=-1)
