"""The colours every view draws with, each meaning one thing: a kind of matrix product (engine/stages.py's PRODUCTS,
a stage's `product`), or a kind of layer (the layer pattern's), from palettes that share no colour.

A product is coloured by its stage's kind of product, never by its op name: a family whose stages say their kinds is
drawn, in the plots and on the page, without a line here.
"""

from __future__ import annotations

from ..engine.stages import PRODUCTS, Stage

# Blues for projections, orange for attention, red for a scan and teal for its conv, greens for what an MLP computes
# (lighter for experts), yellow for the router, cyan for hyper-connections' streams, purple for the logits.
PRODUCT_COLOURS = {
    "projection": "#4e79a7",
    "attention": "#e8892b",
    "conv": "#76b7b2",
    "scan": "#e15759",
    "mlp": "#59a14f",
    "router": "#edc948",
    "expert": "#8cd17d",
    "streams": "#17becf",
    "logits": "#9c6ba3",
}
assert PRODUCT_COLOURS.keys() == PRODUCTS.keys(), "a colour for every kind of product, and none for another"
NOT_A_PRODUCT = "#888888"  # a stage without dot products

# The kinds of layer (a hybrid's linear or state-space layers beside its attention, sliding and full, dense and
# experts), in the order they first come: browns, pinks, greys and dark blue, each far from every product's colour.
LAYER_COLOURS = ("#9d7660", "#f1a7c9", "#5f5f5f", "#d7b5a6", "#7b3f61", "#2f4f4f", "#000080", "#6b4226")


def product_colour(stage: Stage | None) -> str:
    """The colour of a stage's kind of product (grey for a stage that is not a product, or None)."""
    return PRODUCT_COLOURS[stage.product] if stage is not None and stage.kind == "matmul" else NOT_A_PRODUCT


def layer_colour(index: int) -> str:
    """The colour of the index-th kind of layer (repeating past the palette's end)."""
    return LAYER_COLOURS[index % len(LAYER_COLOURS)]
