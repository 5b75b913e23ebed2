"""The parameter table: kind by kind, each tensor once per pattern, then the total and what the weights weigh.

A view of `params.parameters(config)` (verbs/params.py), which counts; nothing is counted here.
"""

from __future__ import annotations

import re
from math import prod

from ..families.table import architecture_of
from ..text import count, human, percent, plural, shape, table
from ..verbs.params import Parameters, kinds_of


def _pattern(name: str, layers: str) -> str:
    name = re.sub(r"\.experts\.\d+\.", ".experts.{e}.", name)  # a mixture of experts: one row for the E experts
    return re.sub(rf"^({re.escape(layers)})\.\d+\.", r"\1.{i}.", name)


def params_report(p: Parameters) -> str:
    """Kind by kind, each tensor once per pattern (h.{i}.… or layers.{i}.… stands for every layer), then the total."""
    total = p.total
    rows = _rows(p)
    c = p.config
    layers = architecture_of(c).layout.layers
    heads = ""
    if architecture_of(c).heads_in_headers:
        kv = f" sharing {c.n_kv_head} key/value heads" if c.n_kv_head != c.n_head else ""
        heads = f", {plural(c.n_head, 'head')} of {c.d_head}{kv}"
    d_ff = f", d_ff {c.d_ff:,}" if "n_head" in c.to_dict() else ""  # a model without attention has no MLP width here
    header = (
        f"Parameters of {c.name}: {plural(c.n_layer, 'layer')}, d_model {c.n_embd:,}{heads}{d_ff}, "
        f"vocab {c.vocab_size:,}, context {c.n_positions:,}; "
        + (
            f"{layers}.{{i}} stands for each of the {c.n_layer} layers"
            if c.n_layer > 1
            else f"{layers}.0 is the one layer"
        )
    )
    tied = (
        "Tied embeddings: W_te turns tokens into vectors and, transposed, vectors into logits; it is one tensor."
        if p.tied_embeddings
        else "Untied embeddings: the unembedding "
        + next((t.name for t in p.tensors if t.kind == "unembedding"), "lm_head.weight")
        + " is a separate tensor."
    )
    experts = active = ""
    if p.routed:
        if any("experts.{e}" in row[0] for row in rows):  # not where the experts are fused in 3-D tensors
            experts = f"; experts.{{e}} for each of the {c.n_experts} experts of a layer"
        active = (
            f"\n{count(p.active)} of them active ({human(p.active)}): what one token's pass reads, {c.top_k} of "
            f"the {c.n_experts} experts of each layer and everything else whole (the embedding too, though a "
            f"token reads one row of it: model cards differ here, Mixtral's counting it and gpt-oss's not"
            + ("" if c.tie_word_embeddings else f"; without it, {count(p.active - c.vocab_size * c.n_embd)}")
            + ")."
        )
    return "\n".join(
        [
            header + experts,
            table(["tensor", "shape", "layers", "each", "count", "share"], rows, right={3, 4, 5}),
            "",
            f"{count(total)} parameters ({human(total)}); float32 weights: {human(4 * total)}B, bfloat16 or float16: "
            f"{human(2 * total)}B. {tied}{active}",
        ]
    )


def _rows(p: Parameters) -> list[list[str]]:
    """A row for each kind of parameter, then its tensors, each pattern once with the layers it stands for; the
    total last."""
    rows = []
    for kind, kind_total in p.kinds.items():
        label = kinds_of(p.config)[kind]
        if kind == "token_embedding" and p.tied_embeddings:
            label += ", also the unembedding (tied: counted once)"
        rows.append([label, "", "", "", count(kind_total), percent(kind_total, p.total)])
        groups: dict[tuple[str, tuple[int, ...]], int] = {}
        for t in p.tensors:
            if t.kind == kind:
                key = (_pattern(t.name, architecture_of(p.config).layout.layers), t.shape)
                groups[key] = groups.get(key, 0) + 1
        for (pattern, dims), n in groups.items():
            each = prod(dims)
            rows.append([f"  {pattern}", shape(dims), f"x {n}" if n > 1 else "", count(each), count(each * n), ""])
    return rows + [["total", "", "", "", count(p.total), "100%"]]
