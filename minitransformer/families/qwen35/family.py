"""The Qwen3.5 family in the table of families (transformers' Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM): the
pre-norm block, one for each kind of layer, whose mixer is a Gated DeltaNet (linear attention, families/parts/
deltanet.py) or gated full attention (parts/gated_attention.py), followed by a SwiGLU MLP or, in the MoE models, k of
E experts beside a shared expert whose output a sigmoid gate scales (parts/moe.py); every RMSNorm scales by (1 + w).
A batch's pads are masked from the attention layers' keys and zeroed before the DeltaNet layers' projections."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...engine.tape import Tape
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.deltanet import GatedDeltaNet
from ..parts.family import composed
from ..parts.gated_attention import GatedAttention
from ..parts.hybrid import HybridFormulas
from ..parts.mlps import OneKindGatedMLP
from ..parts.moe import Mixture, SharedExpert, SoftmaxRouter, SwiGLUExperts
from ..parts.norms import RMSNorm
from ..parts.part import Part, Products, Tensors
from . import reference
from .config import FULL, LINEAR, PRESETS, Qwen35Config

SYMBOLS = (
    "T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
    "dr its rotated numbers; a DeltaNet layer's Hk key heads of dk, Hv value heads of dv, Gv = Hv/Hk, Dc = "
    "2 Hk dk + Hv dv conv channels, Kc its kernel (Ks = Kc - 1 kept), C positions a chunk, N chunks; "
    "F MLP width (an expert's in the MoE models: Fe, the shared expert's Fs), E experts, k a token, V "
    "vocabulary, R logit rows"
)


@dataclass(frozen=True)
class FeedForward(Part):
    """A layer's MLP, or in a MoE model its experts (config.is_moe)."""

    dense: Any
    experts: Any

    def of(self, config: Qwen35Config) -> Any:
        return self.experts if config.is_moe else self.dense

    def __call__(self, h, p: SimpleNamespace, config: Qwen35Config, at: Tape):
        return self.of(config)(h, p, config, at)

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.dense.kinds, **self.experts.kinds}

    def tensors(self, config: Qwen35Config, layer: int = 0) -> Tensors:
        return self.of(config).tensors(config, layer)

    def products(self, config: Qwen35Config, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.of(config).products(config, T, t, B, layer)


NORM = RMSNorm(one_plus=True, description="RMSNorm gains (q_norm, k_norm and the DeltaNet's gated norm included)")
# The router's softmax over E experts, its top k renormalised to sum to 1, each expert a SwiGLU of its tokens, and a
# shared expert on every token, weighted by sigmoid(h W_shared_gate).
EXPERT_WEIGHTS = (
    "experts' gate weights [Fe, D], E a layer",
    "experts' up weights [Fe, D], E a layer",
    "experts' down weights [D, Fe], E a layer",
)
EXPERTS = SwiGLUExperts(width="moe_inner", F="Fe", described=EXPERT_WEIGHTS)
SHARED_WEIGHTS = "shared expert's weights W_gate_s, W_up_s [Fs, D], W_down_s [D, Fs], and its gate [1, D]"
SHARED = SharedExpert(module="shared_expert", gate="shared_expert_gate", width="shared_inner", described=SHARED_WEIGHTS)
FEED_FORWARD = FeedForward(OneKindGatedMLP(), Mixture(SoftmaxRouter(), EXPERTS, SHARED))
LINEAR_NAMES = ("input_layernorm", "linear_attn", "post_attention_layernorm", "mlp")
QWEN35 = Decoder(
    ByKind(
        {
            LINEAR: PreNorm(GatedDeltaNet(), FEED_FORWARD, NORM, LINEAR_NAMES),
            FULL: PreNorm(GatedAttention(), FEED_FORWARD, NORM),
        }
    ),
    NORM,
    prefixes=("model.language_model.",),
    ignored=r"visual\..*|mtp\..*",  # the multimodal checkpoints' others
    biases="biases of the attention projections that have them",
    symbols=SYMBOLS,
    kind_order=(LINEAR, FULL),
)


class Qwen35Formulas(HybridFormulas):
    """Layer by layer a Gated DeltaNet (a state: its delta rule, recurrent or in chunks) or gated full attention,
    each followed by the MLP or the experts; a generation summed by verbs/formulas.py."""

    def attention_vs_weights(self, c: Qwen35Config) -> tuple[str, str, str]:
        """A full-attention layer's decode step at t keys against its products with weights (count compares one such
        layer); a DeltaNet layer's delta rule costs 3 Hv dk dv a step whatever t."""
        mlp, symbols = (
            ("3 D F", f"F = {c.n_inner:,}")
            if not c.is_moe
            else (
                "D E + 3 k D Fe + 3 D Fs + D",
                f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, Fs = {c.shared_inner:,}",
            )
        )
        return (
            f"4 H dh t FLOPs against 2 (3 D H dh + 2 D Hkv dh + {mlp}) for the weights (a full-attention layer)",
            f"H dh t / (3 D H dh + 2 D Hkv dh + {mlp})",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.head_dim:,}, Hkv dh = {c.n_kv_head * c.head_dim:,}, {symbols}",
        )


# The multimodal checkpoints (qwen3_5, qwen3_5_moe) are read as their text model, as AutoModelForCausalLM reads them.
ARCHITECTURE = composed(
    "qwen3_5", QWEN35, Qwen35Formulas, config=Qwen35Config, presets=PRESETS, label="Qwen3.5 family", reference=reference
)
