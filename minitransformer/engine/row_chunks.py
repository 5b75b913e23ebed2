"""Attention in chunks of query rows: a speed setting beside the tape, which stays the one counting door.

A long prompt's attention runs in chunks of ROW_CHUNK query rows, each against only the keys it can see:
causally none after its last row, and with a sliding window none before the window of its first row. The
same lines of the family's forward pass run on each chunk, with the sizes of the chunk (T rows, t keys)
checked by a tape of its own, and every product still goes through Tape.matmul.

Fewer dot products than the dense T x t (about half at a long prompt), and a chunk's scores stay in the
cache. The ledger gets one record per op with the dense shapes, counting what the chunks computed
(Record.computed, with the chunk size in Record.row_chunk and the range of the chunks' dot-product lengths in
Record.lengths: A V's are as long as the keys each chunk sees); the dense form's cost is beside it
(dense_dot_products, dense_macs). A watched pass (captures, hooks, trace) runs the dense lines once, so
that every watcher sees the documented full [..., H, T, t] tensors; so does a pass asked to run dense
(Tape.dense: `--dense-attention`, which computes every score as transformers' eager attention does).

Chunked attention (Llama 4's attention_chunk_size C, Dims.chunk) runs the same way, its rows cut at the chunks too:
each chunk of query rows lies within one chunk of C positions and reads that chunk's keys alone, from its first
position to the chunk's last row, so that the ledger counts the keys each query really reads (a decode step: the
p mod C + 1 keys of its chunk up to itself); where the whole pass is one such piece, it runs whole.

Sparse attention (DeepSeek-V3.2's lightning indexer: `on_chosen_keys`) runs the same way: each chunk of query
rows gathers the s keys and values chosen for each of its queries and attends to those alone, [..., H, T, 1, s]
scores, and the ledger's record per op keeps the dense form's shapes with what the chunks computed beside them.
Watched or dense, the pass computes every T x t score and masks the keys not chosen, as transformers' eager
attention does; where every key a query can see is chosen (t <= s), it is the attention above.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .gathered import CHUNKS
from .kvcache import first_attended
from .ops import unchosen_mask
from .shapes import ShapeOnly

# Query rows per chunk of attention (Tape.in_row_chunks). Measured on GPT-2 and the Llama-shaped bench
# model: a chunk's scores ([H, 128, t] float32) stay in the cache between the products and the softmax,
# and 128 rows still make matrix products big enough for the BLAS; passes of up to 128 new positions
# (every decode step) run the dense lines unchanged.
ROW_CHUNK = 128


def computed_pairs(T: int, t: int, window: int | None = None, chunk: int | None = None) -> int:
    """(query, key) pairs per head whose scores a pass computes: the dense T x t' when T <= C (C = ROW_CHUNK);
    beyond, each chunk of C query rows [r0, r1) against the keys it can see, from its first row's window
    to its last row: (r1 - r0) (t - T + r1 - max(0, t - T + r0 - W + 1)), 0 for the max without a window.

    Without a window and after p = t - T earlier positions, with m = T // C full chunks:
    p T + C^2 m (m + 1) / 2 + (T - m C) T; at T = 1,024, C = 128, p = 0: 589,824 of the dense 1,048,576.
    """
    C = ROW_CHUNK if chunk is None else chunk
    past = t - T
    if T <= C:
        return T * (t if window is None else min(t, window + T - 1))
    if window is None:
        m = T // C
        return past * T + C * C * m * (m + 1) // 2 + (T - m * C) * T
    # chunk j of the m full ones sees past + (j + 1) C keys less the max(0, past + j C - W + 1) behind its first row's
    # window, summed in closed form (a loop over a million positions' chunks took seconds); then the rows left over
    m, left_over = divmod(T, C)
    behind = past - window + 1  # + j C: the keys behind chunk j's window
    first_cut = 0 if behind > 0 else -behind // C + 1  # the first chunk with keys behind its window
    cut = max(0, m - first_cut)  # the full chunks with some
    pairs = C * (m * past + C * m * (m + 1) // 2) - C * (cut * behind + C * cut * (first_cut + m - 1) // 2)
    return pairs + left_over * (past + T - max(0, behind + m * C))


def in_row_chunks(tape, attend, q, K, V, bias=None):
    """attend(q, K, V, bias, tape) -> z [..., T, dh], computed for chunks of ROW_CHUNK query rows of `tape`'s pass;
    `bias` ([..., T, t], or None) is sliced by each chunk's rows and keys."""
    d = tape.dims
    pieces = row_pieces(d.past, d.T, d.chunk)
    whole = len(pieces) == 1 and (d.chunk is None or first_read(d.past, d.window, d.chunk) == d.start)
    if whole or tape.watcher is not None or tape.dense:
        return attend(q, K, V, bias, tape)
    gathered = tape._gathering(CHUNKS, rows=ROW_CHUNK if d.chunk is None else min(ROW_CHUNK, d.chunk))
    parts = []
    for r0, r1 in pieces:
        start = first_read(d.past + r0, d.window, d.chunk)  # the earliest key the chunk's first query sees
        keys = slice(start - d.start, d.past + r1 - d.start)  # ... to its last query's own position
        chunk = tape.in_chunks(replace(d, T=r1 - r0, t=keys.stop - keys.start, start=start, _shapes={}), gathered)
        part_bias = None if bias is None else bias[..., r0:r1, keys]
        parts.append(attend(q[..., r0:r1, :], K[..., keys, :], V[..., keys, :], part_bias, chunk))
    return _joined(tape, gathered, parts)


def first_read(position: int, window: int | None, chunk: int | None) -> int:
    """The earliest key a query at `position` reads: where its window begins, or its chunk of `chunk` positions."""
    return first_attended(position, window) if chunk is None else position - position % chunk


def chunked_pairs(past: int, T: int, chunk: int) -> int:
    """(query, key) pairs of one head whose scores a pass of chunked attention computes (row_pieces' pieces, each
    against its chunk's keys from the chunk's first position to its last row), in closed form: a chunk's n rows after
    p of its keys hold, in pieces of R = ROW_CHUNK rows, n (p + n) pairs where n <= R, else p n + R^2 m (m + 1) / 2 +
    (n - m R) n with m = n // R; the pass's first chunk after past mod C of its keys, then its whole chunks, then the
    rest of the last."""

    def in_chunk(n: int, p: int) -> int:
        if n <= ROW_CHUNK:
            return n * (p + n)
        m = n // ROW_CHUNK
        return p * n + ROW_CHUNK * ROW_CHUNK * m * (m + 1) // 2 + (n - m * ROW_CHUNK) * n

    before = past % chunk
    first = min(T, chunk - before)
    whole, rest = divmod(T - first, chunk)
    return in_chunk(first, before) + whole * in_chunk(chunk, 0) + in_chunk(rest, 0)


def row_pieces(past: int, T: int, chunk: int | None = None) -> list[tuple[int, int]]:
    """The pass's query rows [r0, r1) in the pieces it computes: ROW_CHUNK rows at a time (the dense pass where T <=
    ROW_CHUNK), and with chunked attention cut at each chunk of `chunk` positions too (the rows of a chunk counted from
    its first row in the pass). Positions past + r0 .. past + r1 - 1."""
    if chunk is None:
        return [(0, T)] if T <= ROW_CHUNK else [(r0, min(T, r0 + ROW_CHUNK)) for r0 in range(0, T, ROW_CHUNK)]
    pieces = []
    for c in range(past // chunk, (past + T - 1) // chunk + 1):
        first, end = max(0, c * chunk - past), min(T, (c + 1) * chunk - past)
        pieces += [(r0, min(end, r0 + ROW_CHUNK)) for r0 in range(first, end, ROW_CHUNK)]
    return pieces


def on_chosen_keys(tape, attend_chosen, attend, q, K, V, bias, chosen):
    """Attention where each query attends only to its own chosen keys: `chosen` [..., T, s] indexes the t keys (an
    indexer's top s = min(t, Dims.selected) for each query). attend_chosen(q, K, V, bias, chosen, tape) -> z [..., T,
    dv] runs on chunks of ROW_CHUNK query rows (q, bias and chosen cut to the chunk's rows; K and V whole, as a query's
    keys may be any before it), and its products state the dense form's spec beside their own (Tape.matmul's
    `dense`). A watched or dense pass runs attend(q, K, V, bias, tape) over every key, those not chosen masked; where
    every key is chosen (t <= s), attend runs in_row_chunks."""
    d = tape.dims
    if d.s >= d.t:  # every key a query can see is chosen: nothing to leave out
        return in_row_chunks(tape, attend, q, K, V, bias)
    if tape.watcher is not None or tape.dense:  # every T x t score, as transformers' eager attention computes them
        masked = unchosen_mask(chosen, d.t, q.dtype)
        return attend(q, K, V, masked if bias is None else bias + masked, tape)
    gathered = tape._gathering(CHUNKS, rows=ROW_CHUNK)
    parts = []
    for r0 in range(0, d.T, ROW_CHUNK):
        r1 = min(d.T, r0 + ROW_CHUNK)
        chunk = tape.in_chunks(replace(d, T=r1 - r0, _shapes={}), gathered)
        part_bias = None if bias is None else bias[..., r0:r1, :]
        parts.append(attend_chosen(q[..., r0:r1, :], K, V, part_bias, chosen[..., r0:r1, :], chunk))
    return _joined(tape, gathered, parts)


def _joined(tape, gathered, parts):
    """The chunks' outputs side by side [..., T, dh], after one record per op on `tape`: the whole pass's shapes
    (the dense form's, where a product stated it), the chunks' dot products and MACs summed beside them."""
    d = tape.dims
    if gathered is not None and gathered.counting:
        tape.record_gathered(gathered)
    if isinstance(parts[0], ShapeOnly):
        return ShapeOnly((*parts[0].shape[:-2], d.T, parts[0].shape[-1]))
    return np.concatenate(parts, axis=-2)
