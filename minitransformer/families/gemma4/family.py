"""Gemma 4's text model (transformers' Gemma4ForCausalLM, model_type gemma4_text): Gemma 3's block (the embedding
scaled by sqrt(D), four RMSNorms a block, a GELU-gated MLP, layers alternating a sliding window and full attention,
the logits soft-capped where the config says), with these differences, each a part of its own:

- its attention (parts/shared_kv.py): q, k and v normed per head (v without gains), the scores unscaled; the full
  layers' heads wider (global_head_dim) and, where attention_k_eq_v, fewer, their values the keys' projection; the
  full layers' rotary proportional (a share of each head's pairs turns); the last num_kv_shared_layers layers read
  the keys and values of the last earlier layer of their kind and compute none (nor cache any);
- the per-layer embeddings (parts/per_layer.py): a second table and a projection of the embedding give every layer
  P numbers a position, which each layer gates into the stream after its MLP;
- each layer's output scaled by its layer_scalar (a buffer of the checkpoint, not a parameter);
- the RMSNorms' gains are w (Gemma 2 and 3 stored them less one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import constant, rms_norm
from ...engine.row_chunks import computed_pairs
from ...engine.shapes import ShapeOnly
from ...engine.stages import ATTENTION_ROLES, Stage, by_op
from ...engine.tape import Tape
from ..gemma.family import ScaledEmbedding, final_softcap
from ..llama.family import SYMBOLS
from ..parts.blocks import LayerInputs, Sandwich, under
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.mlps import GatedMLP
from ..parts.moe import FusedSwiGLUExperts, SoftmaxRouter
from ..parts.norms import RMSNorm
from ..parts.part import Products, Tensor, Tensors
from ..parts.per_layer import PER_LAYER, PerLayerBranch, PerLayerInputs
from ..parts.shared_kv import SharedKVAttention, sized
from . import reference
from .config import PRESETS, Gemma4TextConfig

# The block's output is the stream times the layer's scalar (resid_post, what the next block reads); the MLP's add is
# resid_mlp (Gemma4Block.resid), the per-layer branch's resid_ple
LAYER_SCALAR = Stage(
    "layer_scalar", ("resid_post",), "scale", "x = x s  (the layer's layer_scalar: the block's output)", "x [T, D]"
)
ROUTER_NORM = Stage("router.norm", ("moe.router_in",), "norm",
                    "r_in = x / sqrt(mean(x^2) + eps) * w_r / sqrt(D)  (the stream itself, before any norm of the layer)",
                    "x [T, D]", reads_stream=True)  # fmt: skip
EXPERT_SCALE = Stage("router.expert_scale", ("moe.gates_scaled",), "scale",
                     "gates = gates s_e  (each chosen expert's per_expert_scale)", "gates [T, k]")  # fmt: skip


@dataclass(frozen=True)
class Gemma4Router(SoftmaxRouter):
    """Gemma 4's router: the stream itself RMS-normed without gains, times its own gains w_r and D^-1/2, then
    Mixtral's softmax router (the top k renormalised), each chosen expert's gate times its per_expert_scale."""

    module: str = "proj"
    kinds = {"router": "router weights W_router [E, D], its gains w_r [D] and per-expert scales s [E]"}

    def stages(self, config: Any) -> dict[str, Stage]:
        softmax_router = super().stages(config)
        logits = replace(softmax_router["router"], equation="r = r_in W_router  (one logit per expert)")
        return by_op(ROUTER_NORM, *(logits if s.op == "router" else s for s in softmax_router.values()), EXPERT_SCALE)

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        normed = rms_norm(x, constant(x, 1.0), config.norm_eps) * p.scale
        r = at.stage("router.norm", np.multiply(normed, constant(normed, config.n_embd**-0.5)), "T D")
        chosen, gates = super().__call__(r, p, config, at)
        # each chosen expert's scale (counting from shapes: a stand-in of the gates' shape)
        scales = ShapeOnly(gates.shape, gates.dtype) if isinstance(chosen, ShapeOnly) else p.per_expert_scale[chosen]
        return chosen, at.stage("router.expert_scale", gates * scales, "T k")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        E, D = config.n_experts, config.n_embd
        return super().tensors(config, layer) | {
            "scale": Tensor((D,), "router"),
            "per_expert_scale": Tensor((E,), "router"),
        }


GELU = "GELU, tanh approximation"
EXPERTS = FusedSwiGLUExperts(module="experts", bare=True, width="moe_width", F="Fe", activation=GELU)
MOE_NORMS = ("post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2")
MOE_STAGES = (
    Stage("post_mlp_norm_1", ("post_mlp_norm_1",), "norm", "m = RMSNorm_m1(m)  (the dense MLP's, before the sum)",
          "m [T, D]"),
    Stage("ln_moe", ("ln_moe",), "norm", "h_e = RMSNorm_e(x)  (the experts' input: the stream after attention)",
          "x [T, D]", reads_stream=True),
    Stage("post_moe_norm", ("post_moe_norm",), "norm", "y = RMSNorm_y(y)  (the experts' sum, before the sum)", "y [T, D]"),
    Stage("moe.sum", ("moe.sum",), "add", "m = m + y  (the dense MLP and the experts side by side)", "m, y [T, D]"),
)  # fmt: skip


@dataclass(frozen=True)
class Gemma4Block(Sandwich):
    """Gemma's four norms around attention and the MLP, where the config says (enable_moe_block) with k of E experts
    beside the MLP, each branch normed and the two summed before the MLP's outer norm; then the per-layer branch (where
    the config has per-layer inputs); the whole layer's output scaled by its layer_scalar; each part at the layer's own
    sizes (config.at_layer)."""

    per_layer: PerLayerBranch = PerLayerBranch()
    router: Gemma4Router = Gemma4Router()
    experts: FusedSwiGLUExperts = EXPERTS
    buffers = ("layer_scalars",)

    resid = "resid_mlp"

    def stages(self, config: Any) -> dict[str, Stage]:
        *sandwich, resid_mlp = super().stages(config).values()
        return by_op(*sandwich, *(MOE_STAGES if config.moe else ()), resid_mlp, LAYER_SCALAR)

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        c = config.at_layer(at.layer_index or 0)
        at = sized(at, c).declaring(self.declared(c))
        x = self.sandwiched(x, p, c, at, inputs)
        if c.per_layer_width:
            x = self.per_layer(x, p, c, at, inputs.choices[PER_LAYER])
        return at.stage("layer_scalar", np.multiply(x, p.layer_scalar), "T D")

    def beside_mlp(self, m, x, p: SimpleNamespace, c: Any, at: Tape):
        """Where the config says, the experts beside the dense MLP, on the same stream x, each branch normed."""
        if not c.moe:
            return m
        m = at.stage("post_mlp_norm_1", self.norm(m, p.post_feedforward_layernorm_1, c), "T D")
        chosen, gates = self.router(x, p.router, c, at)
        he = at.stage("ln_moe", self.norm(x, p.pre_feedforward_layernorm_2, c), "T D")
        y = self.experts(he, chosen, gates, p, c, at)
        y = at.stage("post_moe_norm", self.norm(y, p.post_feedforward_layernorm_2, c), "T D")
        return at.stage("moe.sum", m + y, "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        scalars = {"layer_scalars": "each layer's output scale s [1] (a buffer: no parameter)"}
        experts = self.router.kinds | self.experts.kinds
        return self.mixer.kinds | self.mlp.kinds | experts | self.per_layer.kinds | self.norm.kinds | scalars

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        mixer, mlp, *norms = self.names
        c = config.at_layer(layer)
        tensors = {**under(mixer, self.mixer.tensors(config, layer)), **under(mlp, self.mlp.tensors(c, layer))}
        if c.moe:
            tensors |= under("router", self.router.tensors(c, layer)) | self.experts.tensors(c, layer)
            norms += MOE_NORMS
        tensors |= {k: t for name in norms for k, t in under(name, self.norm.tensors(c, layer)).items()}
        return tensors | self.per_layer.tensors(c, layer) | {"layer_scalar": Tensor((1,), "layer_scalars")}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        c = config.at_layer(layer)
        experts = (self.router.products(c, T, t, B) | self.experts.products(c, T, t, B)) if c.moe else {}
        return (
            self.mixer.products(config, T, t, B, layer)
            | self.mlp.products(c, T, t, B, layer)
            | experts
            | self.per_layer.products(c, T, t, B, layer)
        )


class Gemma4Formulas(DecoderFormulas):
    """Gemma 4's closed forms pass by pass: each layer's products at its own sizes (a full layer's wider heads, a shared
    layer's missing k and v), the per-layer inputs' projection once a pass, the logits."""

    def pass_macs(self, config: Any, T: int, past: int, R: int = 1, B: int = 1, windows: bool = True) -> int:
        """Every layer's MACs in a pass of T positions after `past`: each product's dot products x their length, the
        scores and mix 2 H dh MACs a (query, key) pair of the row chunks' computed_pairs; the per-layer inputs'
        projection; the logits."""
        t, total = past + T, 0
        for layer in range(config.n_layer):
            c = config.at_layer(layer)
            ops = self.decoder.block.products(config, T, t, B, layer)
            pairs = computed_pairs(T, t, config.layer_window(layer) if windows else None)
            total += sum(n * length for op, (n, length) in ops.items() if op not in ATTENTION_ROLES)
            total += B * 2 * c.n_head * c.d_head * pairs
        per_layer = sum(n * length for n, length in PerLayerInputs().pass_products(config, T, B).values())
        return total + per_layer + B * R * config.vocab_size * config.n_embd

    def generation_macs(
        self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
    ) -> int:
        """A prefill and n_new - 1 decode steps with the cache, or each step the whole sequence again without it."""
        if use_cache:
            passes = [(n_prompt, 0)] + [(1, n_prompt + k) for k in range(n_new - 1)]
        else:
            passes = [(n_prompt + k, 0) for k in range(n_new)]
        return sum(self.pass_macs(config, T, past, 1, B, windows) for T, past in passes)


NORM = RMSNorm(description="RMSNorm gains: four a block, the per-layer branch's, q's and k's, the final one")
GEMMA4 = Decoder(
    Gemma4Block(SharedKVAttention(), GatedMLP(activation=GELU), NORM),
    NORM,
    ScaledEmbedding(),
    after_logits=final_softcap,
    per_layer=PerLayerInputs(),
    symbols=SYMBOLS + ", P per-layer input width, L layers",
)

ARCHITECTURE = composed(
    "gemma4", GEMMA4, Gemma4Formulas, config=Gemma4TextConfig, presets=PRESETS, label="Gemma 4", reference=reference
)
