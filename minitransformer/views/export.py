"""A count written out for other programs: the JSON document (generate --json's schema, without the text) and
one CSV row per matrix product per pass. Both are views of the count (verbs/count.py); nothing is counted here."""

from __future__ import annotations

import csv
import io
import json

from ..text import json_ready
from ..verbs.count import Count
from ..verbs.draft import DraftCount
from ..verbs.memory import memory_dict
from ..verbs.roofline import Roofline


def json_text(value, indent: int | None = 1) -> str:
    """Standard JSON of a document: a number JSON cannot hold (NaN, an infinity: a run over a NaN weight, a float16
    pass that overflowed) written as null, not as Python's NaN, which strict parsers refuse. indent=1: indented,
    a product's record a line (`_lines`); None: one line."""
    try:
        return _COMPACT(value) if indent is None else _lines(value, 0)
    except ValueError:  # walked only then: a document almost never holds one
        return json_text(json_ready(value), indent)


_COMPACT = json.JSONEncoder(allow_nan=False).encode  # json's C encoder: the one it takes without an indent


def _lines(value, depth: int) -> str:
    """value as JSON indented a space a level, where each object or array that holds only numbers, strings and arrays
    of them (a product's record with its shapes, a list of shapes) is one line, written by json's C encoder:
    json.dumps(indent=1) wrote a line per field and per number, in Python: DeepSeek-V4-Pro's document at 300 tokens
    took it 1.4 to 1.7 s, 1,048,544 lines and 21 MB, this 0.6 to 0.8 s, 157,478 lines and 14 MB (0.2 s on one line)."""
    if _one_line(value):
        return _COMPACT(value)
    inside = "\n" + " " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inside}{_key(key)}: {_lines(item, depth + 1)}" for key, item in value.items()]
        return "{" + ",".join(items) + "\n" + " " * depth + "}"
    return "[" + ",".join(inside + _lines(item, depth + 1) for item in value) + "\n" + " " * depth + "]"


def _one_line(value) -> bool:
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return all(
        not isinstance(item, (dict, list, tuple))
        or (isinstance(item, (list, tuple)) and not any(isinstance(x, (dict, list, tuple)) for x in item))
        for item in items
    )


def _key(key) -> str:
    """A key as json writes it: a string, quoted; a number, True, False or None as the string of its JSON."""
    return _COMPACT(key if isinstance(key, str) else _COMPACT(key))


def json_chunks(
    count: Count,
    balance: float,
    all_steps: bool = False,
    dtype: str = "float32",
    roofline: Roofline | None = None,
    drafts: DraftCount | None = None,
    indent: int | None = 1,
):
    """The JSON document in pieces (a long generation is written without holding it all in memory).

    The schema is generate --json's, without the text: "prompt_tokens" and "new_tokens" are counts
    (a count has no tokens). The prefill and the decode steps the table shows are in full (Phase.to_dict);
    the other decode steps carry their totals only, unless all_steps. "detailed_steps" lists the full ones.
    With a roofline (count --hardware), "hardware": the machine, the roofline of each product of the prefill and a
    decode step, and the totals (Roofline.to_dict). With the draft (count --mtp), "mtp": its MTP layers, each MTP pass
    in full, its own phase ("mtp", step k beside the main pass of step k), their MACs and a drafted token's.
    indent=None: the same document on one line, for a reader that parses it (the HTML page): json's C encoder writes
    it in one call, where the file's indented lines take a call of it a line (see `_lines`).
    """
    detailed = {0, *(range(1, count.n_new) if all_steps else count.shown_steps())}
    head = {
        "model": count.config.to_dict(),
        "counted_from": "shapes only: no weights (a shape-only run of the forward code)",
        "prompt_tokens": count.n_prompt,
        "new_tokens": count.n_new,
        "batch": count.batch,
        "detailed_steps": sorted(detailed),
    } | ({"routing": count.running.routing} if count.config.routes else {})
    head |= {"dense_attention": True} if count.running.dense_attention else {}  # as a generation's ledger says it
    tail = {
        "totals": count.totals.to_dict(),
        "cache": count.cache_comparison(),
        "memory": memory_dict(count, balance, dtype),
    } | ({} if roofline is None else {"hardware": roofline.to_dict()})
    if drafts is not None:
        tail["mtp"] = {
            "layers": drafts.n_mtp,
            "phases": [p.to_dict() for p in drafts.passes],
            "macs": drafts.macs,
            "per_drafted_token_macs": drafts.per_drafted_token(),
        }
    yield "{\n"
    for key, value in head.items():
        yield f" {json.dumps(key)}: {json_text(value, indent)},\n"
    yield ' "phases": [\n'
    for i, p in enumerate(count.passes):
        phase = p.expand().to_dict() if p.step in detailed else p.summary()
        yield json_text(phase, indent) + (",\n" if i < len(count.passes) - 1 else "\n")
    yield " ],\n"
    yield ",\n".join(f" {json.dumps(key)}: {json_text(value, indent)}" for key, value in tail.items()) + "\n}\n"


CSV_COLUMNS = (
    "phase",
    "step",
    "tokens",
    "context",
    "batch",
    "cached",
    "op",
    "equation",
    "layers",
    "a_shape",
    "b_shape",
    "out_shape",
    "heads",
    "dot_products",
    "dot_length",
    "macs",
    "flops",
    "causal_dot_products",
    "causal_macs",
    "dense_dot_products",
    "dense_macs",
    "recurrent_dot_products",
    "recurrent_macs",
    "all_layers_dot_products",
    "all_layers_macs",
    "share_of_pass",
    "dot_length_min",
    "dot_length_max",
)


def csv_chunks(count: Count):
    """One row per matrix product per forward pass; block products once per kind of layer with `layers` = the
    layers of that kind (all n_layer of them where all are alike), since they have the same shapes: dot_products, macs, flops, causal_*, dense_* (on scores and mix: the dense form's
    cost, where row chunks computed less), recurrent_* (on a scan computed in chunks: the recurrent form's) are per
    layer, all_layers_* are x layers; dot_length_min and _max are the lengths of the dot products computed (equal to
    dot_length, but for A V computed in row chunks: each chunk's are as long as the keys it sees)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in count.passes:
        pass_macs = p.macs
        for r, layers in p.weighted():
            if r.kind != "matmul":
                continue
            writer.writerow(
                [
                    p.phase,
                    p.step,
                    p.tokens,
                    p.context,
                    p.batch,
                    p.cached,
                    r.op,
                    r.equation,
                    layers,
                    _dims(r.a_shape),
                    _dims(r.b_shape),
                    _dims(r.out_shape),
                    r.heads or "",
                    r.dot_products,
                    r.dot_length,
                    r.macs,
                    r.flops,
                    _blank(r.causal_dot_products),
                    _blank(r.causal_macs),
                    *((r.dense_dot_products, r.dense_macs) if r.causal_macs is not None else ("", "")),
                    *((r.recurrent_dot_products, r.recurrent_macs) if r.recurrent is not None else ("", "")),
                    layers * r.dot_products,
                    layers * r.macs,
                    f"{layers * r.macs / pass_macs:.6f}",
                    *r.dot_lengths,
                ]
            )
        yield buffer.getvalue()
        buffer.seek(0), buffer.truncate()


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape)


def _blank(value) -> str | int:
    return "" if value is None else value
