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
"""

from __future__ import annotations

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


def delta_rule(at: Tape, q, k, v, g, beta, state=None):
    """q, k [..., Hk, T, dk], v [..., Hk, Gv, T, dv], g and beta [..., Hk, Gv, T] -> o [..., Hk, Gv, T, dv]: the
    recurrent form for one position, chunks for more. `state` [..., Hk, Gv, dk, dv] is read and overwritten in place
    (None: a fresh sequence whose state is not kept)."""
    at = at.declaring(DELTA_RULE)
    S = state if state is not None else _zeros(v, (*v.shape[:-2], k.shape[-1], v.shape[-1]))
    if q.shape[-2] == 1:
        o, S = recurrent(at, q, k, v, g, beta, S)
    else:
        o, S = chunked(at, q, k, v, g, beta, S)
    if state is not None and not isinstance(state, ShapeOnly):
        state[...] = S
    return o


def recurrent(at: Tape, q, k, v, g, beta, S):
    """One position (T = 1), as a decode step computes it: the state decayed, read with k, corrected at k, read
    with q. Returns (o [..., Hk, Gv, T, dv], the new state)."""
    S = at.stage("delta.decay", S * _exp(g)[..., None], "Hk Gv dk dv")  # e^g S (T = 1: one g a head)
    k1, q1 = k[..., None, :, :], q[..., None, :, :]  # the key head's k and q, for each of its Gv value heads
    read = at.matmul("delta.read", k1, S, "Hk 1 T dk, Hk Gv dk dv -> Hk Gv T dv")
    delta = at.stage("delta.delta", (v - read) * beta[..., None], "Hk Gv T dv")
    write = at.matmul("delta.write", k1.swapaxes(-1, -2), delta, "Hk 1 dk T, Hk Gv T dv -> Hk Gv dk dv")
    S = at.stage("delta.update", S + write, "Hk Gv dk dv")
    return at.matmul("delta.query", q1, S, "Hk 1 T dk, Hk Gv dk dv -> Hk Gv T dv"), S


def chunked(at: Tape, q, k, v, g, beta, S):
    """T > 1 positions in chunks of C = min(64, T), the last padded with zeros (zero keys, values and write strength,
    no decay: the state passes it unchanged). Returns (o [..., Hk, Gv, T, dv], the state after the last position)."""
    T, dv = q.shape[-2], v.shape[-1]
    C, N = chunking(T)
    at = at.with_sizes(C=C, N=N)
    pieces = (_chunks(q, N, C), _chunks(k, N, C), _chunks(v, N, C), _chunks(g[..., None], N, C)[..., 0],
              _chunks(beta[..., None], N, C)[..., 0])  # fmt: skip
    q, k, v, g, beta = at.stage("delta.chunks", pieces, "Hk N C dk; Hk N C dk; Hk Gv N C dv; Hk Gv N C; Hk Gv N C")
    cum = at.stage("delta.cumdecay", _cumsum(g), "Hk Gv N C")  # log gamma_i: the decay from the chunk's start to i
    decays = at.stage("delta.decays", _pairwise_decays(cum), "Hk Gv N C C")  # gamma_i / gamma_j, j <= i; else 0
    X = solved(at, k, v, beta, cum, decays)
    u, w = X[..., :dv], X[..., dv:]  # the values to write and the keys that read the state, beta-weighted
    qk = at.matmul("delta.qk", q, k.swapaxes(-1, -2), "Hk N C dk, Hk N dk C -> Hk N C C", recurrent=NO_RECURRENT)
    A = at.stage("delta.attn", qk[..., None, :, :, :] * decays, "Hk Gv N C C")  # within the chunk, causal, decayed
    q_decayed = at.stage("delta.q_decayed", q[..., None, :, :, :] * _exp(cum)[..., None], "Hk Gv N C dk")
    to_end = _exp(cum[..., -1:] - cum)[..., None]  # the decay from each position to its chunk's end
    k_decayed = at.stage("delta.k_decayed", k[..., None, :, :, :] * to_end, "Hk Gv N C dk")
    outputs, S = across_chunks(at, u, w, q_decayed, A, k_decayed, _exp(cum[..., -1])[..., None, None], S, T)
    return at.stage("delta.out", _unchunk(outputs, T, v), "Hk Gv T dv"), S


def solved(at: Tape, k, v, beta, cum, decays):
    """[U W] = (I + L)^-1 [beta v, beta gamma k] [..., Hk, Gv, N, C, dv+dk]: each chunk's deltas, from the keys' dot
    products within it (L[i, j] = beta_i k_i.k_j gamma_i / gamma_j, j < i), solved row by row."""
    kk = at.matmul("delta.kk", k, k.swapaxes(-1, -2), "Hk N C dk, Hk N dk C -> Hk N C C", recurrent=NO_RECURRENT)
    L = at.stage("delta.system", _strictly_lower(beta[..., None] * kk[..., None, :, :, :] * decays), "Hk Gv N C C")
    gamma = _exp(cum)[..., None]
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
        if not isinstance(X, ShapeOnly):
            X[..., i : i + 1, :] -= correction
    whole = {op: f"{heads} C C, {heads} C dv+dk -> {heads} C dv+dk"}
    at.record_gathered(pieces, whole, values={op: X}, recurrent={op: NO_RECURRENT})
    return X


def chunking(T: int) -> tuple[int, int]:
    """(C, N): a prompt of T positions in N chunks of C = min(64, T) positions."""
    C = min(CHUNK, T)
    return C, -(-T // C)


def scan_products(c: Any, T: int, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, MACs) of each product of one Gated DeltaNet layer's delta rule over T positions (a config with
    its shapes): the recurrent form's three where T = 1, the chunks' seven where T > 1 (the solve's rows are of
    lengths 1 .. C - 1), in the order they run."""
    Hk, Hv, dk, dv = c.linear_key_heads, c.linear_value_heads, c.linear_key_dim, c.linear_value_dim
    if T == 1:
        one = {op: form(1, Hv, dk, dv) for op, form in RECURRENT.items()}  # read, write, query
        return {op: (B * dots, B * macs) for op, (dots, macs) in one.items()}
    C, N = chunking(T)
    n = dk + dv  # the solve's right-hand side: the values and the keys, beta-weighted
    return {
        "delta.kk": (B * Hk * N * C * C, B * Hk * N * C * C * dk),
        "delta.solve": (B * Hv * N * (C - 1) * n, B * Hv * N * n * C * (C - 1) // 2),
        "delta.qk": (B * Hk * N * C * C, B * Hk * N * C * C * dk),
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


def _cumsum(x):
    return ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.cumsum(x, axis=-1)


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


def _pairwise_decays(cum):
    """gamma_i / gamma_j = exp(cum_i - cum_j) for j <= i (the decay between positions j and i of a chunk), 0 above
    the diagonal: [..., C] -> [..., C, C]. The exponent is masked to -inf before exp, so that the upper triangle
    cannot overflow."""
    C = cum.shape[-1]
    if isinstance(cum, ShapeOnly):
        return ShapeOnly((*cum.shape, C), cum.dtype)
    exponent = cum[..., :, None] - cum[..., None, :]
    exponent = np.where(np.tri(C, dtype=bool), exponent, constant(cum, -np.inf))
    return np.exp(exponent)


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
