"""Every weight tensor of a model by its Hugging Face name, with its shape, size and kind: the parameter count.

The list is `weights.expected_shapes(config)`, the same one the loader checks checkpoints against,
so the count cannot drift from what the model loads. With tied embeddings (GPT-2's default, and
some Llama-family models') the token embedding W_te is also the unembedding: one tensor, counted once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from ..models.config import Config
from ..models.weights import expected_shapes

# kind -> what it is, in the order a forward pass meets them: GPT-2 (Conv1D weights are stored [in, out])...
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "position_embedding": "position embedding W_pe [P, D]",
    "attention_qkv": "attention Q, K, V weights W_qkv [D, 3D]",
    "attention_out": "attention output weights W_o [D, D]",
    "mlp_up": "MLP up weights W_up [D, F]",
    "mlp_down": "MLP down weights W_down [F, D]",
    "biases": "biases of the four linear layers",
    "layer_norms": "layer-norm gains and biases",
    "unembedding": "unembedding W_U [V, D] (untied)",
}
# ... and the Llama family (nn.Linear weights are stored [out, in]).
LLAMA_KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    "attention_q": "attention query weights W_q [H*dh, D]",
    "attention_k": "attention key weights W_k [Hkv*dh, D]",
    "attention_v": "attention value weights W_v [Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp_gate": "MLP gate weights W_gate [F, D]",
    "mlp_up": "MLP up weights W_up [F, D]",
    "mlp_down": "MLP down weights W_down [D, F]",
    "biases": "biases of the linear layers that have them",
    "norms": "RMSNorm gains",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

_KIND_OF = (
    (re.compile(r"^wte\.weight$"), "token_embedding"),
    (re.compile(r"^wpe\.weight$"), "position_embedding"),
    (re.compile(r"^h\.\d+\.attn\.c_attn\.weight$"), "attention_qkv"),
    (re.compile(r"^h\.\d+\.attn\.c_proj\.weight$"), "attention_out"),
    (re.compile(r"^h\.\d+\.mlp\.c_fc\.weight$"), "mlp_up"),
    (re.compile(r"^h\.\d+\.mlp\.c_proj\.weight$"), "mlp_down"),
    (re.compile(r"^h\.\d+\.(attn|mlp)\.c_\w+\.bias$"), "biases"),
    (re.compile(r"^(h\.\d+\.)?ln_(1|2|f)\.(weight|bias)$"), "layer_norms"),
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embed_tokens\.weight$"), "token_embedding"),
    (re.compile(r"^layers\.\d+\.self_attn\.q_proj\.weight$"), "attention_q"),
    (re.compile(r"^layers\.\d+\.self_attn\.k_proj\.weight$"), "attention_k"),
    (re.compile(r"^layers\.\d+\.self_attn\.v_proj\.weight$"), "attention_v"),
    (re.compile(r"^layers\.\d+\.self_attn\.o_proj\.weight$"), "attention_out"),
    (re.compile(r"^layers\.\d+\.mlp\.gate_proj\.weight$"), "mlp_gate"),
    (re.compile(r"^layers\.\d+\.mlp\.up_proj\.weight$"), "mlp_up"),
    (re.compile(r"^layers\.\d+\.mlp\.down_proj\.weight$"), "mlp_down"),
    (re.compile(r"^layers\.\d+\.(self_attn|mlp)\.\w+_proj\.bias$"), "biases"),
    (re.compile(r"^(layers\.\d+\.(input|post_attention)_layernorm|norm)\.weight$"), "norms"),
)


def kind_of(name: str) -> str:
    for pattern, kind in _KIND_OF:
        if pattern.match(name):
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


def kinds_of(config: Config) -> dict[str, str]:
    """The kinds of a config's family, described."""
    return LLAMA_KINDS if config.family == "llama" else KINDS


@dataclass(frozen=True)
class Parameters:
    config: Config
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


def parameters(config: Config) -> Parameters:
    return Parameters(config, tuple(Tensor(n, s, kind_of(n)) for n, s in expected_shapes(config).items()))
