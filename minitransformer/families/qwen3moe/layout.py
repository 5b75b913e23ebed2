"""Where a Qwen3-MoE model keeps its numbers: Qwen3's attention tensors (families/qwen3/layout.py: q_norm and k_norm
after o_proj), then each layer's mlp: a sparse layer's router (mlp.gate [E, D]) and E experts (mlp.experts.{e}.gate_proj,
up_proj [F, D] and down_proj [D, F]), a dense layer's gate_proj, up_proj [F, D] and down_proj [D, F] of intermediate_size.
These are the names of Qwen's checkpoints and of what transformers 5 writes with save_pretrained (it holds the experts
fused in memory, experts.gate_up_proj [E, 2F, D] and experts.down_proj [E, D, F], and converts on loading and saving)."""

from __future__ import annotations

import re
from dataclasses import replace

from ..llama.layout import EMBEDDING, IGNORED, LAYERS, PREFIX
from ..llama.layout import KINDS as LLAMA_KINDS
from ..qwen3.layout import KIND_OF as QWEN3_KIND_OF
from ..qwen3.layout import qwen3_shapes
from .config import Qwen3MoeConfig

__all__ = ["EMBEDDING", "IGNORED", "KINDS", "KIND_OF", "LAYERS", "PREFIX", "ROUTED_KINDS", "qwen3_moe_shapes"]


def qwen3_moe_shapes(config: Qwen3MoeConfig) -> dict[str, tuple[int, ...]]:
    """Qwen3's tensors, each layer's dense MLP replaced by its router and experts where the layer is sparse (nn.Linear
    weights are [out, in]; no biases but attention_bias's)."""
    D, F, E = config.n_embd, config.d_ff, config.n_experts
    shapes: dict[str, tuple[int, ...]] = {}
    # Qwen3's layout with the dense MLP's width, whose MLP tensors a sparse layer replaces
    for name, shape in qwen3_shapes(replace(config, n_inner=config.dense_inner)).items():  # type: ignore[arg-type]
        layer = re.match(r"layers\.(\d+)\.mlp\.", name)
        if layer is None or int(layer[1]) in config.dense_layers:
            shapes[name] = shape
        elif name.endswith("gate_proj.weight"):  # the first of the MLP's tensors: the router and experts instead
            m = f"layers.{layer[1]}.mlp"
            shapes[f"{m}.gate.weight"] = (E, D)
            for e in range(E):
                for proj, each in (("gate_proj", (F, D)), ("up_proj", (F, D)), ("down_proj", (D, F))):
                    shapes[f"{m}.experts.{e}.{proj}.weight"] = each
    return shapes


KINDS: dict[str, str] = {
    **{kind: LLAMA_KINDS[kind] for kind in ("token_embedding", "attention_q", "attention_k", "attention_v",
                                              "attention_out")},
    "router": "router weights W_router [E, D]",
    "expert_gate": "experts' gate weights W_gate [F, D], E a sparse layer",
    "expert_up": "experts' up weights W_up [F, D], E a sparse layer",
    "expert_down": "experts' down weights W_down [D, F], E a sparse layer",
    "mlp_gate": "dense layers' MLP gate weights W_gate [F, D] (F = intermediate_size)",
    "mlp_up": "dense layers' MLP up weights W_up [F, D]",
    "mlp_down": "dense layers' MLP down weights W_down [D, F]",
    "biases": LLAMA_KINDS["biases"],
    "norms": "RMSNorm gains (q_norm and k_norm included)",
    "unembedding": LLAMA_KINDS["unembedding"],
}  # fmt: skip

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")

KIND_OF = (
    (re.compile(r"^layers\.\d+\.mlp\.gate\.weight$"), "router"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.\d+\.gate_proj\.weight$"), "expert_gate"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.\d+\.up_proj\.weight$"), "expert_up"),
    (re.compile(r"^layers\.\d+\.mlp\.experts\.\d+\.down_proj\.weight$"), "expert_down"),
    *QWEN3_KIND_OF,
)
