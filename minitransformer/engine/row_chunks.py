"""Attention in chunks of query rows: a speed setting beside the tape, which stays the one counting door.

A long prompt's attention runs in chunks of ROW_CHUNK query rows, each against only the keys it can see:
causally none after its last row, and with a sliding window none before the window of its first row. The
same lines of the family's forward pass run on each chunk, with the sizes of the chunk (T rows, t keys)
checked by a tape of its own, and every product still goes through Tape.matmul.

Fewer dot products than the dense T x t (about half at a long prompt), and a chunk's scores stay in the
cache. The ledger gets one record per op with the dense shapes, counting what the chunks computed
(Record.computed, with the chunk size in Record.row_chunk); the dense form's cost is beside it
(dense_dot_products, dense_macs). A watched pass (captures, hooks, trace) runs the dense lines once, so
that every watcher sees the documented full [..., H, T, t] tensors; so does a pass asked to run dense
(Tape.dense: `--dense-attention`, which computes every score as transformers' eager attention does).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .kvcache import first_attended
from .shapes import ShapeOnly
from .spec import matmul_spec, specs

# Query rows per chunk of attention (Tape.in_row_chunks). Measured on GPT-2 and the Llama-shaped bench
# model: a chunk's scores ([H, 128, t] float32) stay in the cache between the products and the softmax,
# and 128 rows still make matrix products big enough for the BLAS; passes of up to 128 new positions
# (every decode step) run the dense lines unchanged.
ROW_CHUNK = 128


def in_row_chunks(tape, attend, q, K, V, bias=None):
    """attend(q, K, V, bias, tape) -> z [..., T, dh], computed for chunks of ROW_CHUNK query rows of `tape`'s pass;
    `bias` ([..., T, t], or None) is sliced by each chunk's rows and keys."""
    d = tape.dims
    if d.T <= ROW_CHUNK or tape.watcher is not None or tape.dense:
        return attend(q, K, V, bias, tape)
    rows: dict | None = None if tape.phase is None else {}
    parts = []
    for r0 in range(0, d.T, ROW_CHUNK):
        r1 = min(d.T, r0 + ROW_CHUNK)
        start = first_attended(d.past + r0, d.window)  # the earliest key the chunk's first query sees
        keys = slice(start - d.start, d.past + r1 - d.start)  # ... to its last query's own position
        dims = replace(d, T=r1 - r0, t=keys.stop - keys.start, start=start, _shapes={})
        chunk = replace(tape, dims=dims, phase=None, watcher=None, rows=rows)
        part_bias = None if bias is None else bias[..., r0:r1, keys]
        parts.append(attend(q[..., r0:r1, :], K[..., keys, :], V[..., keys, :], part_bias, chunk))
    if rows is not None:
        for op, (spec, b_batched, dots, macs) in rows.items():
            if dots is None:
                tape._record(op, d.shape(specs(spec, 1)[0]), spec)
            else:
                a_spec, b_spec, out_spec = matmul_spec(spec)
                tape._record(op, d.shape(out_spec), out_spec, d.shape(a_spec), d.shape(b_spec, b_batched),
                             computed=(dots, macs), row_chunk=ROW_CHUNK)  # fmt: skip
    if isinstance(parts[0], ShapeOnly):
        return ShapeOnly((*parts[0].shape[:-2], d.T, parts[0].shape[-1]))
    return np.concatenate(parts, axis=-2)
