"""Draw the attention pattern of one layer (every head, or one) to a PNG.

    python examples/attention_png.py                                   # layer 0, all heads, attention.png
    python examples/attention_png.py --layer 5 --head 3 --out head.png --model DIR --prompt "..."

Rows are query positions (the token doing the looking), columns are key positions (the tokens looked
at); the upper triangle is the masked future. Needs matplotlib: pip install 'minitransformer[plot]'.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from minitransformer import UserError, load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model name or directory (default: load_model()'s choice)")
    parser.add_argument("--prompt", default="The capital of France is")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--head", type=int, default=None, help="one head (default: all of them, side by side)")
    parser.add_argument("--out", default="attention.png")
    args = parser.parse_args()

    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no window, works without a display
        import matplotlib.pyplot as plt
    except ImportError:
        parser.exit(2, "attention_png.py needs matplotlib: pip install 'minitransformer[plot]'\n")

    model = load_model(args.model)
    c = model.config
    if not 0 <= args.layer < c.n_layer:
        parser.error(f"--layer must be 0..{c.n_layer - 1}")
    if args.head is not None and not 0 <= args.head < c.n_head:
        parser.error(f"--head must be 0..{c.n_head - 1}")
    ids = model.tokenizer.encode(args.prompt)
    name = f"blocks.{args.layer}.attn.weights"
    _, cache = model.run_with_cache(ids, names=name)
    weights = cache[name]  # [H, T, T]: heads first
    labels = [repr(model.tokenizer.token_str(i))[1:-1] for i in ids]  # repr keeps leading spaces and newlines visible

    heads = range(c.n_head) if args.head is None else [args.head]
    columns = min(4, len(heads))
    rows = math.ceil(len(heads) / columns)
    cell = max(2.6, 0.42 * len(ids) + 1.2)
    fig, axes = plt.subplots(rows, columns, figsize=(cell * columns + 1.2, cell * rows + 0.9), squeeze=False)
    for ax in axes.flat[len(heads) :]:
        ax.axis("off")
    future = np.triu(np.ones((len(ids), len(ids)), dtype=bool), k=1)
    colors = plt.get_cmap("viridis").copy()
    colors.set_bad("#e8e8e8")  # the masked future in grey, apart from weights that are merely small
    for n, (ax, head) in enumerate(zip(axes.flat, heads)):
        image = ax.imshow(np.ma.masked_array(weights[head], future), cmap=colors, vmin=0, vmax=1)
        ax.set_xticks(range(len(ids)), labels, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(ids)), labels if n % columns == 0 else [], fontsize=8)  # labels once per row
        ax.set_title(f"head {head}", fontsize=10)
        if len(heads) == 1 and len(ids) <= 16:  # one head: the numbers themselves fit in the cells
            for i in range(len(ids)):
                for j in range(i + 1):
                    w = weights[head, i, j]
                    ax.text(
                        j, i, f"{w:.2f}", ha="center", va="center", fontsize=7, color="black" if w > 0.6 else "white"
                    )
    axes[0, 0].set_ylabel("query (looking)")
    axes[-1, 0].set_xlabel("key (looked at)")
    which = "all heads" if args.head is None else f"head {args.head}"
    fig.suptitle(f"{model.name}: attention weights, layer {args.layer}, {which}\n{args.prompt!r} (grey: masked future)",
                 fontsize=11)  # fmt: skip
    fig.colorbar(image, ax=axes, shrink=0.8, label="weight (each row sums to 1)")
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"{args.out}: {model.name} layer {args.layer}, {which}, {len(ids)} tokens ({list(weights.shape)} weights)")


if __name__ == "__main__":
    try:
        main()
    except UserError as err:  # no model here, a prompt the model cannot take...: say so in one line
        raise SystemExit(f"attention_png.py: {err}") from None
