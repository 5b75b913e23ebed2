"""count --hardware's text: each product's bytes and roofline on a named machine, prefill and decode, and the totals.

Everything here reads a `Roofline` (verbs/roofline.py); nothing is counted or timed here.
"""

from __future__ import annotations

from ..text import byte_size, human, intensity, percent, seconds, table
from ..verbs.roofline import LARGEST_BATCH, OpTime, PassTime, Roofline

OPERANDS = {
    "weight": "weights",
    "kv_cache": "KV cache",
    "state": "state",
    "activations": "activations",
    "outside_products": "parameters outside the products",
}


def _cells(o: OpTime | None, total: float) -> list[str]:
    if o is None:
        return ["", "", "", "", ""]
    return [byte_size(o.total_bytes), intensity(o.macs_per_byte), seconds(o.time_s), percent(o.time_s, total), o.bound]


def _pass_title(p: PassTime) -> str:
    batch = f", B={p.batch:,}" if p.batch > 1 else ""
    if p.phase == "prefill":
        return f"prefill (T={p.tokens:,}{batch})"
    return f"decode step {p.step} (T={p.tokens:,}, t={p.context:,}{batch})"


def ops_table(rf: Roofline) -> str:
    """Each product of the prefill and of the decode step: bytes, MACs per byte, its roofline time and share, its bound."""
    passes = [rf.prefill] + ([rf.decode] if rf.decode is not None else [])
    ops = list(dict.fromkeys(o.op for p in passes for o in p.ops))
    by_op = [{o.op: o for o in p.ops} for p in passes]
    rows = [[op, *(c for p, found in zip(passes, by_op) for c in _cells(found.get(op), p.time_s))] for op in ops]
    rows.append(
        [
            "outside the products",
            *(
                c
                for p in passes
                for c in (
                    byte_size(p.outside_bytes),
                    "",
                    seconds(p.outside_s),
                    percent(p.outside_s, p.time_s),
                    "memory",
                )
            ),
        ]
    )
    rows.append(
        [
            "pass",
            *(
                c
                for p in passes
                for c in (byte_size(p.total_bytes), intensity(p.macs / p.total_bytes), seconds(p.time_s), "100%", "")
            ),
        ]
    )
    headers = ["op"]
    for p in passes:
        headers += [f"{_pass_title(p)} bytes", "MACs/byte", "time", "share", "bound"]
    return table(headers, rows, right={i for i in range(1, len(headers)) if (i - 1) % 5 < 4})


def _memory_bound(p: PassTime) -> str:
    return ", ".join(o.op for o in p.ops if o.bound == "memory") or "none"


def _bytes_line(p: PassTime) -> str:
    return ", ".join(f"{OPERANDS.get(kind, kind)} {byte_size(b)}" for kind, b in p.bytes.items() if b)


def _batch_lines(rf: Roofline) -> list[str]:
    d, per = rf.decode, rf.per_sequence
    assert d is not None and per is not None
    weights = rf.weights_compute_bound_batch
    lines = [
        f"  The products with weights of a decode step turn compute-bound at a batch of {weights:,}"
        if weights is not None
        else f"  The products with weights of a decode step stay memory-bound at every batch up to {LARGEST_BATCH:,}"
    ]
    one_more = (
        f"each sequence adds {human(per['macs'])} MACs ({seconds(per['compute_s'])} at the peak) and "
        f"{byte_size(per['bytes'])} ({seconds(per['memory_s'])} at the bandwidth)"
    )
    if rf.compute_bound_batch is not None:
        kept = (
            " and ".join(
                f"the {name}'s" for name, kind in (("KV cache", "kv_cache"), ("state", "state")) if d.bytes.get(kind)
            )
            or "the other"
        )
        lines.append(
            f"  the whole step ({kept} products too) at a batch of {rf.compute_bound_batch:,} "
            f"({one_more}, at t = {d.context:,})"
        )
    else:
        lines.append(
            f"  the whole step never does, up to a batch of {LARGEST_BATCH:,}: at t = {d.context:,} {one_more},"
            f" so its bytes grow faster than its MACs"
        )
    return lines


def roofline_report(rf: Roofline) -> str:
    m, p, d = rf.machine, rf.prefill, rf.decode
    peak = m.peak(rf.dtype)
    out = [
        f"Roofline on {m.label} ({m.name}): {rf.dtype} peak {human(peak)}FLOP/s, memory {byte_size(m.bandwidth)}/s, "
        f"ridge {m.balance(rf.dtype):,.0f} MACs/byte",
        f"  figures: {m.source}",
        "  These are roofline bounds, not measurements: each product takes at least max(2 MACs / peak, bytes /",
        "  bandwidth), bytes = A read, B read (a weight once a pass, of a mixture only the experts that got tokens) and",
        "  the output written, once each; a real run is slower (kernels, caches, the stages that are not products).",
        ops_table(rf),
        "",
        f"Prefill of {p.tokens:,} tokens: at least {seconds(p.time_s)} ({_bytes_line(p)}); its MACs at the peak alone "
        f"take {seconds(p.compute_s)}, and the memory-bound products add the rest ({_memory_bound(p)})",
    ]
    if d is not None:
        batch = f" for the batch of {d.batch:,}" if d.batch > 1 else ""
        out += [
            f"Decode at context {d.context:,}: at most {rf.decode_tokens_per_s:,.1f} tokens/s{batch} (a step takes at "
            f"least {seconds(d.time_s)}: {_bytes_line(d)}; its bytes at the bandwidth alone take {seconds(d.memory_s)})",
            *_batch_lines(rf),
        ]
    if len(rf.passes) > 1:
        out.append(f"The whole generation ({len(rf.passes):,} passes): at least {seconds(rf.generation_s)}")
    return "\n".join(out)
