"""The Qwen3.5 family in the table of families (transformers' Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM): the
pre-norm block, one for each kind of layer, whose mixer is a Gated DeltaNet (linear attention, families/parts/
deltanet.py) or gated full attention (parts/gated_attention.py), followed by a SwiGLU MLP or, in the MoE models, k of
E experts beside a shared expert whose output a sigmoid gate scales; every RMSNorm scales by (1 + w). A batch's pads
are masked from the attention layers' keys and zeroed before the DeltaNet layers' projections."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from ...engine.ops import sigmoid
from ...engine.stages import MLP, Stage, by_op
from ...engine.tape import Tape
from ..deepseek_v3.stages import SHARED
from ..mixtral.stages import COMBINE, ROUTER
from ..moe import shared_expert, softmax_router, swiglu_experts
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.deltanet import GatedDeltaNet
from ..parts.family import composed
from ..parts.gated_attention import GatedAttention
from ..parts.hybrid import HybridFormulas
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..parts.part import Part, Products, Tensor, Tensors, linear
from ..qwen3moe.stages import QWEN_EXPERTS
from . import reference
from .config import FULL, LINEAR, PRESETS, QWEN35_MODEL_TYPES, Qwen35Config

SYMBOLS = (
    "T new positions, t attended, D d_model, H query heads, Hkv key/value heads, G = H/Hkv, dh head size, "
    "dr its rotated numbers; a DeltaNet layer's Hk key heads of dk, Hv value heads of dv, Gv = Hv/Hk, Dc = "
    "2 Hk dk + Hv dv conv channels, Kc its kernel (Ks = Kc - 1 kept), C positions a chunk, N chunks; "
    "F MLP width (an expert's in the MoE models: Fe, the shared expert's Fs), E experts, k a token, V "
    "vocabulary, R logit rows"
)


@dataclass(frozen=True)
class Mlp(GatedMLP):
    """The Llama family's SwiGLU, its three weights of one kind."""

    kinds = {"mlp": "MLP weights W_gate, W_up [F, D], W_down [D, F]"}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {name: replace(tensor, kind="mlp") for name, tensor in super().tensors(config, layer).items()}


# A bridge to families/moe.py until the mixtures' parts are (families/parts/moe.py): the router, the experts and the
# shared expert as that module computes them, their stages as the Mixtral, Qwen3-MoE and DeepSeek-V3 tables have them.
SHARED_GATE = (
    Stage("shared.score", ("moe.shared_score",), "matmul", "s = h W_shared_gate  (one number a token)",
          "h [T, D], W_shared_gate [D, 1]", MLP, product="router"),
    Stage("shared.weigh", ("moe.shared_weighed",), "multiply", "y_s = y_s * sigmoid(s)", "y_s [T, D], s [T, 1]"),
)  # fmt: skip
MIXTURE = by_op(*ROUTER, *QWEN_EXPERTS, COMBINE, *SHARED[:-1], *SHARED_GATE, SHARED[-1])


@dataclass(frozen=True)
class SharedExpertMixture(Part):
    """The router's softmax over E experts, its top k renormalised to sum to 1, each expert a SwiGLU of its tokens,
    and a shared expert on every token, weighted by sigmoid(h W_shared_gate)."""

    kinds = {
        "router": "router weights W_router [E, D]",
        "expert_gate": "experts' gate weights [Fe, D], E a layer",
        "expert_up": "experts' up weights [Fe, D], E a layer",
        "expert_down": "experts' down weights [D, Fe], E a layer",
        "shared_expert": "shared expert's weights W_gate_s, W_up_s [Fs, D], W_down_s [D, Fs], and its gate [1, D]",
    }

    def stages(self, config: Qwen35Config) -> dict[str, Stage]:
        return MIXTURE

    def __call__(self, h, p: SimpleNamespace, config: Qwen35Config, at: Tape):
        at = at.declaring(MIXTURE)
        E, k, _, _ = config.experts
        chosen, gates = softmax_router(h, p.gate.weight, k, at)

        def weights(e: int):
            w = getattr(p.experts, str(e))
            return w.gate_proj.weight, w.up_proj.weight, w.down_proj.weight

        m = swiglu_experts(h, chosen, gates, weights, E, config.hidden_act, at, F="Fe")
        y = shared_expert(h, p.shared_expert, config.hidden_act, at)
        score = at.matmul("shared.score", h, p.shared_expert_gate.weight.T, "T D, D 1 -> T 1")
        y = at.stage("shared.weigh", y * sigmoid(score), "T D")
        return at.stage("moe.shared_add", m + y, "T D")

    def tensors(self, config: Qwen35Config, layer: int = 0) -> Tensors:
        D, (E, _, Fe, Fs) = config.n_embd, config.experts
        tensors = {"gate.weight": Tensor((E, D), "router")}
        for e in range(E):
            tensors |= swiglu(f"experts.{e}", D, Fe, "expert_gate", "expert_up", "expert_down")
        tensors |= swiglu("shared_expert", D, Fs, "shared_expert", "shared_expert", "shared_expert")
        return tensors | {"shared_expert_gate.weight": Tensor((1, D), "shared_expert")}

    def products(self, config: Qwen35Config, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, (E, k, Fe, Fs) = config.n_embd, config.experts
        return {
            "router": (B * T * E, D),
            "expert.gate": (B * T * k * Fe, D),  # each token's h against its k experts' W_gate side by side
            "expert.up": (B * T * k * Fe, D),
            "expert.down": (B * T * k * D, Fe),
            "shared.gate": (B * T * Fs, D),
            "shared.up": (B * T * Fs, D),
            "shared.down": (B * T * D, Fs),
            "shared.score": (B * T, D),
        }


def swiglu(name: str, D: int, F: int, gate: str, up: str, down: str) -> Tensors:
    """A SwiGLU's three nn.Linear weights under `name`, of the kinds given."""
    return {**linear(f"{name}.gate_proj", F, D, False, gate), **linear(f"{name}.up_proj", F, D, False, up),
            **linear(f"{name}.down_proj", D, F, False, down)}  # fmt: skip


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
FEED_FORWARD = FeedForward(Mlp(), SharedExpertMixture())
LINEAR_NAMES = ("input_layernorm", "linear_attn", "post_attention_layernorm", "mlp")
QWEN35 = Decoder(
    ByKind({LINEAR: PreNorm(GatedDeltaNet(), FEED_FORWARD, NORM, LINEAR_NAMES),
            FULL: PreNorm(GatedAttention(), FEED_FORWARD, NORM)}),
    NORM, prefixes=("model.language_model.",), ignored=r"visual\..*|mtp\..*",  # the multimodal checkpoints' others
    biases="biases of the attention projections that have them", symbols=SYMBOLS, kind_order=(LINEAR, FULL),
)  # fmt: skip


class Qwen35Formulas(HybridFormulas):
    """Layer by layer a Gated DeltaNet (a state: its delta rule, recurrent or in chunks) or gated full attention,
    each followed by the MLP or the experts; a generation summed by verbs/formulas.py."""

    def attention_vs_weights(self, c: Qwen35Config) -> tuple[str, str, str]:
        """A full-attention layer's decode step at t keys against its products with weights (count compares one such
        layer); a DeltaNet layer's delta rule costs 3 Hv dk dv a step whatever t."""
        mlp, symbols = ("3 D F", f"F = {c.n_inner:,}") if not c.is_moe else (
            "D E + 3 k D Fe + 3 D Fs + D",
            f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, Fs = {c.shared_inner:,}")  # fmt: skip
        return (
            f"4 H dh t FLOPs against 2 (3 D H dh + 2 D Hkv dh + {mlp}) for the weights (a full-attention layer)",
            f"H dh t / (3 D H dh + 2 D Hkv dh + {mlp})",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.head_dim:,}, Hkv dh = {c.n_kv_head * c.head_dim:,}, {symbols}",
        )


ROUTED_KINDS = ("expert_gate", "expert_up", "expert_down")  # of which one token's pass reads k of E
ARCHITECTURE = composed(
    "qwen3_5", QWEN35, Qwen35Formulas(QWEN35, ROUTED_KINDS), routed_kinds=ROUTED_KINDS, model_types=QWEN35_MODEL_TYPES,
    config=Qwen35Config, presets=PRESETS, label="Qwen3.5 family",
    # the multimodal checkpoints (qwen3_5, qwen3_5_moe) are read as their text model, as AutoModelForCausalLM reads them
    reference_classes={"qwen3_5_text": "Qwen3_5ForCausalLM", "qwen3_5": "Qwen3_5ForCausalLM",
                       "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM"},
    float64_reference=reference.float64_throughout, float64_note=reference.NOTE,
)  # fmt: skip
