"""Every weight tensor of a model by its Hugging Face name, with its shape, size and kind: the parameter count.

The list is the family layout's tensors, whose shapes are `weights.expected_shapes(config)`, the one the loader
checks checkpoints against, so the count cannot drift from what the model loads. With tied embeddings (GPT-2's
default, and some Llama-family models') the token embedding W_te is also the unembedding: one tensor, counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

from ..errors import UserError
from ..families.config import ModelConfig
from ..families.table import architecture_of


def kind_of(name: str, config: ModelConfig) -> str:
    """The kind of a tensor name in the checkpoint of a config (its family's layout)."""
    kind = architecture_of(config).layout.kind(name, config)
    if kind is None:
        raise ValueError(f"no kind for weight tensor {name!r}")
    return kind


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
    return architecture_of(config).layout.kinds


@dataclass(frozen=True)
class Parameters:
    config: ModelConfig
    tensors: tuple[Tensor, ...]

    @property
    def total(self) -> int:
        return sum(t.count for t in self.tensors)

    @property
    def routed(self) -> int:
        """The parameters of a mixture of experts' routed experts (0 in a dense model): E experts a layer."""
        kinds = architecture_of(self.config).layout.routed_kinds
        return sum(t.count for t in self.tensors if t.kind in kinds)

    @property
    def active(self) -> int:
        """The parameters one token's pass reads: every one of a dense model; in a mixture of experts, k of the E
        routed experts of each layer and everything else whole (the embedding too, as Mixtral's model card counts it,
        though a token reads one row of it; gpt-oss's cards leave it out)."""
        c = self.config
        if not self.routed or c.n_experts is None or c.top_k is None:
            return self.total
        return self.total - self.routed + self.routed * c.top_k // c.n_experts

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
            "active": self.active,
            "tied_embeddings": self.tied_embeddings,
        }


def parameters(config: ModelConfig) -> Parameters:
    """Every weight tensor of the config's checkpoint (buffers apart), with its kind: worked out once for a config (its
    report, memory and roofline each ask; DeepSeek-V4-Pro's 140,000 tensors take half a second)."""
    if not isinstance(config, ModelConfig):  # None, a name or a Model: an AttributeError in the family table before
        raise UserError(f"parameters counts a model's config (model.config, PRESETS[name]), not {config!r:.60}")
    return _parameters(config)


@lru_cache(maxsize=16)
def _parameters(config: ModelConfig) -> Parameters:
    layout = architecture_of(config).layout
    # the layout's tensors read once, each with its kind: a look-up of each name's kind in them hashed the config
    # anew for each, 0.6 s of DeepSeek-V4-Pro's count
    tensors = (Tensor(n, tuple(t.shape), t.kind) for n, t in layout.tensors(config).items())
    return Parameters(config, tuple(t for t in tensors if t.kind not in layout.buffer_kinds))  # buffers: not parameters
