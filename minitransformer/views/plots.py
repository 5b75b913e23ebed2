"""Plots of a count (matplotlib, the optional `plot` extra): one PNG with three panels.

1. MAC share by op: the prefill, one decode step and the whole generation.
2. Dot products against their length, one point per op of each kind of layer (log-log), in its kind of product's
   colour (views/colours.py): Q K^T is many short dot products, the MLP down projection few long ones; the dashed
   diagonals are equal MACs (count x length).
3. MACs to generate one token against the context length, with and without the KV cache, across
   the model's whole context window (each point a shape-only pass); the band is this generation.
"""

from __future__ import annotations

import io
import math

from ..errors import UserError
from ..text import human, plural
from ..verbs.count import Count
from .colours import product_colour
from .report import cache_name


def require_matplotlib():
    """matplotlib.pyplot with a file-only backend, or a one-line error that says how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(
            "--plot needs matplotlib: pip install 'minitransformer[plot]' (or pip install matplotlib)"
        ) from None
    return plt


def plots_png(count: Count, sweep: dict[str, list[int]]) -> bytes:
    """The three panels drawn whole, as PNG bytes, for the CLI to write (files.write_together). `sweep`: the MACs of
    one token across the context, with and without the cache (verbs/count.py's sweep_per_token)."""
    plt = require_matplotlib()
    columns = _share_columns(count)
    ops = _shared_ops(count)
    fig, (share, dots, per_token) = plt.subplots(1, 3, figsize=(WIDTH, figure_height(len(ops))), dpi=DPI)
    c = count.config
    cache = (
        f"with the {cache_name(r.stage.kind for r in count.prefill.block_records)}"
        if count.cached
        else "without a cache"
    )
    kv = f" ({c.n_kv_head} key/value)" if c.n_kv_head != c.n_head else ""
    kv += f", sliding window {c.sliding_window:,}" if c.sliding_window is not None else ""
    layers, heads = plural(c.n_layer, "layer", f"{c.n_layer:,}"), plural(c.n_head, "head", f"{c.n_head:,}")
    new = plural(count.n_new, "new token", f"{count.n_new:,}")
    fig.suptitle(
        f"{c.name}: {layers}, d_model {c.n_embd:,}, {heads}{kv}, d_ff {c.d_ff:,}, vocab {c.vocab_size:,} | "
        f"{count.n_prompt:,}-token prompt, {new}, batch {count.batch}, {cache} (counted from shapes)",
        fontsize=13,
    )
    _share_panel(share, columns, ops)
    _dots_panel(dots, count)
    _per_token_panel(per_token, count, sweep)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    # tight_layout leaves a placeholder engine behind, and savefig draws a figure that has an engine twice (the first
    # to lay it out, rendering nothing): the layout is done, so once (the same PNG; DeepSeek-V3's 1.31 s against 1.64)
    fig.set_layout_engine(None)
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png")
    finally:
        plt.close(fig)
    return png.getvalue()


# The figure: 19 x 6.2 inches at 100 dots an inch (1,900 x 620 pixels), taller where the first panel has more products
# than fit: each product's three bars and their labels need about 0.4 inch.
WIDTH, HEIGHT, DPI = 19.0, 6.2, 100
_MARGINS, _PER_OP = 1.9, 0.4


def figure_height(products: int) -> float:
    """The figure's height in inches for a share panel of `products` products."""
    return max(HEIGHT, _MARGINS + _PER_OP * products)


def _share_columns(count: Count) -> list[tuple[str, dict[str, tuple[int, int]], str]]:
    """(label, op -> (dot products, MACs), colour) of the prefill, the last decode step and the whole generation."""
    columns = [(f"prefill (T={count.prefill.tokens:,})", count.prefill.ops(), "#9ecae1")]
    if count.decodes:
        last = count.decodes[-1]
        columns.append((f"decode step {last.step} (T={last.tokens:,}, t={last.context:,})", last.ops(), "#3182bd"))
    columns.append(("whole generation", count.ops(), "#08519c"))
    return columns


def _shared_ops(count: Count) -> list[str]:
    """The products some pass computed, in the order a pass runs them (a prefill's chunked scan and a decode step's
    recurrent one are different products; a product of a kind of layer the model has not, none)."""
    computed = {op for p in count.passes for op in p.ops()}
    return [op for op in count.stage_table.matmul_ops if op in computed]


def _share_panel(ax, columns, ops: list[str]) -> None:
    height = 0.8 / len(columns)
    for k, (label, totals, color) in enumerate(columns):
        whole = sum(macs for _, macs in totals.values())
        shares = [100 * totals[op][1] / whole if op in totals else 0.0 for op in ops]
        ys = [i + (k - (len(columns) - 1) / 2) * height for i in range(len(ops))]
        ax.barh(ys, shares, height=height, color=color, label=label)
        for op, y, value in zip(ops, ys, shares):
            if op in totals:  # a product this column's passes do not compute has no label
                ax.text(value + 0.8, y, f"{value:.1f}%" if value >= 0.05 else "<0.1%", va="center", fontsize=8.5)
    ax.set_yticks(range(len(ops)), ops, fontsize=11)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the MACs (%)", fontsize=11)
    ax.set_title("Where the MACs go, by op", fontsize=12)
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


# Label offsets (points) that keep ops with the same dot-product length apart (qkv, out, mlp.up share D).
_LABEL_OFFSET = {"qkv": (8, -10), "mlp.up": (8, 2), "out": (8, -4), "logits": (8, -4)}


def _dots_panel(ax, count: Count) -> None:
    passes = [("prefill", count.prefill, "o", True)]
    if count.decodes:
        passes.append((f"decode step {count.decodes[-1].step}", count.decodes[-1], "s", False))
    xs, ys = [], []
    same_logits = bool(count.decodes) and count.decodes[-1].find("logits") == count.prefill.find("logits")
    for _, p, marker, filled in passes:
        labels: dict[tuple, list] = {}  # ops that land on (nearly) the same point share one label ("scores, mix")
        # every kind of layer's products (a hybrid's scans beside its attention, experts beside a dense MLP), each
        # point once where kinds of layer compute the same product
        products = {(r.op, r.dot_length, r.dot_products): r for r in p.block_records + p.after if r.kind == "matmul"}
        drawn: dict[tuple, int] = {}  # products of the same shape land on one point: each later one drawn smaller
        for r in products.values():
            color = product_colour(r.stage)  # its kind of product's (views/colours.py)
            under = drawn[r.dot_length, r.dot_products] = drawn.get((r.dot_length, r.dot_products), -1) + 1
            ax.scatter(
                r.dot_length,
                r.dot_products,
                s=90 / (1 + under),
                marker=marker,
                zorder=3,
                linewidths=1.6,
                facecolors=color if filled else "none",
                edgecolors=color,
            )
            xs.append(r.dot_length)
            ys.append(r.dot_products)
            if not filled and r.op == "logits" and same_logits:
                continue  # the same point as the prefill's
            spot = (math.log10(r.dot_length), math.log10(r.dot_products))
            near = next((s for s in labels if abs(s[0] - spot[0]) < 0.15 and abs(s[1] - spot[1]) < 0.06), spot)
            labels.setdefault(near, []).append(r)
        for group in labels.values():
            r = group[0]
            dx, dy = _LABEL_OFFSET.get(r.op, (8, -4))
            left = not filled and r.op != "mlp.down"  # decode labels on the left, clear of the prefill's
            color = product_colour(r.stage) if len(group) == 1 else "#444"
            ax.annotate(
                ", ".join(g.op for g in group),
                (r.dot_length, r.dot_products),
                xytext=(-dx if left else dx, dy),
                fontsize=9.5,
                ha="right" if left else "left",
                textcoords="offset points",
                color=color,
            )
    ax.set_xscale("log"), ax.set_yscale("log")
    _in_words(ax.xaxis, ax.yaxis)
    lo_x, hi_x, lo_y, hi_y = min(xs) / 3, max(xs) * 6, min(ys) / 4, max(ys) * 6
    ax.set_xlim(lo_x, hi_x), ax.set_ylim(lo_y, hi_y)
    _iso_macs(ax, lo_x, hi_x, lo_y, hi_y)
    for label, _, marker, filled in passes:
        ax.scatter([], [], marker=marker, s=70, facecolors="#555" if filled else "none", edgecolors="#555", label=label)
    ax.legend(loc="best", fontsize=9)
    ax.set_xlabel("dot-product length (MACs per dot product)", fontsize=11)
    ax.set_ylabel("dot products (per layer; logits per pass)", fontsize=11)
    ax.set_title("Many short dot products or few long ones", fontsize=12)
    ax.grid(which="major", alpha=0.3)


def _in_words(*axes) -> None:
    """Log axes' ticks labelled as the rest of the page says numbers (1 K, 10 M: text.human), where matplotlib writes
    powers of ten in its math text, whose parser it builds at its first use (about 0.1 s of a plot's 1.0 to 1.5). The
    same ticks get labels as matplotlib's own formatter gives them."""
    from matplotlib.ticker import LogFormatter

    class InWords(LogFormatter):
        def __call__(self, x, pos=None) -> str:
            return human(x) if super().__call__(x, pos) else ""

    for axis in axes:
        axis.set_major_formatter(InWords())
        axis.set_minor_formatter(InWords())


def _iso_macs(ax, lo_x, hi_x, lo_y, hi_y) -> None:
    """Dashed diagonals of equal MACs (dot products x length), one per power of 1000, labelled where they enter
    the plot (the top edge, or the left one): the margins the limits leave free of points."""

    first, last = math.floor(math.log10(lo_x * lo_y)), math.ceil(math.log10(hi_x * hi_y))
    for exponent in range(first, last + 1):
        if exponent % 3:
            continue
        macs = 10.0**exponent
        ax.plot([lo_x, hi_x], [macs / lo_x, macs / hi_x], ls="--", lw=0.8, color="#bbb", zorder=1)
        label = f"{human(macs)} MACs"
        if lo_x <= macs / hi_y <= hi_x / 2:  # enters through the top
            ax.text(macs / hi_y * 1.1, hi_y / 1.15, label, fontsize=8, color="#888", ha="left", va="top")
        elif lo_y <= macs / lo_x <= hi_y:  # enters through the left edge
            ax.text(lo_x * 1.1, macs / lo_x / 1.15, label, fontsize=8, color="#888", ha="left", va="top")
    ax.plot([], [], ls="--", lw=0.8, color="#bbb", label="equal MACs (count x length)")


def _per_token_panel(ax, count: Count, sweep: dict[str, list[int]]) -> None:
    for key, colour, label in (
        ("without_cache", "#c44e52", "without the cache (recompute all t positions)"),
        (
            "with_cache",
            "#4c72b0",
            f"with the {cache_name(r.stage.kind for r in count.prefill.block_records)} (1 new position)",
        ),
    ):
        ax.plot(sweep["context"], sweep[key], marker="o", ms=4, color=colour, label=label)
    ax.set_yscale("log")
    _in_words(ax.yaxis)
    end = count.n_prompt + count.n_new - 1
    ax.axvspan(
        count.n_prompt,
        max(end, count.n_prompt + 0.5),
        color="#f2c14e",
        alpha=0.35,
        label=f"this generation (t = {count.n_prompt:,}..{end:,})",
    )
    ax.set_xlim(0, count.config.n_positions)
    ax.set_xlabel("context length t (positions attended)", fontsize=11)
    ax.set_ylabel("MACs to generate one token (one sequence)", fontsize=11)
    ax.set_title("Cost of the next token as the context grows", fontsize=12)
    ax.legend(loc="center right", fontsize=9)
    ax.grid(which="major", alpha=0.3)
