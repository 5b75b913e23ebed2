"""crosscheck's text: our ledger beside torch's dispatched products and its FlopCounterMode, group by group, and why
they differ. Everything here reads a `Crosscheck` (verbs/crosscheck.py); nothing is counted here."""

from __future__ import annotations

from ..text import count as n
from ..text import short_path, table
from ..verbs.crosscheck import Crosscheck

COLUMNS = (
    ("ledger_macs", "ours, as computed"),
    ("ledger_dense_macs", "ours, dense form"),
    ("dispatch_macs", "torch dispatched (eager)"),
    ("flop_counter_macs", "FlopCounterMode (eager)"),
    ("flop_counter_sdpa_macs", "FlopCounterMode (SDPA)"),
)


def _cell(macs: int | None) -> str:
    return "-" if macs is None else n(macs)


def crosscheck_report(check: Crosscheck) -> str:
    groups = check.groups()
    model = check.model
    versions = ", ".join(f"{k} {v}" for k, v in check.versions.items())
    how = "every T x t score (--dense-attention)" if check.dense else "attention in row chunks past 128 positions"
    rows = [[g["group"], *(_cell(g[key]) for key, _ in COLUMNS)] for g in groups]
    rows.append(
        ["total", *(_cell(None if groups[0][key] is None else sum(g[key] for g in groups)) for key, _ in COLUMNS)]
    )
    out = [
        f"crosscheck of {model.name} ({short_path(model.source)}): one forward over {len(check.ids):,} positions, every "
        f"position's logits, ours ({how}) and transformers' {check.reference_class} ({versions}), in MACs",
        table(["group", *(title for _, title in COLUMNS)], rows, right=set(range(1, len(COLUMNS) + 1))),
        "",
        "  dispatched: every matrix product torch ran (aten mm, addmm, bmm, baddbmm, _grouped_mm, ...), m p n MACs each;",
        "  FlopCounterMode: torch.utils.flop_counter's FLOPs / 2; groups by operand: a product reading the output",
        "  embedding (logits), another parameter (with weights), or only what the pass computed (of activations)",
        "",
        "Why the columns differ:",
    ]
    for g in groups:
        torch_ops = ", ".join(f"{op} {n(macs)}" for op, macs in g["torch_ops"].items()) or "none"
        out.append(f"  {g['group']} (ours: {', '.join(g['ops']) or 'none'}; torch: {torch_ops})")
        out += [f"    - {reason}" for reason in g["reasons"]]
    return "\n".join(out)
