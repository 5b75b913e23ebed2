"""The Mamba-2 scan: a state h [P, N] per head, decayed and written to at every position, read by C.

For one head, with a_t = dt_t A (A < 0, so exp(a_t) < 1 decays) and x_dt_t = dt_t x_t:

    h_t = exp(a_t) h_{t-1} + x_dt_t ⊗ B_t        (P x N: an outer product, dot products of length 1)
    y_t = h_t C_t                              (P dot products of length N)

B and C are shared by the Hg heads of a group (Ng groups). That is the recurrent form (`recurrent_step`): 2 P N
MACs a head and token, what a decode step computes. A prompt is computed in Nc chunks of L positions
(`chunked_scan`, the state-space duality of the Mamba-2 paper, as transformers' torch_forward computes it, the last
chunk padded with zeros as it pads it): within a chunk the scan is an attention whose scores are C B^T (per group)
weighed by each head's decay between the two positions,

    Y = (C B^T ∘ Λ) x_dt,   Λ[l, s] = exp(a_{s+1} + ... + a_l) for s <= l, 0 above the diagonal,

every chunk's own contribution to the state is h_c = (Λ[L-1, :] ∘ x_dt)^T B, the state is carried from chunk to chunk
(h = exp(a_0 + ... + a_{L-1}) h + h_c, elementwise), and each chunk reads the state before it: Y += exp(a_0 + ...
+ a_l) C h^T. Its products are matrix products over whole chunks, and it costs more MACs than the recurrent form:
L (Ng N + Hs P) a position for the chunks' attention, beside the recurrent form's own two products, done a chunk at
a time. Each chunk record carries the recurrent form's cost of the same positions (Record.recurrent): x_dt ⊗ B for the
chunks' states, h C for their reads of it, nothing for the scores and the mix. formulas.py holds both forms.
"""

from __future__ import annotations

import numpy as np

from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape


def chunked_scan(x_dt, a, B, C, h, L: int, at: Tape):
    """(y [.., Ng, Hg, T, P], the state after the last position [.., Ng, Hg, P, N]): T positions in Nc chunks of
    min(L, T), from the state h before them [.., Ng, Hg, P, N].

    x_dt [.., Ng, Hg, T, P] (x_dt = dt x), a [.., Ng, Hg, T] (dt A), B and C [.., Ng, T, N]. The padding of the last
    chunk has x_dt, B and C zero and no decay (a = 0): it adds nothing to the state, and its outputs are dropped."""
    T, P, N = x_dt.shape[-2], x_dt.shape[-1], B.shape[-1]
    L = min(L, T)
    Nc = -(-T // L)
    at = at.with_sizes(Nc=Nc, L=L)
    x_c, a_c, B_c, C_c = at.stage(
        "ssd.chunks",
        (chunks(x_dt, Nc, L), chunks(a[..., None], Nc, L)[..., 0], chunks(B, Nc, L), chunks(C, Nc, L)),
        "Ng Hg Nc L P; Ng Hg Nc L; Ng Nc L N; Ng Nc L N",
    )
    batch = int(np.prod(x_dt.shape[:-4]))
    Hs = x_dt.shape[-4] * x_dt.shape[-3]
    inputs, reads = (batch * T * Hs * P * N,) * 2, (batch * T * Hs * P, batch * T * Hs * P * N)  # the recurrent form's
    none = (0, 0)  # the recurrent form has no such product
    decay = at.stage("ssd.decay", segment_decay(a_c), "Ng Hg Nc L L")
    s = at.matmul("ssd.scores", C_c, B_c.swapaxes(-1, -2), "Ng Nc L N, Ng Nc N L -> Ng Nc L L", recurrent=none)
    w = at.stage("ssd.weights", s[..., None, :, :, :] * decay, "Ng Hg Nc L L")
    y = at.matmul("ssd.mix", w, x_c, "Ng Hg Nc L L, Ng Hg Nc L P -> Ng Hg Nc L P", recurrent=none)
    to_end = decay[..., -1, :]  # [.., Ng, Hg, Nc, L]: the decay from each position to its chunk's end
    h_c = at.matmul(
        "ssd.chunk_state",
        (x_c * to_end[..., None]).swapaxes(-1, -2),
        B_c[..., None, :, :, :],
        "Ng Hg Nc P L, Ng 1 Nc L N -> Ng Hg Nc P N",
        recurrent=inputs,
    )
    before, h = at.stage("ssd.carry", carry(h_c, chunk_decay(a_c), h), "Ng Hg Nc P N; Ng Hg P N")
    y_s = at.matmul(
        "ssd.from_state",
        C_c[..., None, :, :, :],
        before.swapaxes(-1, -2),
        "Ng 1 Nc L N, Ng Hg Nc N P -> Ng Hg Nc L P",
        recurrent=reads,
    )
    y = at.stage("ssd.decay_in", add_decayed(y, y_s, a_c), "Ng Hg Nc L P")
    return unchunk(y, T), h


def recurrent_step(x_dt, a, B, C, h, at: Tape):
    """(y [.., Ng, Hg, 1, P], the state after it [.., Ng, Hg, P, N]): one position, the recurrent form, from the state
    h before it (left as it was: the caller keeps the new one)."""
    update = at.matmul("ssm.input", x_dt.swapaxes(-1, -2), B[..., None, :, :], "Ng Hg P T, Ng 1 T N -> Ng Hg P N")
    h = at.stage("ssm.state", decay_and_add(h, a, update), "Ng Hg P N")
    y = at.matmul("ssm.output", C[..., None, :, :], h.swapaxes(-1, -2), "Ng 1 T N, Ng Hg N P -> Ng Hg T P")
    return y, h


def chunks(x, Nc: int, L: int):
    """[.., T, n] -> [.., Nc, L, n]: the positions in chunks of L, the last padded with zeros."""
    *lead, T, width = x.shape
    if isinstance(x, ShapeOnly):
        return ShapeOnly((*lead, Nc, L, width), x.dtype)
    if T == Nc * L:
        return x.reshape(*lead, Nc, L, width)
    padded = np.zeros((*lead, Nc * L, width), x.dtype)
    padded[..., :T, :] = x
    return padded.reshape(*lead, Nc, L, width)


def unchunk(y, T: int):
    """[.., Nc, L, P] -> [.., T, P]: the chunks' positions in one row again, the padding dropped."""
    *lead, Nc, L, P = y.shape
    if isinstance(y, ShapeOnly):
        return ShapeOnly((*lead, T, P), y.dtype)
    return y.reshape(*lead, Nc * L, P)[..., :T, :]


def segment_decay(a):
    """Λ [.., L, L]: exp(a_{s+1} + ... + a_l) at [l, s] for s <= l (1 on the diagonal), 0 above it. Summed for each
    (l, s) over its own segment, as transformers' segment_sum does, not as a difference of running sums (which
    would lose the small sums of nearby positions to the large ones of the chunk)."""
    L = a.shape[-1]
    if isinstance(a, ShapeOnly):
        return ShapeOnly((*a.shape, L), a.dtype)
    below = np.tri(L, L, -1, dtype=bool)  # [l, s]: l > s
    terms = np.where(below, a[..., :, None], a.dtype.type(0))  # a_l at [l, s] where l > s
    sums = np.cumsum(terms, axis=-2)  # sum over l' <= l of a_l' where l' > s
    sums = np.where(np.tri(L, L, 0, dtype=bool), sums, a.dtype.type(-np.inf))
    return np.exp(sums)


def chunk_decay(a):
    """exp(a_0 + ... + a_{L-1}) for each chunk [.., Nc]: how much of the state before it is left after it."""
    return ShapeOnly(a.shape[:-1], a.dtype) if isinstance(a, ShapeOnly) else np.exp(a.sum(axis=-1))


def carry(h_c, chunk_decay, h):
    """(the state before each chunk [.., Nc, P, N], the state after the last [.., P, N]): h = exp(a over the chunk) h
    + h_c, chunk after chunk, from h (elementwise: no dot products)."""
    if isinstance(h_c, ShapeOnly):
        return ShapeOnly(h_c.shape, h_c.dtype), ShapeOnly(h.shape, h_c.dtype)
    before = np.empty_like(h_c)
    h = h.astype(h_c.dtype, copy=False)
    for c in range(h_c.shape[-3]):
        before[..., c, :, :] = h
        h = chunk_decay[..., c, None, None] * h + h_c[..., c, :, :]
    return before, h


def add_decayed(y, y_s, a):
    """y + exp(a_0 + ... + a_l) y_s: each position's read of the state before its chunk, decayed to it."""
    if isinstance(y, ShapeOnly):
        return ShapeOnly(y.shape, y.dtype)
    return y + np.exp(np.cumsum(a, axis=-1))[..., None] * y_s


def decay_and_add(h, a, update):
    """exp(a) h + update: a [.., Ng, Hg, 1], one position's."""
    if isinstance(h, ShapeOnly) or isinstance(update, ShapeOnly):
        return ShapeOnly(update.shape, update.dtype)
    new = np.exp(a)[..., None] * h
    new += update
    return new
