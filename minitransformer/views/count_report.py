"""The count command's text: a walkthrough of where the dot products of a generation go, and what it holds in memory.

Everything here reads a `Count` (count.py); nothing is counted here.
"""

from __future__ import annotations

from fractions import Fraction

from ..engine.ledger import Record
from ..engine.stages import ATTENTION_SCORES, STATE, UNEMBEDDING
from ..families.parts.moe import ROUTINGS
from ..families.table import architecture_of
from ..text import byte_size, elided, human, intensity, percent, plural, s_for, shape, table
from ..text import count as n
from ..verbs.count import AttentionVsWeights, Count, Pass, with_weights
from ..verbs.formulas import (
    attention_crossing,
    attention_macs,
    attention_to_weights,
    first_attending,
    generation_macs,
    weight_macs_per_position,
)
from ..verbs.memory import DEFAULT_BALANCE, DTYPE_BYTES, in_scan, kv_cache_bytes, kv_cache_bytes_after, memory_dict
from .report import RULE, cache_name, cache_streams, capitalised, decode_heading, describe_model, length, operands

CONVENTION = (
    f"{RULE} Dense, as computed here\n"
    "  and in transformers: Q K^T is T x t per head and the future is masked afterwards. 'causal' is the part of\n"
    "  that work the mask keeps: per head T*past + T(T+1)/2 (query, key) pairs; each is a score of length dh, and\n"
    "  in A V the same output elements need only those keys (shorter useful dot products)."
)
# Where the prefill ran in row chunks (engine/row_chunks.py), the note says what was computed instead.
CHUNKED_CONVENTION = (
    f"{RULE} Computed in chunks of\n"
    "  {C} query rows, each chunk's Q K^T against only the keys its rows can see, so fewer scores than the dense\n"
    "  T x t per head that transformers' eager attention computes and masks afterwards ('dense form'; count it\n"
    "  with --dense-attention). A V's dot products are as long as the keys their chunk sees, so its length is a\n"
    "  range and its MACs their sum. 'causal' is the part of that work the mask keeps: per head T*past + T(T+1)/2\n"
    "  (query, key) pairs; each is a score of length dh, and in A V the same output elements need only those keys."
)


def _block_heading(count: Count) -> str:
    """What the block table stands for: every block (all alike), the model's only one, or layer 0 of several kinds."""
    c, kinds = count.config, len(count.prefill.groups)
    if c.n_layer == 1:
        return "The prefill, the model's one transformer block:"
    if kinds == 1:
        return f"The prefill, one transformer block (each of the {c.n_layer} blocks has the same shapes, so the same counts):"
    return (
        f"The prefill, one transformer block, layer 0 (the {c.n_layer} blocks are of {kinds} kinds: "
        f"{', '.join(dict.fromkeys(c.layer_types))}; the next table has each):"
    )


# Where an indexer chose each query's keys (DeepSeek-V3.2's sparse attention), the note says so.
SPARSE_CONVENTION = (
    f"{RULE} Sparse attention: each\n"
    "  query's Q K^T and A V against only the s = {s:,} keys the indexer chose for it (gathered for each chunk of {C}\n"
    "  query rows), so fewer scores than the dense T x t per head that transformers' eager attention computes and\n"
    "  masks afterwards ('dense form'; count it with --dense-attention). 'causal' is the part of that work the masks\n"
    "  keep: query i's min(past + i + 1, s) (query, key) pairs a head, each a score of length dh."
)


def convention(count: Count) -> str:
    """The note under the block: dense where the prefill computed every score, the chunks where it did not, the
    chosen keys where an indexer chose them; and a recurrent layer's scan in chunks where one ran so."""
    scores = count.prefill.scores
    if scores is None:  # no layer attends: the rule alone
        note = RULE
    elif scores.chosen_keys is not None:
        note = SPARSE_CONVENTION.format(s=scores.chosen_keys, C=scores.row_chunk)
    else:
        note = CONVENTION if scores.row_chunk is None else CHUNKED_CONVENTION.format(C=scores.row_chunk)
        if scores.selected is not None and scores.out_shape[-1] > scores.selected:
            note += (
                f"\n  The indexer's mask keeps at most its ki = {scores.selected:,} chosen keys a query: query i's "
                f"min(past + i + 1, ki) pairs a head."
            )
    if any(r.recurrent is not None for r in count.prefill.block_records):
        note += "\n" + SCAN_CONVENTION
    return note


# Where a recurrent layer's scan ran in chunks over the prompt (Record.recurrent), the note says what that means.
SCAN_CONVENTION = (
    "  A recurrent layer's scan (its state read and written position by position in a decode step) is computed over\n"
    "  the prompt in chunks: each chunk's reads and writes of the state as products of many rows, plus the products\n"
    "  within the chunk that the recurrent form does not have. 'recurrent form' is what the same positions cost one\n"
    "  at a time (0 for a product it does not have); the chunks' totals against it are below."
)


def hybrid(p: Pass) -> bool:
    """Layers of several mixers: some keep a state (a scan's products), others attend, or none does."""
    scans = [any(r.stage.group == STATE for r in records) for records, _ in p.groups]
    return any(scans)


def kind_blocks(p: Pass) -> list[tuple[str, list[Record], int, int]]:
    """(kind, one layer's records, its index, how many layers) of each kind of layer, in the order they first come."""
    kinds = list(dict.fromkeys(p.layer_types))
    return [(kind, records, p.layer_types.index(kind), n) for kind, (records, n) in zip(kinds, p.groups)]


# A group's name in the summary where it is not the stage table's own (stages.py: Stage.group).
_GROUP_LABELS = {UNEMBEDDING: "unembedding"}


def groups(count: Count) -> list[tuple[str, tuple[str, ...]]]:
    """(label, ops) of each group of matrix products, in the order the forward pass first meets them:
    "attention projections (q, k, v, out)", ..., from the family's stage table."""
    ops: dict[str, list[str]] = {}
    for stage in count.stage_table.stages.values():
        if stage.kind == "matmul":
            ops.setdefault(stage.group, []).append(stage.op)
    return [(f"{_GROUP_LABELS.get(g, g)} ({', '.join(members)})", tuple(members)) for g, members in ops.items()]


def count_report(count: Count, balance: float = DEFAULT_BALANCE, dtype: str = "float32") -> str:
    c = count.config
    decodes = len(count.decodes)
    name = cache_name(r.stage.kind for r in count.prefill.block_records)
    cache = f"with the {name}" if count.cached else "without a cache (every step recomputes the whole sequence)"
    batch = f"a batch of {count.batch} sequences" if count.batch > 1 else "1 sequence"
    out = [
        f"model {describe_model(c.to_dict(), 'none, counted from shapes alone')}",
        f"generation: a {count.n_prompt:,}-token prompt and {count.n_new:,} new token{s_for(count.n_new)} = 1 prefill + "
        f"{decodes:,} decode step{s_for(decodes)}, {batch}, {cache}",
        "",
        *prefill_blocks(count),
        "",
        convention(count),
        *experts_lines(count),
        "",
        f"The prefill, layer by layer ({plural(count.prefill.tokens, 'token', format(count.prefill.tokens, ','))}; logits for the "
        f"last position only)",
        layers_table(count.prefill),
    ]
    if decodes:
        last = next(p for p in reversed(count.decodes) if p.step in count.shown_steps())
        out += [
            "",
            *decode_blocks(last),
            "",
            decode_heading(cache, count.prefill.scores is not None)
            + (f" ({len(count.shown_steps())} of {decodes:,} shown)" if len(count.shown_steps()) < decodes else ""),
            decode_table(count),
        ]
    attention = attention_lines(count)
    out += [
        "",
        "Where the MACs go",
        ops_table(count),
        "",
        *([attention, ""] if attention else []),
        totals_lines(count),
        "",
        *window_lines(count, dtype),
        memory_lines(count, balance, dtype),
    ]
    notes = architecture_of(c).formulas.count_notes(c, count.n_prompt, count.n_new)  # DeepSeek-V3's MLA
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def prefill_blocks(count: Count) -> list[str]:
    """The prefill's block, stage by stage: layer 0's, or in a hybrid one block of each kind of layer."""
    p = count.prefill
    seen = f"T = {plural(p.tokens, 'new position', format(p.tokens, ','))} attending to t = {p.context:,}"
    if not hybrid(p):
        return [_block_heading(count), seen, block_table(p.block, full=True)]
    n, kinds = count.config.n_layer, len(p.groups)
    which = (
        f"one block (each of the {n} blocks has the same shapes)"
        if kinds == 1
        else f"one block of each kind of layer (the {n} blocks are of {kinds} kinds)"
    )
    out = [f"The prefill, {which}, {seen}"]
    for kind, records, layer, layers in kind_blocks(p):
        out += ["", f"{kind} (layer {layer}; {plural(layers, 'layer')} like it):", block_table(records, full=True)]
    return out


def decode_blocks(p: Pass) -> list[str]:
    """A decode step's products: layer 0's block, or one block of each kind of layer."""
    seen = f"T = {p.tokens:,} new position{s_for(p.tokens)} attending to t = {p.context:,}"
    if not hybrid(p):
        return [f"One block in decode step {p.step}: {seen}", block_table(p.block, full=False)]
    out = [f"One block of each kind in decode step {p.step}: {seen}"]
    for kind, records, layer, _ in kind_blocks(p):
        out += [f"{kind} (layer {layer}):", block_table(records, full=False)]
    return out


def moe_block(p: Pass) -> list[Record]:
    """The records of a layer with experts (the first kind of layer that has them, where a dense MLP stands beside
    experts), or the pass's block where none has."""
    return next((list(records) for records, _ in p.groups if any(r.breakdown is not None for r in records)), p.block)


def expert_load(p: Pass) -> list[int] | None:
    """Tokens per expert in each MoE layer of a pass (every layer alike in a count), or None without experts."""
    breakdown = next((r.breakdown for r in moe_block(p) if r.breakdown is not None), None)
    return None if breakdown is None else [part.tokens for part in breakdown]


def experts_lines(count: Count) -> list[str]:
    """A mixture of experts: why its expert MACs do not depend on the routing, the routing assumed, the load."""
    c, p = count.config, count.prefill
    load = expert_load(p)
    if load is None or c.top_k is None:
        return []
    rows = p.batch * p.tokens
    experts = sum(r.macs for r in moe_block(p) if r.breakdown is not None)
    every = "every layer" if len(p.groups) == 1 else "every layer with experts"
    per_token = experts // (rows * c.top_k)
    batch = f"{p.batch} x " if p.batch > 1 else ""
    busiest = max(load)
    return [
        "",
        f"  Experts: each token's rows are computed by k = {c.top_k} of the E = {c.n_experts} experts, so a layer's "
        f"expert MACs are\n  {'B x ' if batch else ''}T x k x (one expert's MACs per token) = {batch}{rows // p.batch:,} x {c.top_k} x "
        f"{per_token:,} = {experts:,}, whichever experts the router chose.",
        f"  Routing assumed (no router without weights): {count.running.routing}: {ROUTINGS[count.running.routing]}"
        + (
            ""
            if count.running.routing == "worst"
            else "\n  (--routing worst: every token to the same k experts; no total moves)"
        ),
        f"  Expert load of the prefill, tokens per expert in {every}: {' '.join(map(str, load))} (the busiest: "
        f"{busiest:,} of {plural(rows, 'token', format(rows, ','))}, {n(busiest * per_token)} MACs)",
    ]


def block_table(block: list[Record], full: bool) -> str:
    """Every stage of one block (or only its products) with dense and causal counts side by side, and where a scan
    ran in chunks, each product's recurrent form."""
    block_macs = sum(r.macs for r in block)
    scanned = any(r.recurrent is not None for r in block)
    rows = []
    for r in block:
        if r.kind == "matmul":
            rows.append(_product_row(r, block_macs, scanned))
        elif full:
            rows.append([r.op, r.equation, "", shape(r.out_shape), "-", "", "", "", "", "", "", ""] + [""] * scanned)
    causal = sum(r.causal_macs if r.causal_macs is not None else r.macs for r in block)
    dense = sum(r.dense_form_macs for r in block)
    recurrent = sum(r.recurrent_macs for r in block)
    dots = n(sum(r.dot_products for r in block))
    rows.append(
        ["block", "", "", "", dots, "", n(block_macs), human(2 * block_macs), "100%", "", n(causal)]
        + [f"{n(dense)} MACs" if dense != block_macs else ""]
        + ([f"{n(recurrent)} MACs"] if scanned else [])
    )
    headers = ["stage", "equation", "A x B", "out", "dot products", "length", "MACs", "FLOPs", "share"]
    headers += ["causal dot products", "causal MACs", "dense form"] + ["recurrent form"] * scanned
    return table(headers, rows, right={4, 5, 6, 7, 8, 9, 10})


def _product_row(r: Record, block_macs: int, scanned: bool) -> list[str]:
    """A product's row of the block table: its shapes and counts, what the causal mask keeps, the dense form where
    row chunks (or an indexer's choice) skipped part of it, and its recurrent form where the block ran a scan."""
    causal_dots = n(r.causal_dot_products) if r.causal_dot_products is not None else ""
    causal_macs = n(r.causal_macs) if r.causal_macs is not None else ""
    dense_form = f"{n(r.dense_macs)} MACs" if r.macs != r.dense_form_macs else ""  # row chunks skipped the rest
    if r.chosen_keys is not None:  # sparse attention: the keys each query read
        dense_form += f" (sparse: {n(r.chosen_keys)} keys a query)"
    row = [r.op, r.equation, operands(r), shape(r.out_shape), n(r.dot_products), length(r), n(r.macs), human(r.flops)]
    row += [percent(r.macs, block_macs), causal_dots, causal_macs, dense_form]
    return row + ([f"{n(r.recurrent_macs)} MACs" if r.recurrent is not None else ""] if scanned else [])


def product_row(r: Record, pass_macs: int) -> list[str]:
    """A product outside the blocks in the layer-by-layer table: its counts, its share of the pass, its equation."""
    counts = [n(r.dot_products), n(r.macs), human(r.flops), percent(r.macs, pass_macs)]
    return [r.op, *counts, f"{shape(r.out_shape)}: {r.equation}"]


def layers_table(p: Pass) -> str:
    L = p.n_layer
    rows = [["embed", "0", "0", "", "", "a lookup: no products"]]
    rows += [product_row(r, p.macs) for r in p.before if r.kind == "matmul"]  # once a pass: Gemma 4's per-layer inputs
    if len(p.groups) > 1:  # layers of several kinds: a row for each kind
        for kind, (records, layers) in zip(dict.fromkeys(p.layer_types), p.groups):
            dots, macs = sum(r.dot_products for r in records), sum(r.macs for r in records)
            where = [i for i, k in enumerate(p.layer_types) if k == kind]
            rows.append(
                [
                    f"{kind} ({layers})",
                    n(dots),
                    n(macs),
                    human(2 * macs),
                    percent(layers * macs, p.macs),
                    f"each of layers {elided(where)}",
                ]
            )
    else:
        dense = sum(r.dense_form_macs for r in p.block)
        rows.append(
            [
                f"0..{L - 1}" if L > 1 else "0",
                n(p.block_dot_products),
                n(p.block_macs),
                human(2 * p.block_macs),
                percent(p.block_macs, p.macs),
                "each layer" + (f" (dense form: {n(dense)} MACs)" if dense != p.block_macs else ""),
            ]
        )
    if L > 1 and len(p.groups) == 1:
        rows.append(
            [
                f"{L} layers",
                n(L * p.block_dot_products),
                n(L * p.block_macs),
                human(2 * L * p.block_macs),
                percent(L * p.block_macs, p.macs),
                f"{L} x the above",
            ]
        )
    rows += [product_row(r, p.macs) for r in p.after if r.kind == "matmul"]
    dense_note = f"; dense form: {n(p.dense_macs)} MACs" if p.dense_macs != p.macs else ""
    dense_note += f"; recurrent form: {n(p.recurrent_macs)} MACs" if p.recurrent_macs != p.macs else ""
    rows.append(
        ["total", n(p.dot_products), n(p.macs), human(p.flops), "100%", f"causal: {n(p.causal_macs)} MACs{dense_note}"]
    )
    return table(["layer", "dot products", "MACs", "FLOPs", "share", ""], rows, right={1, 2, 3, 4})


def decode_table(count: Count) -> str:
    shown = set(count.shown_steps())
    other = {p.step: p for p in count.other_way}
    other_label = "MACs without the cache" if count.cached else "MACs with the cache"
    attends = count.prefill.scores is not None  # a state-space model's passes have no scores: no column
    shapes = ["scores (per block)"] if attends else []
    headers = ["step", "T", "t", *shapes, "dot products", "MACs", "FLOPs", other_label]
    rows, gap = [], False
    for p in count.decodes:
        if p.step not in shown:
            if not gap:
                rows.append(["..."] + [""] * (len(headers) - 1))
                gap = True
            continue
        scores = [shape(p.scores.out_shape) if p.scores is not None else "-"] if attends else []
        rows.append([str(p.step), n(p.tokens), n(p.context), *scores, n(p.dot_products), n(p.macs), human(p.flops),
                     n(other[p.step].macs)])  # fmt: skip
    return table(headers, rows, right={0, 1, 2, *range(len(headers) - 4, len(headers))})


def ops_table(count: Count) -> str:
    """Each product's share in the prefill, in a decode step and over the whole generation, then by group."""
    columns = [(f"prefill (T={count.prefill.tokens:,})", count.prefill.ops())]
    if count.decodes:
        last = count.decodes[-1]
        columns.append((f"decode step {last.step} (T={last.tokens:,}, t={last.context:,})", last.ops()))
    columns.append(("whole generation", count.ops()))
    totals = [sum(macs for _, macs in ops.values()) for _, ops in columns]
    rows = []
    for op in count.stage_table.matmul_ops:
        if not any(op in ops for _, ops in columns):  # a product of no pass here (the chunks' in a decode-only run)
            continue
        row = [op]
        for (_, ops), total in zip(columns, totals):
            macs = ops.get(op, (0, 0))[1]
            row += [n(macs), percent(macs, total)]
        rows.append(row)
    rows.append(["total", *(x for total in totals for x in (n(total), "100%"))])
    for label, ops_in_group in groups(count):
        row = [f"  {label}"]
        for (_, ops), total in zip(columns, totals):
            macs = sum(ops.get(op, (0, 0))[1] for op in ops_in_group)
            row += [human(macs), percent(macs, total)]
        rows.append(row)
    headers = ["op"] + [x for title, _ in columns for x in (f"{title} MACs", "share")]
    return table(headers, rows, right=set(range(1, len(headers))))


def attention_lines(count: Count) -> str:
    """A decode step's attention (it grows with t) against its products with weights (they do not), counted and in
    closed form (formulas.attention_to_weights): per layer t / X, X = 2D + F for GPT-2, 2D + 1.5F for a Llama
    without grouping. A recurrent layer's scan (a hybrid's) is shown beside them: it does not grow with t either."""
    step = count.comparison_step()
    if step.scores is None:  # no attention: nothing grows with the context (the family's notes say what does not)
        return ""
    a = step.attention_vs_weights()
    c, L = count.config, count.config.n_layer
    t, context = step.attended, step.context
    if count.decodes:
        where = f"decode step {step.step}" + ("" if count.cached else " as the KV cache makes it")
    else:
        where = f"a decode step at context {context:,} (this count has none: counted for the comparison)"
    seen = f"t = {t:,}" + (f" of the {context:,} in context (the sliding window)" if t < context else "")
    products = list({r.op: r for r in step.block_records if r.kind == "matmul"}.values())
    attention_ops = ", ".join(r.op for r in products if r.stage.group == ATTENTION_SCORES)
    weight_ops = ", ".join(r.op for r in products if with_weights(r))
    scan_ops = ", ".join(r.op for r in products if r.stage.group == STATE)
    scans = hybrid(step)
    layers_weights = a.all_weights - a.outside
    each_scan, all_scan = ([n(a.all_scan // L)], [n(a.all_scan)]) if scans else ([], [])  # every layer scans alike
    layers_ratio = _ratio(Fraction(a.all_attention, layers_weights))
    rows = [
        ["each layer", n(a.attention), n(a.weights), _ratio(a.layer_ratio), *each_scan],
        [plural(L, "layer"), n(a.all_attention), n(layers_weights), layers_ratio, *all_scan],
        [f"the pass ({plural(L, 'layer')} + logits)", n(a.all_attention), n(a.all_weights), _ratio(a.ratio), *all_scan],
    ]
    if len(step.groups) > 1:  # layers of several kinds (a window on some, a dense MLP beside experts): one row each
        rows = _kind_rows(step, a, scans)
        first = next(i for i, kind in enumerate(step.layer_types) if _attends(step.groups[step._group_of[kind]][0]))
        seen = (
            f"t = {t:,} on layer {first}"
            + (f" of the {context:,} in context" if t < context else "")
            + ", each kind below"
        )
    headers = ["MACs", "attention", "products with weights", "attention / weights"] + ["scan"] * scans
    law = _closed_form_lines(c, t, context)
    return "\n".join(
        [
            f"Attention against the products with weights in {where}: T = 1 new position attending to {seen}",
            table(headers, rows, right={1, 2, 3, 4}),
            f"  attention: {attention_ops} (they grow with t); products with weights: {weight_ops}, and the logits in "
            f"the pass (they do not)"
            + (f"; scan: {scan_ops} (a recurrent layer's state, read and written: the same at any t)" if scans else ""),
            *law,
        ]
    )


def _closed_form_lines(c, t: int, context: int) -> list[str]:
    """attention_lines' closed form of a layer at t keys (of `context` in context): the t / X law and where attention
    crosses the weights, or the family's own words where its attention follows no such law."""
    flops, symbols, values = architecture_of(c).formulas.attention_vs_weights(c)
    own = architecture_of(c).formulas.decode_attention(c, context)  # a family whose attention is no t / X law
    if own is not None:
        return [f"  per layer, in closed form: attention {flops} ({values}); {own[1]}"]
    x = attention_to_weights(c)  # the tests hold t / x to the counted a.layer_ratio
    at_t = Fraction(
        attention_macs(c, 1, t), weight_macs_per_position(c, first_attending(c))
    )  # t / x, or less past an indexer's k_i
    return [
        f"  per layer, in closed form: attention {flops}, so attention / weights = {symbols} = t / {_number(x)} "
        f"({values}); at t = {t:,}: {_ratio(at_t)}",
        f"  {_crossing(c, attention_crossing(c))}",
    ]


def _attends(records: list[Record]) -> bool:
    return any(r.attention == "scores" for r in records)


def _kind_rows(step: Pass, a: AttentionVsWeights, scans: bool) -> list[list[str]]:
    """attention_lines' rows where layers are of several kinds: each kind's layer (its t, or its state), then every
    layer and the pass, with the scans' MACs beside them in a hybrid."""
    rows = []
    for kind, records, _, layers in kind_blocks(step):
        attention = sum(r.macs for r in records if r.stage.group == ATTENTION_SCORES)
        weights = sum(r.macs for r in records if with_weights(r))
        scan = sum(r.macs for r in records if r.stage.group == STATE)
        scores = next((r for r in records if r.attention == "scores"), None)
        keys = f"t = {scores.out_shape[-1]:,}" if scores is not None else "a state: the same at any t"
        rows.append(
            [f"each {kind} layer ({layers}; {keys})", n(attention), n(weights), _ratio(Fraction(attention, weights))]
            + ([n(scan)] if scans else [])
        )
    L, blocks, all_scan = step.n_layer, a.all_weights - a.outside, [n(a.all_scan)] if scans else []
    return rows + [
        [plural(L, "layer"), n(a.all_attention), n(blocks), _ratio(Fraction(a.all_attention, blocks)), *all_scan],
        [f"the pass ({plural(L, 'layer')} + logits)", n(a.all_attention), n(a.all_weights), _ratio(a.ratio), *all_scan],
    ]


def _crossing(c, x: Fraction) -> str:
    """Where attention would cost what the weights cost, against how far the model can attend."""
    at = f"attention costs what the weights cost at t = {_number(x)}"
    windows = {c.layer_window(i) for i in range(c.n_layer)}  # a full layer (None) sees the whole context
    reach = c.n_positions if None in windows else min(c.n_positions, max(w for w in windows if w is not None))
    if x <= reach:
        if None in windows and len(windows) > 1 and x > min(w for w in windows if w is not None):
            return (
                f"{at} on a full-attention layer; beyond it, attention costs more there (the context holds "
                f"{c.n_positions:,}); the sliding layers keep t at most their window, so theirs always costs less"
            )
        return f"{at}; beyond it, attention costs more (the context holds {c.n_positions:,})"
    if None not in windows and c.sliding_window is not None and c.sliding_window < c.n_positions:
        return f"{at}; the sliding window keeps t at most {c.sliding_window:,}, so attention always costs less"
    return f"{at}, beyond the context of {c.n_positions:,}: in every decode step attention costs less"


def window_lines(count: Count, dtype: str = "float32") -> list[str]:
    """Where some layers have a sliding window: how many, and what their windows save at this context, in the
    scores and mix (closed form: formulas.generation_macs with and without the windows) and in the KV cache (each
    sliding layer holds at most its window). Nothing where no layer has a window."""
    c = count.config
    windows = [c.layer_window(i) for i in range(c.n_layer)]
    local = [w for w in windows if w is not None]
    if not local:
        return []
    L, size, held = c.n_layer, DTYPE_BYTES[dtype], count.n_prompt + count.n_new - 1
    shown = ", ".join(f"{w:,}" for w in sorted(set(local)))
    full = L - len(local)
    others = f"; the other {plural(full, 'layer')} attend{'s' * (full == 1)} to every earlier position" if full else ""
    macs = [
        generation_macs(c, count.n_prompt, count.n_new, count.cached, count.batch, windows=w) for w in (True, False)
    ]
    attention = sum(
        n * r.macs
        for p in count.passes
        for records, n in p.groups
        for r in records
        if r.stage.group == ATTENTION_SCORES
    )
    saved = macs[1] - macs[0]
    kv = [kv_cache_bytes_after(c, held, count.batch, size), kv_cache_bytes(c, held, count.batch, size)]
    return [
        f"Sliding window: {len(local)} of {plural(L, 'layer')} ({percent(len(local), L)}) are local, each attending to "
        f"at most W = {shown} position{s_for(max(local))}{others}"
        + (" (this context is within the window: nothing is cut yet)" if held < min(local) else ""),
        f"  scores and mix: {n(attention)} MACs over this generation, against {n(attention + saved)} had every "
        f"layer attended to every earlier position: the window saves {human(saved)} MACs ({percent(saved, attention + saved)})",
        f"  KV cache after {plural(held, 'position', format(held, ','))} ({dtype}): {byte_size(kv[0])}, against {byte_size(kv[1])} had every layer held "
        f"all of them: the window saves {byte_size(kv[1] - kv[0])} ({percent(kv[1] - kv[0], kv[1])})",
        "",
    ]


def _number(x: Fraction) -> str:
    return f"{x.numerator:,}" if x.denominator == 1 else f"{float(x):,.2f}"


def _ratio(r: Fraction) -> str:
    return f"{float(r):.3g}"


def totals_lines(count: Count) -> str:
    t = count.totals
    decodes = len(count.decodes)
    causal = sum(p.causal_macs for p in count.passes)
    lines = [
        f"Total: {n(t.dot_products)} dot products, {n(t.macs)} MACs ({human(t.macs)}), {human(t.flops)} FLOPs over "
        f"1 prefill + {decodes:,} decode step{s_for(decodes)}; {human(t.macs / (count.n_new * count.batch))} MACs per "
        f"generated token" + (f" per sequence ({count.batch} sequences)" if count.batch > 1 else ""),
    ]
    if count.prefill.scores is not None:  # a model with attention: the part of its work the causal mask keeps
        lines.append(f"Causal: {n(causal)} of those MACs ({100 * causal / t.macs:.2f}%) are work the mask keeps")
    if t.scanned:  # a scan ran in chunks: its products against the recurrent form's (Record.recurrent)
        chunked = sum(n * r.macs for p in count.passes for r, n in p.weighted() if r.recurrent is not None)
        recurrent = sum(n * r.recurrent_macs for p in count.passes for r, n in p.weighted() if r.recurrent is not None)
        whole = (
            f"; the generation {human(t.recurrent_macs or 0)} MACs instead of {human(t.macs)}"
            if human(t.recurrent_macs or 0) != human(t.macs)
            else ""
        )
        lines.append(
            f"Recurrent form: the scans over the prompt took {n(chunked)} MACs ({human(chunked)}) in chunks, "
            f"{n(recurrent)} ({human(recurrent)}) had they run position by position as a decode step does "
            f"({chunked / recurrent:.2f}x in chunks, in products of many rows){whole}"
        )
    if t.chunked:
        lines.append(
            f"Dense form: {n(t.dense_dot_products or 0)} dot products, {n(t.dense_macs or 0)} MACs "
            f"({human(t.dense_macs or 0)}) had every T x t score been computed, as transformers' eager attention "
            f"does (--dense-attention)"
        )
    cmp = count.cache_comparison()
    with_cache, without, saved = cmp["with_cache"]["macs"], cmp["without_cache"]["macs"], cmp["saved_macs"]
    name = cache_name(r.stage.kind for r in count.prefill.block_records)
    if count.cached:
        lines.append(
            f"{capitalised(name)}: without it these tokens would cost {n(without)} MACs ({human(without)}); with it "
            f"{human(with_cache)}: it saves {human(saved)} MACs ({percent(saved, without)})"
        )
    else:
        lines.append(
            f"{capitalised(name)} (off): with it these tokens would cost {n(with_cache)} MACs ({human(with_cache)}) "
            f"instead of {human(without)}: it would save {human(saved)} "
            f"({percent(saved, without)})"
        )
    return "\n".join(lines)


def memory_lines(count: Count, balance: float, dtype: str = "float32") -> str:
    m = memory_dict(count, balance, dtype)
    out = [
        f"Memory ({dtype}, {m['bytes_per_number']} bytes a number)",
        f"  weights      {n(m['weights']['parameters'])} parameters: {byte_size(m['weights']['bytes'])} (see `params`)",
        *_kv_cache_lines(count, m),
        *_activation_lines(count, m["activations"]),
        "",
        f"Arithmetic intensity: MACs per byte moved (reading A and B and writing the product once each, {dtype});",
        f"below the machine balance, assumed {balance:.4g} MACs/byte (--balance, or --hardware's ridge), a product "
        "waits on memory",
        intensity_table(m["intensity"]["ops"], count.decode_example()),
    ]
    return "\n".join(out)


def _kv_cache_lines(count: Count, m: dict) -> list[str]:
    """What the cache holds: a position's numbers in every layer, the positions held here and at the whole context;
    a hybrid's by kind of layer (cache_lines)."""
    c, kv = count.config, m["kv_cache"]
    per_seq = " for the batch" if count.batch > 1 else ""
    widths = f"{c.d_head}" if c.d_value == c.d_head else f"{c.d_head} and {c.d_value}"  # MLA: values narrower
    heads = f" ({c.n_kv_head} key/value heads of {widths})" if architecture_of(c).heads_in_headers else ""
    numbers = f"{c.n_kv_head * c.d_head:,}" + (f" + {c.n_kv_head * c.d_value:,}" if c.d_value != c.d_head else "")
    if c.d_index is not None:  # a sparse attention's indexer keeps its own keys beside K and V
        numbers += f" + {c.d_index:,}"
        indexed = sum(1 for i in range(c.n_layer) if getattr(c.layer_cache(i), "rows", ()))  # GLM-5's shared: none
        heads += f" and the indexer's key of {c.d_index:,}" + (
            "" if indexed == c.n_layer else f" in the {indexed} layers with an indexer"
        )
    if any(k.get("compressed") for k in m["cache"]["layer_types"].values()):  # DeepSeek-V4's compressed streams
        return stream_lines(count, m, per_seq)
    if any(k.get("state") for k in m["cache"]["layer_types"].values()):
        # a hybrid: the attention layers' keys and values grow with the context, the recurrent layers' state not
        return cache_lines(count, m, numbers, heads, per_seq)
    window, held = c.sliding_window, count.n_prompt + count.n_new - 1
    capped = f" (of {held:,}: a query reads no further back than the sliding window)" if kv["positions"] < held else ""
    whole = f", at most the sliding window of {window:,}" if window is not None and window < c.n_positions else ""
    here = f"{plural(kv['positions'], 'position', format(kv['positions'], ','))} here{capped}"
    kinds = kv["layer_types"]
    if len(kinds) > 1:  # layers that hold different numbers of positions (a window on some)
        here = "positions here by layer type, " + ", ".join(
            f"{kind} {k['layers']} x {k['positions']:,}" for kind, k in kinds.items()
        )
        whole = ", each sliding layer at most its window" if window is not None and window < c.n_positions else ""
    return [
        f"  KV cache     {_kv_layers(c, numbers, heads)}: "
        f"{byte_size(kv['bytes_per_token'])} per token{per_seq}; {here}: "
        f"{byte_size(kv['bytes'])}"
        + ("" if count.cached else " (if the cache were on)")
        + f"; the whole context ({c.n_positions:,}{whole}): {byte_size(kv['bytes_at_context'])}"
    ]


def _kv_layers(c, numbers: str, heads: str) -> str:
    """What each layer's K and V are: L layers of one width, or, where layers differ in their key/value heads or some
    read another layer's (Gemma 4's), each width with its layers and the layers that keep none."""
    specs = [c.layer_cache(i) for i in range(c.n_layer)]
    own = [s for s in specs if getattr(s, "reads", None) is None]
    widths = {(s.heads, s.d_key) for s in own}
    if len(own) == len(specs) and len(widths) < 2:
        return f"K and V x {plural(c.n_layer, 'layer')} x {numbers} numbers{heads}"
    each = ", ".join(
        f"{sum((s.heads, s.d_key) == w for s in own)} with {plural(w[0], 'key/value head')} of {w[1]}"
        for w in sorted(widths)
    )
    shared = f"; the other {len(specs) - len(own)} read an earlier layer's" if len(own) < len(specs) else ""
    return f"K and V of {plural(len(own), 'layer')} ({each}){shared}"


def _activation_lines(count: Count, act: dict) -> list[str]:
    """The peak activations of the prefill and a decode step, and how they are estimated (memory.py)."""
    decode, scores = act.get("decode"), count.prefill.scores
    estimate: tuple[str, ...]
    if scores is None:  # every layer a state-space mixer (Mamba, Mamba-2)
        estimate = (
            "the residual stream [B, T, D] + the largest stage's working set (a product: its A and its",
            "output; an elementwise stage: its input and output)",
        )
    elif any(r.op in ("mlp.gate", "mlp.gate_up") for r in count.prefill.block):  # gated: memory.py's estimate says why
        estimate = (
            "the residual stream [B, T, D] and the mask [T, t] + the largest stage's working set",
            "(Q K^T: Q and the scores [B, H, T, t]; MLP: g, u and act(g), [B, T, F] each)",
        )
    else:
        estimate = (
            "the residual stream [B, T, D] and the mask [T, t] + the largest stage's working set",
            "(Q K^T: Q and the scores [B, H, T, t], which scale, mask and softmax overwrite in place;",
            "MLP: u and act(u), [B, T, F] each)",
        )
    chunked = scores is not None and scores.computed is not None  # a prefill in row chunks holds one chunk at a time
    if any(in_scan(r) for p in count.passes[:2] for r, _ in p.weighted()):  # memory.py's scan_alive
        estimate += (
            "in a recurrent layer's scan, the arrays its layer made before the scan's first product (in chunks, their",
            "chunked copies and decays) beside the scan's largest stage",
        )
    return [
        f"  activations  peak ~{byte_size(act['prefill']['bytes'])} in the prefill (at {act['prefill']['stage']})"
        + (f", ~{byte_size(decode['bytes'])} in a decode step (at {decode['stage']})" if decode else ""),
        f"               estimate: {estimate[0]}",
        *(f"               {line}" for line in estimate[1:]),
        *(
            [
                f"               (a prefill past {scores.row_chunk} positions computes attention in row "
                f"chunks: it holds the normed input,",
                "               q, k, v, the largest chunk's scores and the output instead"
                + (", and that chunk's chosen keys and values)" if scores.chosen_keys else ")"),
            ]
            if chunked and scores is not None
            else []
        ),
    ]


def stream_lines(count: Count, m: dict, per_seq: str) -> list[str]:
    """A cache of streams side by side (DeepSeek-V4's), by kind of layer: the window's keys (K = V, kept once), each
    compressed stream's entries (one every m positions), the compressors' state; the whole after the positions
    counted and at the context."""
    c, cache = count.config, m["cache"]
    off = "" if count.cached else " (if the cache were on)"
    per_number = m["bytes_per_number"]
    out = [f"  KV cache     by stream after {cache['positions']:,} positions{per_seq}{off}:"]
    for kind, k in cache["layer_types"].items():
        streams = "; ".join(f"{what}: {byte_size(b)}" for _, what, b in cache_streams(k))
        out.append(f"               {plural(k['layers'], kind + ' layer')}: {streams}")
    out.append(
        f"  cache        {byte_size(cache['bytes'])} ({byte_size(cache['bytes'] // per_number * 2)} in bfloat16); "
        f"the whole context ({c.n_positions:,}): {byte_size(cache['bytes_at_context'])}"
    )
    return out


def cache_lines(count: Count, m: dict, numbers: str, heads: str, per_seq: str) -> list[str]:
    """A hybrid's cache, by kind of layer: the attention layers' keys and values (a position's numbers, times the
    positions held), the recurrent layers' state (the same after one token as after the whole context), the whole."""
    c, kv, cache = count.config, m["kv_cache"], m["cache"]
    off = "" if count.cached else " (if the cache were on)"
    out = []
    for kind, k in cache["layer_types"].items():
        state = k.get("state_bytes", k["bytes"] if k.get("state") else 0)  # a hybrid layer keeps both (Falcon-H1's)
        if "positions" in k:
            held = k["bytes"] - state
            out.append(
                f"  KV cache     K and V x {plural(k['layers'], kind + ' layer')} x {numbers} numbers{heads}: "
                f"{byte_size(held // max(k['positions'], 1))} per token{per_seq}; {k['positions']:,} positions "
                f"here: {byte_size(held)}{off}"
            )
        if k.get("state"):
            arrays = " + ".join(f"{name} {shape(tuple(dims))}" for name, dims in k["state"].items())
            out.append(
                f"  state        {arrays} numbers x {plural(k['layers'], kind + ' layer')}: "
                f"{byte_size(state)}{per_seq}{off}, the same at any context"
            )
    attends = any("positions" in k for k in cache["layer_types"].values())  # no keys and values in a pure Mamba
    parts = (
        f"{byte_size(kv['bytes'])} keys and values + " if attends else ""
    ) + f"{byte_size(cache['state_bytes'])} state"
    out.append(
        f"  cache        {byte_size(cache['bytes'])} after {cache['positions']:,} positions ({parts}){off}; the whole "
        f"context ({c.n_positions:,}): {byte_size(cache['bytes_at_context'])}"
    )
    return out


def intensity_table(rows: list[dict], decode: Pass | None) -> str:
    def cells(x: dict | None) -> list[str]:
        if x is None:  # a product this pass does not compute
            return ["-", "", ""]
        return [
            byte_size(x["bytes"]),
            intensity(x["macs_per_byte"]),
            "memory-bound" if x["memory_bound"] else "compute-bound",
        ]

    blank = ["", "", "-"] if decode is not None else []  # a product of the prefill's chunks only: no decode step has it
    body = [[r["op"], *cells(r["prefill"]), *(cells(r["decode"]) if "decode" in r else blank)] for r in rows]
    headers = ["op", "prefill bytes", "MACs/byte", "bound"]
    if decode is not None:
        headers += [f"decode (T=1, t={decode.context:,}) bytes", "MACs/byte", "bound"]
    return table(headers, body, right={1, 2, 4, 5})
