"""Text views of a ledger: one block op by op, a row per layer, the decode steps, totals, the cache.

Everything here reads the ledger's data; nothing is counted here.
"""

from __future__ import annotations

from ..engine.ledger import Ledger, Phase, Record
from ..engine.precision import precision_of
from ..engine.selection import NEAR_TIE
from ..families.config import slides
from ..families.table import architecture_of
from ..text import count, count_range, human, operand_shapes, percent, plural, runs, shape, short_path, table


def describe_model(config: dict, source: str) -> str:
    c = config
    heads = ""  # a model without attention (a state-space model) has no attention heads
    if "n_head" in c:
        kv_heads = c.get("n_kv_head", c["n_head"])
        kv = f" sharing {kv_heads} key/value head{'s' if kv_heads != 1 else ''}" if kv_heads != c["n_head"] else ""
        heads = f"{plural(c['n_head'], 'head')} of {c['d_head']}{kv}, "
    if "ssm_heads" in c:  # state-space layers' heads, each with a state of P x N numbers
        heads += f"{plural(c['ssm_heads'], 'state-space head')} of {c['ssm_head_dim']} (state {c['state_size']}), "
    elif "state_size" in c:  # Mamba-1's channels, each with a state of N numbers
        heads += f"{plural(c['d_inner'], 'state-space channel', format(c['d_inner'], ','))} (state {c['state_size']}), "
    d_ff = f"d_ff {c['d_ff']:,}, " if "n_head" in c else ""  # a state-space model's mixer has no MLP
    label = architecture_of(c).label
    family = f"{c['model_type']} ({label}), " if label else ""
    window = f", sliding window {c['sliding_window']:,}" if c.get("sliding_window") else ""
    kinds = c.get("layer_types") or ()  # where only some layers slide (Gemma's, SmolLM3's), say how many
    sliding = sum(slides(kind) for kind in kinds)
    if window and 0 < sliding < len(kinds):
        window += f" on {sliding} of {plural(len(kinds), 'layer')}"
    dtype = f"; computed in {c['dtype']}" if c.get("dtype", "float32") != "float32" else ""  # the default goes unsaid
    if c.get("precision"):  # a narrower format emulated (engine/precision.py)
        dtype += f"; {rounding(c['precision'])}"
    if c.get("weights"):  # held in a format narrower than float32, as the arrays are (models/weights.py)
        dtype += f"; matrices held in {c['weights']}"
    if c.get("embedding"):  # where it differs from the matrices' (fp8: a stage's values once looked up)
        dtype += f", the token embedding in {c['embedding']}"
    return (
        f"{c['name']}: {family}{plural(c['n_layer'], 'layer')}, d_model {c['n_embd']:,}, {heads}{d_ff}"
        f"vocab {c['vocab_size']:,}, context {c['n_positions']:,}{window} "
        f"(weights: {short_path(source)}{dtype})"
    )


def rounding(name: str) -> str:
    """What a precision rounds to: "products and stages rounded to bfloat16", or, where products read a format
    other than the one their outputs and the stages keep (fp8), both."""
    policy = precision_of(name)
    if policy is None or policy.operands is None or policy.values is None:
        return f"products and stages rounded to {name}"
    if policy.operands == policy.values:
        return f"products and stages rounded to {policy.values.name}"
    return f"{name}: products read {policy.operands.name}, their outputs and the stages rounded to {policy.values.name}"


def operands(r: Record) -> str:
    """ "[5, 768] x [768, 2304]" for a product, "" for a stage that has no operands recorded; a product computed in
    chunks of query rows says so after its dense shapes: "[4, 1000, 64] x [4, 64, 1000] in 8 row chunks"."""
    return "" if r.a_shape is None else operand_shapes(r.a_shape, r.b_shape, r.chunks)


def length(r: Record) -> str:
    """The length of a product's dot products, or their range where chunks computed several ("128-1,000")."""
    return count_range(*r.dot_lengths)


def block_table(phase: Phase, layer: int = 0) -> str:
    """Every stage of one block in the order it runs, the dot products where there are any."""
    records = phase.layer_records(layer)
    block_macs = sum(r.macs for r in records)
    rows = []
    for r in records:
        if r.kind == "matmul":
            note = ""
            if r.attention == "scores":
                note = f"causal: {count(r.causal_dot_products or 0)} needed ({count(r.causal_macs or 0)} MACs)"
            elif r.causal_macs is not None:
                note = f"causal: {count(r.causal_macs)} MACs needed"
            if r.chosen_keys is not None:  # sparse attention: each query's chosen keys alone
                note += f"; sparse: {count(r.chosen_keys)} keys a query"
            if r.macs != r.dense_form_macs:  # computed in row chunks (tape.py): what the dense form would have cost
                note += f"; dense: {count(r.dense_dot_products)} ({count(r.dense_macs)} MACs)"
            if r.recurrent is not None:  # a scan computed in chunks: this product in the recurrent form
                note += ("; " if note else "") + f"recurrent form: {count(r.recurrent_macs)} MACs"
            rows.append(
                [
                    r.op,
                    r.equation,
                    operands(r),
                    shape(r.out_shape),
                    count(r.dot_products),
                    length(r),
                    count(r.macs),
                    percent(r.macs, block_macs),
                    note,
                ]
            )
        else:
            rows.append([r.op, r.equation, "", shape(r.out_shape), "-", "", "", "", ""])
    dense = sum(r.dense_form_macs for r in records)
    note = (
        f"dense: {count(sum(r.dense_form_dot_products for r in records))} ({count(dense)} MACs)"
        if dense != block_macs
        else ""
    )
    rows.append(["block", "", "", "", count(sum(r.dot_products for r in records)), "", count(block_macs), "100%", note])
    return table(
        ["stage", "equation", "A x B", "out", "dot products", "length", "MACs", "share", ""], rows, right={4, 5, 6, 7}
    )


def layers_table(phase: Phase) -> str:
    """A row per layer, then the products outside the blocks and the total; where row chunks computed less than the
    dense form, a last column says what the dense form costs."""
    rows = []
    for i in range(phase.n_layers):
        records = phase.layer_records(i)
        macs, dense = sum(r.macs for r in records), sum(r.dense_form_macs for r in records)
        rows.append(
            [
                str(i),
                count(sum(r.dot_products for r in records)),
                count(macs),
                percent(macs, phase.macs),
                f"dense: {count(dense)} MACs" if dense != macs else "",
            ]
        )
    for r in phase.records:
        if r.layer is None and r.kind == "matmul":
            rows.append([r.op, count(r.dot_products), count(r.macs), percent(r.macs, phase.macs), ""])
    rows.append(
        [
            "total",
            count(phase.dot_products),
            count(phase.macs),
            "100%",
            f"dense: {count(phase.dense_macs)} MACs" if phase.dense_macs != phase.macs else "",
        ]
    )
    return table(["layer", "dot products", "MACs", "share", ""], rows, right={1, 2, 3})


def decode_table(phases: list[Phase], limit: int = 8) -> str:
    """Each decode step's sizes and counts; the scores' shape where some layer attends (a state-space model's has
    none: no column)."""
    shown = phases if len(phases) <= limit else [*phases[: limit - 2], None, *phases[-2:]]
    first = next((r.layer for r in phases[0].records if r.attention == "scores"), None)  # the first layer that attends
    rows = []
    for p in shown:
        if p is None:
            rows.append(["...", "", "", *([""] if first is not None else []), "", ""])
            continue
        scores = next((r for r in p.records if r.attention == "scores"), None)
        shapes = [] if first is None else [shape(scores.out_shape) if scores else "-"]
        rows.append([str(p.step), count(p.tokens), count(p.context), *shapes, count(p.dot_products), count(p.macs)])
    headers = ["step", "T", "t", *([f"scores (layer {first})"] if first is not None else []), "dot products", "MACs"]
    return table(headers, rows, right={0, 1, 2, len(headers) - 2, len(headers) - 1})


KV_CACHE = "KV cache"


def cache_name(kinds) -> str:
    """What the cache of a generation holds, in a word, from the kinds of a pass's stages: keys and values where some
    layer writes them (a stage of kind "cache"; maybe states beside them), each layer's recurrent state alone where
    none does (Mamba's)."""
    return KV_CACHE if "cache" in set(kinds) else "state cache"


def decode_heading(cached: str, attends: bool) -> str:
    """The decode table's title: T and t as its columns read them (a model that attends to nothing reads no keys: its
    t is the positions so far)."""
    return f"Decode steps {cached}: T new positions, " + ("t attended" if attends else "t the positions so far")


def capitalised(text: str) -> str:
    """A sentence's first word: "state cache" -> "State cache", "KV cache" as it is."""
    return text[:1].upper() + text[1:]


def ledger_report(ledger: Ledger, layer: int = 0) -> str:
    prefill, decodes = ledger.phases[0], ledger.phases[1:]
    config = ledger.model
    cache = cache_name(r.stage.kind for r in prefill.records)
    cached = f"with the {cache}" if ledger.cached else "without a cache (every step recomputes the sequence)"
    out = [
        f"Where the dot products live: one transformer block (layer {layer} of {config['n_layer']}) in the prefill, "
        f"T = {plural(prefill.tokens, 'new position')} attending to t = {prefill.context}",
        block_table(prefill, layer),
        "",
        *_convention(prefill),
        "",
        f"Prefill, layer by layer ({plural(prefill.tokens, 'token')}, logits for the last position only)",
        layers_table(prefill),
    ]
    out += expert_load_lines(ledger)
    tied = ties_line(ledger.phases)
    if tied:
        out += ["", tied]
    if decodes:
        attends = any(r.attention == "scores" for r in prefill.records)
        out += ["", decode_heading(cached, attends), decode_table(decodes)]
    totals = ledger.totals
    out += [
        "",
        f"Total: {count(totals.dot_products)} dot products, {count(totals.macs)} MACs ({human(totals.macs)}), "
        f"{human(totals.flops)} FLOPs over 1 prefill + {len(decodes)} decode step{'s' if len(decodes) != 1 else ''}",
    ]
    if totals.scanned:
        out.append(
            f"Recurrent form: {count(totals.recurrent_macs or 0)} MACs ({human(totals.recurrent_macs or 0)}) had every "
            f"scan over the prompt run position by position, as a decode step does"
        )
    if totals.chunked:
        out.append(
            f"Dense form: {count(totals.dense_dot_products or 0)} dot products, {count(totals.dense_macs or 0)} MACs "
            f"({human(totals.dense_macs or 0)}) had every T x t score been computed (--dense-attention)"
        )
    if ledger.batched:
        out.append(padding_line(ledger))
    comparison = ledger.cache_comparison()
    if comparison is not None:
        saved = comparison["saved_macs"]
        without = comparison["without_cache"]["macs"]
        with_cache = comparison["with_cache"]["macs"]
        if ledger.cached:
            out.append(
                f"{capitalised(cache)}: without it these tokens would cost {human(without)} MACs; with it {human(with_cache)}: "
                f"saved {human(saved)} MACs ({percent(saved, without)})"
            )
        else:
            out.append(
                f"{capitalised(cache)} (off): with it these tokens would cost {human(with_cache)} MACs instead of "
                f"{human(without)}: it would save {human(saved)} ({percent(saved, without)})"
            )
    return "\n".join(out)


def expert_load_lines(ledger: Ledger) -> list[str]:
    """A mixture of experts: the tokens the router sent each expert, a compact line per layer, over the whole run (the
    prefill's and every decode step's), and why the MACs do not depend on it. Nothing for a dense model."""
    loads: dict[int, list[int]] = {}
    for phase in ledger.phases:
        counted: set[int] = set()  # a layer's first product with a breakdown: its experts' tokens (the others agree)
        for r in phase.records:
            if r.breakdown is None or r.layer is None or r.layer in counted:
                continue
            counted.add(r.layer)
            so_far = loads.setdefault(r.layer, [0] * len(r.breakdown))
            loads[r.layer] = [n + part.tokens for n, part in zip(so_far, r.breakdown)]
    if not loads:
        return []
    k = ledger.model.get("top_k")
    width = len(str(max(max(load) for load in loads.values())))
    lines = [
        "",
        f"Expert load: tokens the router sent each expert over the run, per layer (each token to {k}; a layer's "
        f"expert MACs are T x {k} x one expert's per token, whichever it chose)",
    ]
    for layer, load in sorted(loads.items()):
        lines.append(
            f"  layer {layer:>3}: {' '.join(f'{n:>{width}}' for n in load)}   busiest expert {load.index(max(load))}"
        )
    return lines


def ties_line(phases: list[Phase]) -> str | None:
    """One line where a selection of these passes (a router's experts, an indexer's keys) tied or near-tied at its
    k-th place: which layers and stages, at which positions, exact or by what margin; None where none did."""
    groups: dict[tuple, list] = {}
    held = ""
    for phase in phases:
        held = next((s.held for s in phase.selections), held)
        for tie in phase.ties:
            row = tie.row if phase.batch > 1 else None  # a batch's ties, row by row
            groups.setdefault((row, tie.layer, tie.stage), []).append(tie)
    if not groups:
        return None
    parts = []
    for key, ties in groups.items():
        row, layer, stage = key
        positions = sorted({t.position for t in ties})
        near = [t.margin for t in ties if not t.exact]
        exact = len(ties) - len(near)
        if not near:
            what = "exact"
        elif not exact:
            what = f"near, margin {min(near):.1e}"
        else:
            what = f"{exact} exact, {len(near)} near down to a margin of {min(near):.1e}"
        where = "" if row is None else f"row {row} "
        at = "position" if len(positions) == 1 else "positions"
        parts.append(f"{where}layer {layer} {stage} at {at} {runs(positions)} ({what})")
    return (
        f"Selections tied at the k-th place: {'; '.join(parts)}. Equal scores go to the lowest index; near: a margin "
        f"below {NEAR_TIE} epsilons of {held} x the row's largest |score|"
    )


# The rule every note under a block begins with (count's too)
RULE = "  (m x n)(n x p) = m*p dot products of length n = m*p*n MACs; FLOPs = 2 x MACs."


def _convention(prefill: Phase) -> list[str]:
    """The note under the block: scores computed dense, in chunks of query rows (engine/row_chunks.py), or against
    the keys an indexer chose for each query."""
    chunk = next((r.row_chunk for r in prefill.records if r.row_chunk is not None), None)
    if not any(r.attention == "scores" for r in prefill.records):  # a model without attention
        return [RULE]
    chosen = next((r.chosen_keys for r in prefill.records if r.chosen_keys is not None), None)
    if chosen is not None:
        return [
            f"{RULE} Sparse attention: each query's",
            f"  scores and mix are computed against only the {chosen:,} keys the indexer chose for it; 'dense' is "
            "every T x t score,",
            "  as transformers' eager attention computes them and masks the rest (--dense-attention); 'causal' is the "
            "part the masks keep.",
        ]
    if chunk is None:
        return [
            f"{RULE} Scores are computed dense",
            "  (T x t per head) and the future is masked afterwards; 'causal' is the part of that work the mask keeps.",
        ]
    return [
        f"{RULE} Scores are computed in chunks of {chunk}",
        "  query rows, each against only the keys it can see (so A V's dot products are as long as the keys their",
        "  chunk sees: its length is a range); 'dense' is every T x t score, as transformers' eager attention",
        "  computes them (--dense-attention); 'causal' is the part of that work the mask keeps.",
    ]


def padding_line(ledger: Ledger) -> str:
    """What a batch of prompts of different lengths spent on padding (ledger.padding_of says which products)."""
    pads, total, padding, finished = ledger.phases[0].pads, ledger.totals, ledger.padding, ledger.finished_padding
    return (
        f"Padding: {count(padding.dot_products)} dot products, {count(padding.macs)} MACs "
        f"({percent(padding.macs, total.macs)} of the MACs) on the pad slots of {plural(len(pads), 'row')} left-padded by "
        f"{', '.join(map(str, pads))}, and on rows that had finished and kept computing ({count(finished.macs)} MACs)"
    )


def candidates_table(candidates) -> str:
    rows = [
        [str(i + 1), repr(c.token), str(c.token_id), f"{100 * c.probability:.2f}%"] for i, c in enumerate(candidates)
    ]
    return table(["rank", "token", "id", "probability"], rows, right={0, 2, 3})


def cache_streams(k: dict) -> list[tuple[str, str, int]]:
    """One kind of layer's cache stream by stream (DeepSeek-V4's), as memory's JSON has it: (stream, what it holds,
    its bytes in all the kind's layers) for the window's keys (K = V, kept once), each compressed stream's entries (one
    every `ratio` positions) and the compressors' state. count's memory lines and the page's memory table both say
    them so."""
    window = k["window"]
    streams = [
        ("window", f"window {window['positions']:,} x {window['numbers_per_position']:,} (K = V)", window["bytes"])
    ]
    streams += [
        (name, f"{name} {s['entries']:,} entries (1 every {s['ratio']}) x {s['numbers_per_entry']:,}", s["bytes"])
        for name, s in k.get("compressed", {}).items()
    ]
    if k.get("state_bytes"):
        streams.append(("state", "compressors' state", k["state_bytes"]))
    return streams
