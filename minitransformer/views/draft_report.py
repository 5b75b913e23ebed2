"""count --mtp's section: the MTP passes, each its own phase beside the main pass of the same step, with what each
costs (eh_proj, the MTP layers' blocks, their logits) and what a drafted token costs; read from the ledger."""

from __future__ import annotations

from ..text import count as n
from ..text import human, percent, plural, table
from ..verbs.draft import DraftCount

OWN = ("eh_proj", "logits")  # an MTP layer's products beside its block's


def draft_report(draft: DraftCount) -> str:
    c, main = draft.count.config, draft.count.passes
    layers = ", ".join(f"layers.{c.n_layer + k}" for k in range(draft.n_mtp))
    rows = []
    for p, beside in zip(draft.passes, main):
        macs = {op: sum(r.macs for r in p.records if r.op == op) for op in OWN}
        block = p.macs - sum(macs.values())
        counts = [p.tokens, p.context, macs["eh_proj"], block, macs["logits"], p.macs]
        rows.append([f"mtp step {p.step}", *map(n, counts), percent(p.macs, beside.macs)])
    total = sum(p.macs for p in main)
    rows.append(["all", "", "", "", "", "", n(draft.macs), percent(draft.macs, total)])
    last, beside = draft.passes[-1], main[-1]
    per_token, rows_of = draft.per_drafted_token(), f" for its {last.batch} rows)" if last.batch > 1 else ")"
    header = ["pass", "T", "t", "eh_proj MACs", "block MACs", "logits MACs", "MACs", "of the main pass"]
    title = (
        f"The draft: multi-token prediction, its own phase ({plural(draft.n_mtp, 'MTP layer')}: {layers}), a pass "
        f"beside each pass of the main model, each drafting {plural(draft.n_mtp, 'token')}"
    )
    drafted = (
        f"a drafted token: {n(per_token)} MACs ({human(2 * per_token)}FLOPs) in the MTP pass at t = {n(last.context)}, "
        f"{percent(last.macs, beside.macs)} of the main model's pass beside it ({n(beside.macs)} MACs{rows_of}"
    )
    return "\n".join([title, table(header, rows, right={1, 2, 3, 4, 5, 6, 7}), drafted])
