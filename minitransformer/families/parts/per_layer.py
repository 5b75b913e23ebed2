"""Per-layer embeddings (Gemma 4's, Gemma 3n's PLE): beside the token embedding, a second table gives each token P
numbers for every layer (one table [V_ple, L P]); a projection of the embedding gives each position P more for every
layer; their normed sum is each layer's per-layer input, which a branch after the layer's MLP gates into the stream.

Two parts: `PerLayerInputs`, computed once a pass from the ids and the embedding (the decoder's `per_layer`: its
output left for the layers in LayerInputs.choices), and `PerLayerBranch`, each layer's gate, product and norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS, constant, rms_norm
from ...engine.stages import MLP, Stage, by_op
from ...engine.tape import Tape
from .part import Part, Products, Tensor, Tensors

PER_LAYER = "per-layer inputs"  # their key in LayerInputs.choices: [T, L, P] (or [B, T, L, P])
STREAM_IN = Stage("embed.stream", ("embed.stream",), "reshape", "x: the embedding, the stream block 0 reads (the "
                  "per-layer inputs already made from it)", "x [T, D]")  # fmt: skip


@dataclass(frozen=True)
class PerLayerInputs(Part):
    """Each layer's input of P numbers a position (config.per_layer_width: hidden_size_per_layer_input):
    e = W_ple[ids] sqrt(P) (a lookup), c = RMSNorm(x W_pm / sqrt(D)) each layer's P on their own (x the scaled
    embedding), and (c + e) / sqrt(2). One product, D x L P a position, for every layer at once."""

    key = PER_LAYER
    kinds = {
        "per_layer_embedding": "per-layer token embedding W_ple [V_ple, L P]",
        "per_layer_projection": "per-layer projection of the embedding W_pm [L P, D], and each layer's W_g [P, D] "
        "and W_p [D, P]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(
            Stage("ple.embed", ("ple.embed",), "lookup", "e = W_ple[ids] sqrt(P)  (P numbers for each of the L layers)",
                  "ids [T]"),
            Stage("ple.project", ("ple.projected",), "matmul", "c = x W_pm  (the embedding, to P numbers a layer)",
                  "x [T, D], W_pm [D, L*P]", MLP, product="projection"),
            Stage("ple.scale", ("ple.scaled",), "scale", "c = c / sqrt(D)", "c [T, L*P]"),
            Stage("ple.norm", ("ple.normed",), "norm", "c = RMSNorm_ple(c)  (each layer's P numbers)", "c [T, L, P]"),
            Stage("ple.sum", ("ple.inputs",), "add", "p = (c + e) / sqrt(2)  (each layer's input)", "c, e [T, L, P]"),
            STREAM_IN,
        )  # fmt: skip

    def stream(self, x, config: Any, tape: Tape):
        """The embedding as block 0 reads it, a stage of its own after the per-layer inputs took theirs from it: a hook
        on it (TransformerLens's blocks.0.hook_resid_pre) changes what block 0 reads and not the per-layer inputs, as
        in transformers, where they are made from inputs_embeds before the first layer."""
        return tape.declaring(self.declared(config)).stage("embed.stream", x, "T D")

    def __call__(self, ids, x, p: SimpleNamespace, config: Any, tape: Tape):
        if not config.per_layer_width:  # a model without them (0 or null)
            return None
        L, P = config.per_layer_layers, config.per_layer_width
        tape = tape.declaring(self.declared(config)).with_sizes(L=L, P=P)
        table = p.embed_tokens_per_layer.weight
        e = tape.stage("ple.embed", np.multiply(table[ids], constant(table, P**0.5)), "T L*P")
        c = tape.matmul("ple.project", x, p.per_layer_model_projection.weight.T, "T D, D L*P -> T L*P")
        c = tape.stage("ple.scale", np.multiply(c, constant(c, config.n_embd**-0.5)), "T L*P")
        c = c.reshape(*c.shape[:-1], L, P)
        c = tape.stage("ple.norm", rms_norm(c, p.per_layer_projection_norm.weight, config.norm_eps), "T L P")
        summed = np.multiply(c + e.reshape(*e.shape[:-1], L, P), constant(c, 2.0**-0.5))
        return tape.stage("ple.sum", summed, "T L P")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        if not config.per_layer_width:
            return {}
        width = config.per_layer_layers * config.per_layer_width
        return {
            "embed_tokens_per_layer.weight": Tensor((config.per_layer_vocab, width), "per_layer_embedding"),
            "per_layer_model_projection.weight": Tensor((width, config.n_embd), "per_layer_projection"),
            "per_layer_projection_norm.weight": Tensor((config.per_layer_width,), "norms"),
        }

    def pass_products(self, config: Any, T: int, B: int = 1) -> Products:
        """Its one product in a pass of T positions, once a pass whatever the layers: D x L P a position."""
        if not config.per_layer_width:
            return {}
        return {"ple.project": (B * T * config.per_layer_layers * config.per_layer_width, config.n_embd)}


@dataclass(frozen=True)
class PerLayerBranch(Part):
    """A layer's per-layer input gated into the stream after its MLP: x + RMSNorm(act(x W_g) * p_i W_p), p_i the
    layer's P numbers (PerLayerInputs)."""

    kinds = {"per_layer_projection": PerLayerInputs.kinds["per_layer_projection"]}

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(
            Stage("ple.gate", ("ple.gate",), "matmul", "g = x W_g  (the stream, to the layer's P)", "x [T, D], W_g [D, P]",
                  MLP, reads_stream=True),
            Stage("ple.act", ("ple.act",), "activation", "g = act(g)  (GELU, tanh approximation)", "g [T, P]"),
            Stage("ple.mul", ("ple.mul",), "multiply", "g = g * p_i  (the layer's per-layer input)", "g, p_i [T, P]"),
            Stage("ple.out", ("ple.out",), "matmul", "r = g W_p", "g [T, P], W_p [P, D]", MLP),
            Stage("ple.post_norm", ("ple.normed_out",), "norm", "r = RMSNorm_ple(r)  (before the add)", "r [T, D]"),
            Stage("resid_ple", ("resid_ple",), "residual", "x = x + RMSNorm_ple(r)", "x, r [T, D]"),
        )  # fmt: skip

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config)).with_sizes(P=config.per_layer_width)
        g = at.matmul("ple.gate", x, p.per_layer_input_gate.weight.T, "T D, D P -> T P")
        g = at.stage("ple.act", ACTIVATIONS[config.hidden_act](g), "T P")
        g = at.stage("ple.mul", np.multiply(g, inputs[..., at.layer_index or 0, :], out=at.scratch(g)), "T P")
        r = at.matmul("ple.out", g, p.per_layer_projection.weight.T, "T P, P D -> T D")
        r = at.stage("ple.post_norm", rms_norm(r, p.post_per_layer_input_norm.weight, config.norm_eps), "T D")
        return at.stage("resid_ple", x + r, "T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, P = config.n_embd, config.per_layer_width
        if not P:
            return {}
        return {
            "per_layer_input_gate.weight": Tensor((P, D), "per_layer_projection"),
            "per_layer_projection.weight": Tensor((D, P), "per_layer_projection"),
            "post_per_layer_input_norm.weight": Tensor((D,), "norms"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, P = config.n_embd, config.per_layer_width
        if not P:
            return {}
        return {"ple.gate": (B * T * P, D), "ple.out": (B * T * D, P)}
