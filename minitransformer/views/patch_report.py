"""Activation patching as text: a row per layer (and head), a column per position, the share of the logit difference
each patch restores; the positions where the prompts differ; the bill."""

from __future__ import annotations

import numpy as np

from ..verbs.patch import SHARE_CONVENTIONS, Patching


def patch_report(patching: Patching, decode) -> str:
    word = lambda i: repr(decode([i]))  # noqa: E731 - a name for the one way tokens are shown here
    pieces = [word(i) for i in patching.clean]
    width = max(7, *(len(p) for p in pieces))
    differ = [f"{word(a)} / {word(b)}" for a, b in zip(patching.clean, patching.corrupt, strict=True) if a != b]
    shown = [
        f"activation patching of {len(pieces)} tokens: {word(patching.target)} (id {patching.target}) versus "
        f"{word(patching.versus)} (id {patching.versus}), logit difference clean {patching.clean_difference:.4f}, "
        f"corrupted {patching.corrupt_difference:.4f}",
        SHARE_CONVENTIONS,
        f"positions where the prompts differ: {', '.join(differ) or 'none'}",
        "the stream block l reads (hook_resid_pre), patched at one position:",
        _table("", pieces, width, [(f"block {i}", row) for i, row in enumerate(patching.residual)]),
    ]
    if patching.heads is not None and not patching.head_layers:
        shown += ["each head's output (attn.hook_z): no layer of this model has attention heads to patch"]
    elif patching.heads is not None:
        heads = patching.heads  # [layer, position, head]
        rows = [(f"block {i} head {h}", heads[i, :, h]) for i in patching.head_layers for h in range(heads.shape[-1])]
        shown += ["each head's output (attn.hook_z), patched at one position:", _table("", pieces, width, rows)]
    return "\n".join([*shown, *patching.bill.lines()])


def _table(corner: str, pieces: list[str], width: int, rows: list[tuple[str, np.ndarray]]) -> str:
    label = max([len(corner), *(len(name) for name, _ in rows)])
    lines = [f"{corner:<{label}}" + "".join(f"  {p:>{width}}" for p in pieces)]
    lines += [f"{name:<{label}}" + "".join(f"  {_share(v):>{width}}" for v in row) for name, row in rows]
    return "\n".join(lines)


def _share(value: float) -> str:
    """A share to 3 decimals, a rounding error's -0.000 shown as the 0.000 it is."""
    shown = f"{value:.3f}"
    return "0.000" if shown == "-0.000" else shown
