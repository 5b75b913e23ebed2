"""Memory beside the counts: weight bytes, KV-cache bytes, a peak-activation estimate, arithmetic intensity.

All float32 (4 bytes a number), as the engine computes.

Arithmetic intensity of a product = MACs / bytes moved, where the bytes moved are the least any
implementation must move: read A once, read B once, write the output once (4 bytes a number). A
product whose intensity is below the machine balance (the MACs the machine can do in the time it
moves one byte) waits on memory: it is memory-bound. During decode every product has T = 1 row,
so each weight is read to do one multiply-accumulate per number: about 1/4 MAC per byte.

The peak-activation estimate, read from a pass's records: the residual stream x [B, T, D] plus the
largest working set of one stage, in a pass nobody watches (the usual run): for a matrix product
its A and its output (its B is a weight, or K^T and V, which live in the KV cache or in the Q K V
projection's output); for scale, mask and softmax one tensor, as they write over the scores in
place (ops.py); for the other elementwise stages input and output; nothing for views (the heads
split, the cache's rows, the last position). The tests hold it to tracemalloc's measured peak of
real runs.
"""

from __future__ import annotations

from math import prod

from .config import GPT2Config
from .kvcache import KVCache
from .ledger import Record

FLOAT32_BYTES = 4
# A present-day desktop CPU: ~0.5 T float32 MAC/s (8 cores x 2 FMA units x 8 lanes x 4 GHz) over ~50 GB/s
# of DRAM bandwidth. For comparison: an A100 does ~6 float32 MACs per byte of HBM, ~100 in bf16 on tensor cores.
DEFAULT_BALANCE = 10.0  # MACs per byte

# Same-sized tensors alive in a stage that is not a product: one for the stages that work in place on
# the scores, none for views; the other stages hold their input and output.
_LIVE_COPIES = {"scale": 1, "mask": 1, "softmax": 1, "split_heads": 0, "cache": 0, "last": 0}


def kv_cache_bytes(config: GPT2Config, positions: int, batch: int = 1) -> int:
    """The engine's own KV cache (shape-only, so nothing is allocated) holding `positions` positions."""
    lead = (batch,) if batch > 1 else ()
    return KVCache(config.n_layer, config.n_head, config.d_head, positions, lead, shape_only=True).nbytes


def bytes_moved(r: Record) -> int:
    """Read A, read B, write the output, once each, float32."""
    return FLOAT32_BYTES * (prod(r.a_shape) + prod(r.b_shape) + prod(r.out_shape))


def intensity(r: Record) -> float:
    """MACs per byte moved."""
    return r.macs / bytes_moved(r)


def working_set(r: Record) -> int:
    """Numbers alive while this stage runs, besides the residual stream (see the module docstring)."""
    if r.kind == "matmul":
        return prod(r.a_shape) + prod(r.out_shape)
    return _LIVE_COPIES.get(r.op, 2) * prod(r.out_shape)


def peak_activations(records: list[Record]) -> tuple[int, Record]:
    """(estimated peak activation bytes, the stage where it peaks) of one pass."""
    residual = prod(next(r for r in records if r.op == "embed").out_shape)
    peak = max(records, key=working_set)
    return FLOAT32_BYTES * (residual + working_set(peak)), peak


def intensity_rows(count, balance: float) -> list[dict]:
    """Each matrix product in the prefill and in a cached decode step: MACs, bytes moved, MACs per byte."""
    decode = count.decode_example()
    rows = []
    for r in count.prefill.block + count.prefill.after:
        if r.kind != "matmul":
            continue
        row = {"op": r.op, "prefill": _intensity(r, balance)}
        if decode is not None:
            row["decode"] = _intensity(decode.find(r.op), balance)
        rows.append(row)
    return rows


def _intensity(r: Record, balance: float) -> dict:
    value = intensity(r)
    return {"rows": r.a_shape[-2], "macs": r.macs, "bytes": bytes_moved(r), "macs_per_byte": value,
            "memory_bound": value < balance}  # fmt: skip


def memory_dict(count, balance: float) -> dict:
    """The memory section of the count's JSON (see the module docstring for the definitions)."""
    from .params import parameters

    config, batch = count.config, count.batch
    n_params = parameters(config).total
    held = count.n_prompt + count.n_new - 1  # the last new token is never fed back, so never cached
    prefill = count.prefill
    prefill_peak, prefill_stage = peak_activations(prefill.before + prefill.block + prefill.after)
    activations = {"estimate": "residual stream + the largest stage's working set (see minitransformer/memory.py)",
                   "prefill": {"bytes": prefill_peak, "stage": prefill_stage.op}}  # fmt: skip
    decode = count.decode_example()
    if decode is not None:
        decode_peak, decode_stage = peak_activations(decode.before + decode.block + decode.after)
        activations["decode"] = {"bytes": decode_peak, "stage": decode_stage.op, "context": decode.context}
    return {
        "bytes_per_number": FLOAT32_BYTES,
        "weights": {"parameters": n_params, "bytes": FLOAT32_BYTES * n_params},
        "kv_cache": {
            "used": count.cached,
            "batch": batch,
            "bytes_per_token": kv_cache_bytes(config, 1, batch),
            "positions": held,
            "bytes": kv_cache_bytes(config, held, batch),
            "context": config.n_positions,
            "bytes_at_context": kv_cache_bytes(config, config.n_positions, batch),
        },
        "activations": activations,
        "intensity": {
            "bytes_moved": "read A, read B and write the output once each, float32",
            "machine_balance_macs_per_byte": balance,
            "ops": intensity_rows(count, balance),
        },
    }
