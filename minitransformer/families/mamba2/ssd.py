"""The Mamba-2 scan: a state h [P, N] per head, decayed and written to at every position, read by C.

For one head, with a_t = dt_t A (A < 0, so exp(a_t) < 1 decays) and x̄_t = dt_t x_t:

    h_t = exp(a_t) h_{t-1} + x̄_t ⊗ B_t        (P x N: an outer product, dot products of length 1)
    y_t = h_t C_t                              (P dot products of length N)

B and C are shared by the Hg heads of a group (Ng groups). That is the recurrent form (`recurrent_step`): 2 P N
MACs a head and token, what a decode step computes. A prompt is computed in chunks of L positions (`chunked_scan`,
the state-space duality of the Mamba-2 paper, as transformers' torch_forward computes it): within a chunk the scan
is an attention whose scores are C B^T (per group) weighed by each head's decay between the two positions,

    Y = (C B^T ∘ Λ) x̄,   Λ[l, s] = exp(a_{s+1} + ... + a_l) for s <= l, 0 above the diagonal,

every chunk's own contribution to the state is h_c = (Λ[L-1, :] ∘ x̄)^T B, the state is carried from chunk to chunk
(h = exp(a_0 + ... + a_{L-1}) h + h_c, elementwise), and each chunk reads the state before it: Y += exp(a_0 + ...
+ a_l) C h^T. Its products are matrix products (BLAS at work), and it costs more MACs than the recurrent form: L
times (Ng N + Hs P) a position for the chunk's attention against 2 Hs P N. formulas.py holds both.

The chunks of a pass are its full chunks of L (one batched product each) and the rest, a last shorter chunk (where
transformers pads it with zeros to L, this computes it at its own length). A pass from position 0 starts from a zero
state, so its first chunk reads none: that product is not computed.
"""

from __future__ import annotations

import numpy as np

from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape


def chunked_scan(x_dt, a, B, C, h, L: int, at: Tape, fresh: bool):
    """(y [.., Ng, Hg, T, P], the state after the last position [.., Ng, Hg, P, N]) of the chunked scan.

    x_dt [.., Ng, Hg, T, P] (x̄ = dt x), a [.., Ng, Hg, T] (dt A), B and C [.., Ng, T, N], h the state before the pass
    [.., Ng, Hg, P, N] (zeros where `fresh`: none of its products are computed then)."""
    T = x_dt.shape[-2]
    full = T // L * L
    spans = [(0, full, L), (full, T, T - full)] if full not in (0, T) else [(0, T, L if full else T)]
    parts = []
    for start, end, length in spans:
        part = at.with_sizes(Nc=(end - start) // length, L=length)
        y, h = _chunks(x_dt[..., start:end, :], a[..., start:end], B[..., start:end, :], C[..., start:end, :], h,
                       part, fresh and start == 0)  # fmt: skip
        parts.append(y)
    return (parts[0] if len(parts) == 1 else _join(parts, axis=-2)), h


def _chunks(x_dt, a, B, C, h, at: Tape, fresh: bool):
    """The scan over Nc chunks of L positions each (at.dims: Nc and L), from the state h before the first."""
    d = at.dims
    Nc, L = d.size("Nc"), d.size("L")
    lead = x_dt.shape[:-2]  # [.., Ng, Hg]
    x_c = x_dt.reshape(*lead, Nc, L, x_dt.shape[-1])
    a_c = a.reshape(*lead, Nc, L)
    B_c = B.reshape(*B.shape[:-2], Nc, L, B.shape[-1])
    C_c = C.reshape(*C.shape[:-2], Nc, L, C.shape[-1])
    decay = at.stage("ssd.decay", segment_decay(a_c), "Ng Hg Nc L L")
    s = at.matmul("ssd.scores", C_c, B_c.swapaxes(-1, -2), "Ng Nc L N, Ng Nc N L -> Ng Nc L L")
    w = at.stage("ssd.weights", s[..., None, :, :, :] * decay, "Ng Hg Nc L L")
    y = at.matmul("ssd.mix", w, x_c, "Ng Hg Nc L L, Ng Hg Nc L P -> Ng Hg Nc L P")
    to_end = decay[..., -1, :]  # [.., Ng, Hg, Nc, L]: from each position to the chunk's end
    weighted = (x_c * to_end[..., None]).swapaxes(-1, -2)  # [.., Ng, Hg, Nc, P, L]
    h_c = at.matmul("ssd.chunk_state", weighted, B_c[..., None, :, :, :],
                    "Ng Hg Nc P L, Ng 1 Nc L N -> Ng Hg Nc P N")  # fmt: skip
    before, h = at.stage("ssd.carry", carry(h_c, chunk_decay(a_c), h), "Ng Hg Nc P N; Ng Hg P N")
    skip = 1 if fresh else 0  # a first chunk after a zero state reads nothing from it
    if Nc > skip:
        read = at.with_sizes(Nc=Nc - skip)
        y_s = read.matmul("ssd.from_state", C_c[..., None, skip:, :, :], before[..., skip:, :, :].swapaxes(-1, -2),
                          "Ng 1 Nc L N, Ng Hg Nc N P -> Ng Hg Nc L P")  # fmt: skip
        y = at.stage("ssd.decay_in", add_decayed(y, y_s, a_c, skip), "Ng Hg Nc L P")
    return y.reshape(*lead, Nc * L, x_dt.shape[-1]), h


def recurrent_step(x_dt, a, B, C, h, at: Tape):
    """(y [.., Ng, Hg, 1, P], the state after it [.., Ng, Hg, P, N]): one position, the recurrent form, from the state
    h before it (left as it was: the caller keeps the new one)."""
    update = at.matmul("ssm.input", x_dt.swapaxes(-1, -2), B[..., None, :, :], "Ng Hg P T, Ng 1 T N -> Ng Hg P N")
    h = at.stage("ssm.state", decay_and_add(h, a, update), "Ng Hg P N")
    y = at.matmul("ssm.output", C[..., None, :, :], h.swapaxes(-1, -2), "Ng 1 T N, Ng Hg N P -> Ng Hg T P")
    return y, h


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


def add_decayed(y, y_s, a, skip: int):
    """y + exp(a_0 + ... + a_l) y_s on the chunks from `skip` on (y_s: theirs only)."""
    if isinstance(y, ShapeOnly):
        return ShapeOnly(y.shape, y.dtype)
    y = y.copy()
    y[..., skip:, :, :] += np.exp(np.cumsum(a[..., skip:, :], axis=-1))[..., None] * y_s
    return y


def decay_and_add(h, a, update):
    """exp(a) h + update: a [.., Ng, Hg, 1], one position's."""
    if isinstance(h, ShapeOnly) or isinstance(update, ShapeOnly):
        return ShapeOnly(update.shape, update.dtype)
    new = np.exp(a)[..., None] * h
    new += update
    return new


def _join(parts, axis: int):
    if isinstance(parts[0], ShapeOnly):
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        return ShapeOnly(shape, parts[0].dtype)
    return np.concatenate(parts, axis=axis)
