"""Every weight tensor of a model by its Hugging Face name, with its shape, size and kind: the parameter count.

The list is `weights.expected_shapes(config)`, the same one the loader checks checkpoints against,
so the count cannot drift from what the model loads. With tied embeddings (GPT-2's default, and
some Llama-family models') the token embedding W_te is also the unembedding: one tensor, counted once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from ..families.config import ModelConfig
from ..families.table import ARCHITECTURES, architecture_of
from ..models.weights import expected_shapes

def kind_of(name: str, config: ModelConfig | None = None) -> str:
    """The kind of a tensor name in the checkpoint layout of the config's family (families/*/layout.py), or of any
    family in the table when no config is given."""
    for architecture in [architecture_of(config)] if config is not None else ARCHITECTURES.values():
        kind = architecture.kind(name)
        if kind is not None:
            return kind
    raise ValueError(f"no kind for weight tensor {name!r}")


@dataclass(frozen=True)
class Tensor:
    name: str  # Hugging Face name without the "transformer." prefix: "h.3.attn.c_attn.weight"
    shape: tuple[int, ...]
    kind: str

    @property
    def count(self) -> int:
        return prod(self.shape)

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "count": self.count, "kind": self.kind}


def kinds_of(config: ModelConfig) -> dict[str, str]:
    """The kinds of a config's family, described."""
    return architecture_of(config).kinds


@dataclass(frozen=True)
class Parameters:
    config: ModelConfig
    tensors: tuple[Tensor, ...]

    @property
    def total(self) -> int:
        return sum(t.count for t in self.tensors)

    @property
    def tied_embeddings(self) -> bool:
        return self.config.tie_word_embeddings

    @property
    def kinds(self) -> dict[str, int]:
        """kind -> parameters, for every kind the model has (a Llama without biases has no "biases")."""
        present = {t.kind for t in self.tensors}
        totals = {kind: 0 for kind in kinds_of(self.config) if kind in present}
        for t in self.tensors:
            totals[t.kind] += t.count
        return totals

    def to_dict(self) -> dict:
        return {
            "model": self.config.to_dict(),
            "tensors": [t.to_dict() for t in self.tensors],
            "kinds": self.kinds,
            "total": self.total,
            "tied_embeddings": self.tied_embeddings,
        }


def parameters(config: ModelConfig) -> Parameters:
    return Parameters(config, tuple(Tensor(n, s, kind_of(n, config)) for n, s in expected_shapes(config).items()))


def _pattern(name: str, layers: str) -> str:
    return re.sub(rf"^({re.escape(layers)})\.\d+\.", r"\1.{i}.", name)


def params_report(p: Parameters) -> str:
    """Kind by kind, each tensor once per pattern (h.{i}.… or layers.{i}.… stands for every layer), then the total."""
    from ..views.report import count, human, percent, shape, table

    total = p.total
    rows = []
    for kind, kind_total in p.kinds.items():
        label = kinds_of(p.config)[kind]
        if kind == "token_embedding" and p.tied_embeddings:
            label += ", also the unembedding (tied: counted once)"
        rows.append([label, "", "", "", count(kind_total), percent(kind_total, total)])
        groups: dict[tuple[str, tuple[int, ...]], int] = {}
        for t in p.tensors:
            if t.kind == kind:
                key = (_pattern(t.name, architecture_of(p.config).layers), t.shape)
                groups[key] = groups.get(key, 0) + 1
        for (pattern, dims), n in groups.items():
            each = prod(dims)
            rows.append([f"  {pattern}", shape(dims), f"x {n}" if n > 1 else "", count(each), count(each * n), ""])
    rows.append(["total", "", "", "", count(total), "100%"])
    c = p.config
    layers = architecture_of(c).layers
    heads = ""
    if architecture_of(c).heads_in_headers:
        kv = f" sharing {c.n_kv_head} key/value heads" if c.n_kv_head != c.n_head else ""
        heads = f", {c.n_head} heads of {c.d_head}{kv}"
    header = (
        f"Parameters of {c.name}: {c.n_layer} layers, d_model {c.n_embd:,}{heads}, d_ff {c.d_ff:,}, "
        f"vocab {c.vocab_size:,}, context {c.n_positions:,}; {layers}.{{i}} stands for each of the {c.n_layer} layers"
    )
    tied = (
        "Tied embeddings: W_te turns tokens into vectors and, transposed, vectors into logits; it is one tensor."
        if p.tied_embeddings
        else "Untied embeddings: the unembedding lm_head.weight is a separate tensor."
    )
    return "\n".join([
        header,
        table(["tensor", "shape", "layers", "each", "count", "share"], rows, right={3, 4, 5}),
        "",
        f"{count(total)} parameters ({human(total)}); float32 weights: {human(4 * total)}B, bfloat16 or float16: "
        f"{human(2 * total)}B. {tied}",
    ])  # fmt: skip
