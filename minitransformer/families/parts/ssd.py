"""The Mamba-2 scan (the state-space duality, SSD): a state h [P, N] per head, decayed and written to at every
position, read by C. Its stages, its two forms and their closed forms; the mixer around it is parts/mamba2.py's.

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
chunks' states, h C for their reads of it, nothing for the scores and the mix.

In closed form (`scan_products`), Hs heads of P, N, Ng groups: recurrent (a decode step), x_dt ⊗ B, Hs P N dot
products of length 1, and h C, Hs P of length N: 2 Hs P N MACs; in chunks (a pass of T positions, as Nc = ceil(T /
L') chunks of L' = min(L, T), the last padded with zeros): a chunk's scores C B^T, Ng L'² of length N; its mix, Hs
L' P of length L'; its own state, Hs P N of length L'; its read of the state before it, Hs L' P of length N: in all
(Ng N + Hs P) Nc L'² + 2 Hs P N Nc L'.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engine.shapes import ShapeOnly
from ...engine.stages import READS_STATE, STATE, WRITES_STATE, Stage, by_op
from ...engine.tape import Tape


def recurrent_form(written: tuple[str, str], kept: tuple[str, str], read: tuple[str, str]) -> tuple[Stage, ...]:
    """The stages of a scan's recurrent form (Mamba-1's at every position, SSD's in a decode step), each given as its
    equation and what it reads: x_dt ⊗ B, the product whose output is written to the state; the state decayed and
    added to; C h^T, the product that reads the state."""
    return (
        Stage("ssm.input", ("mixer.input",), "matmul", *written, STATE, state=WRITES_STATE),
        Stage("ssm.state", ("mixer.state",), "scale", *kept),
        Stage("ssm.output", ("mixer.output",), "matmul", *read, STATE, state=READS_STATE),
    )


# The scan's stages: in chunks (a pass of several positions: Nc chunks of L, the last padded with zeros), and the
# recurrent form (a decode step: one position after a cached state).
SCAN = by_op(
    Stage("ssd.chunks", ("mixer.ssd.x_dt", "mixer.ssd.dA", "mixer.ssd.B", "mixer.ssd.C"), "reshape",
          "x_dt, a, B, C in Nc chunks of L = min(chunk_size, T) positions, the last padded with zeros",
          "x_dt [Hs, T, P], a [Hs, T], B, C [Ng, T, N]"),
    Stage("ssd.decay", ("mixer.ssd.decay",), "mask",
          "Λ[l, s] = exp(a_s+1 + ... + a_l) for s <= l, 0 above: each head's decay from s to l within a chunk",
          "a [Hs, T]"),
    Stage("ssd.scores", ("mixer.ssd.scores",), "matmul",
          "S = C B^T within each chunk  (per group: its heads share B and C)", "C, B [Ng, T, N], in chunks", STATE),
    Stage("ssd.weights", ("mixer.ssd.weights",), "scale", "W = S ∘ Λ  (each head its group's S and its own decay)",
          "S, Λ of each chunk"),
    Stage("ssd.mix", ("mixer.ssd.mix",), "matmul", "Y = W x_dt  (within each chunk, as attention mixes values)",
          "W of each chunk, x_dt [Hs, T, P]", STATE),
    Stage("ssd.chunk_state", ("mixer.ssd.chunk_state",), "matmul",
          "h_c = (Λ[L-1, :] ∘ x_dt)^T B: what each chunk adds to the state, decayed to its end",
          "x_dt [Hs, T, P], B [Ng, T, N], in chunks", STATE, state=WRITES_STATE),
    Stage("ssd.carry", ("mixer.ssd.states", "mixer.ssd.last_state"), "scale",
          "h = exp(a_0 + ... + a_L-1) h + h_c, chunk after chunk: the state before each chunk, and after the last",
          "each chunk's h_c [Hs, P, N]"),
    Stage("ssd.from_state", ("mixer.ssd.from_state",), "matmul", "Y_s = C h^T: each chunk reads the state before it",
          "C [Ng, T, N], each chunk's h^T [Hs, N, P]", STATE, state=READS_STATE),
    Stage("ssd.decay_in", ("mixer.ssd.y",), "scale", "Y = Y + exp(a_0 + ... + a_l) Y_s", "Y, Y_s of each chunk"),
    *recurrent_form(("x_dt ⊗ B  (an outer product: P N dot products of length 1 a head)", "x_dt^T [Hs, P, 1], B [Ng, 1, N]"),
                    ("h = exp(a) h + x_dt ⊗ B  (the state, kept in the cache)", "h [Hs, P, N]"),
                    ("y = C h^T  (P dot products of length N a head)", "C [Ng, 1, N], h^T [Hs, N, P]")),
)  # fmt: skip


def chunked_scan(x_dt, a, B, C, h, L: int, at: Tape):
    """(y [.., Ng, Hg, T, P], the state after the last position [.., Ng, Hg, P, N]): T positions in Nc chunks of
    min(L, T), from the state h before them [.., Ng, Hg, P, N].

    x_dt [.., Ng, Hg, T, P] (x_dt = dt x), a [.., Ng, Hg, T] (dt A), B and C [.., Ng, T, N]. The padding of the last
    chunk has x_dt, B and C zero and no decay (a = 0): it adds nothing to the state, and its outputs are dropped."""
    T, P, N = x_dt.shape[-2], x_dt.shape[-1], B.shape[-1]
    L = min(L, T)
    Nc = -(-T // L)
    at = at.declaring(SCAN).with_sizes(Nc=Nc, L=L)
    in_chunks = (chunks(x_dt, Nc, L), chunks(a[..., None], Nc, L)[..., 0], chunks(B, Nc, L), chunks(C, Nc, L))
    x_c, a_c, B_c, C_c = at.stage("ssd.chunks", in_chunks, "Ng Hg Nc L P; Ng Hg Nc L; Ng Nc L N; Ng Nc L N")
    batch = int(np.prod(x_dt.shape[:-4]))
    Hs = x_dt.shape[-4] * x_dt.shape[-3]
    inputs, reads = (batch * T * Hs * P * N,) * 2, (batch * T * Hs * P, batch * T * Hs * P * N)  # the recurrent form's
    none = (0, 0)  # the recurrent form has no such product
    decay = at.stage("ssd.decay", segment_decay(a_c), "Ng Hg Nc L L")
    s = at.matmul("ssd.scores", C_c, B_c.swapaxes(-1, -2), "Ng Nc L N, Ng Nc N L -> Ng Nc L L", recurrent=none)
    w = at.stage("ssd.weights", s[..., None, :, :, :] * decay, "Ng Hg Nc L L")
    # [.., Ng, Hg, Nc, L]: the decay from each position to its chunk's end, a copy, so that the chunks' [L, L]
    # decays, scores and weights die once the mix has read them (verbs/memory.py holds a scan to one stage's)
    to_end = decay[..., -1, :].copy()
    del decay, s
    y = at.matmul("ssd.mix", w, x_c, "Ng Hg Nc L L, Ng Hg Nc L P -> Ng Hg Nc L P", recurrent=none)
    del w
    x_end, B_g = (x_c * to_end[..., None]).swapaxes(-1, -2), B_c[..., None, :, :, :]
    h_c = at.matmul("ssd.chunk_state", x_end, B_g, "Ng Hg Nc P L, Ng 1 Nc L N -> Ng Hg Nc P N", recurrent=inputs)
    del x_end
    before, h = at.stage("ssd.carry", carry(h_c, chunk_decay(a_c), h), "Ng Hg Nc P N; Ng Hg P N")
    del h_c
    C_g, h_t = C_c[..., None, :, :, :], before.swapaxes(-1, -2)
    y_s = at.matmul("ssd.from_state", C_g, h_t, "Ng 1 Nc L N, Ng Hg Nc N P -> Ng Hg Nc L P", recurrent=reads)
    del before, h_t
    y = at.stage("ssd.decay_in", add_decayed(y, y_s, a_c), "Ng Hg Nc L P")
    return unchunk(y, T), h


def recurrent_step(x_dt, a, B, C, h, at: Tape):
    """(y [.., Ng, Hg, 1, P], the state after it [.., Ng, Hg, P, N]): one position, the recurrent form, from the state
    h before it (left as it was: the caller keeps the new one)."""
    at = at.declaring(SCAN)
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
    sums = np.where(below, a[..., :, None], a.dtype.type(0))  # a_l at [l, s] where l > s
    # in place, one [.., L, L] array in all: three more of them were alive at once
    np.cumsum(sums, axis=-2, out=sums)  # sum over l' <= l of a_l' where l' > s
    np.copyto(sums, a.dtype.type(-np.inf), where=~np.tri(L, L, 0, dtype=bool))
    return np.exp(sums, out=sums)


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


def chunking(T: int, L: int) -> tuple[int, int]:
    """(Nc chunks, of L' positions) of a pass of T positions in chunks of L: L' = min(L, T), the last one padded."""
    length = min(L, T)
    return -(-T // length), length


def recurrent(T: int, t: int) -> bool:
    """A pass computed in the recurrent form: one position after cached ones (a decode step), as transformers."""
    return T == 1 and t > 1


def scan_products(c: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, MACs) of each of the scan's products in a pass of T positions at context t (a config with a
    Mamba-2 mixer's shapes), in the order they run: the recurrent form's two in a decode step, the chunks' four."""
    Hs, P, N, Ng = c.ssm_heads, c.ssm_head_dim, c.state_size, c.n_groups
    if recurrent(T, t):
        return {"ssm.input": (B * Hs * P * N, B * Hs * P * N), "ssm.output": (B * Hs * P, B * Hs * P * N)}
    n, L = chunking(T, c.chunk_size)
    return {
        "ssd.scores": (B * n * Ng * L * L, B * n * Ng * L * L * N),  # C B^T, per group
        "ssd.mix": (B * n * Hs * L * P, B * n * Hs * L * P * L),  # W x_dt
        "ssd.chunk_state": (B * n * Hs * P * N, B * n * Hs * P * N * L),  # (Λ ∘ x_dt)^T B
        "ssd.from_state": (B * n * Hs * L * P, B * n * Hs * L * P * N),  # C h^T
    }


def recurrent_macs(c: Any, T: int) -> int:
    """The scan of T positions in the recurrent form, one at a time: 2 Hs P N T (x_dt ⊗ B and h C)."""
    return 2 * c.ssm_heads * c.ssm_head_dim * c.state_size * T
