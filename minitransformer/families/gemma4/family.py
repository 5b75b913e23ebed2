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

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.row_chunks import computed_pairs
from ...engine.stages import ATTENTION_ROLES, Stage, by_op
from ...engine.tape import Tape
from ..gemma.family import ScaledEmbedding, final_softcap
from ..llama.family import SYMBOLS
from ..parts.blocks import LayerInputs, Sandwich, under
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..parts.part import Products, Tensor, Tensors
from ..parts.per_layer import PER_LAYER, PerLayerBranch, PerLayerInputs
from ..parts.shared_kv import SharedKVAttention, sized
from . import reference
from .config import PRESETS, Gemma4TextConfig

LAYER_SCALAR = Stage("layer_scalar", ("layer_scalar",), "scale", "x = x s  (the layer's layer_scalar)", "x [T, D]")


@dataclass(frozen=True)
class Gemma4Block(Sandwich):
    """Gemma's four norms around attention and the MLP, then the per-layer branch (where the config has per-layer
    inputs), the whole layer's output scaled by its layer_scalar; each part at the layer's own sizes
    (config.at_layer)."""

    per_layer: PerLayerBranch = PerLayerBranch()
    buffers = ("layer_scalars",)

    def stages(self, config: Any) -> dict[str, Stage]:
        return super().stages(config) | by_op(LAYER_SCALAR)

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        c = config.at_layer(at.layer_index or 0)
        at = sized(at, c)
        x = super().__call__(x, p, c, at, inputs)
        if c.per_layer_width:
            x = self.per_layer(x, p, c, at, inputs.choices[PER_LAYER])
        at = at.declaring(self.declared(c))
        return at.stage("layer_scalar", np.multiply(x, p.layer_scalar), "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        scalars = {"layer_scalars": "each layer's output scale s [1] (a buffer: no parameter)"}
        return super().kinds | self.per_layer.kinds | scalars

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        mixer, mlp, *norms = self.names
        c = config.at_layer(layer)
        tensors = {**under(mixer, self.mixer.tensors(config, layer)), **under(mlp, self.mlp.tensors(c, layer))}
        tensors |= {k: t for name in norms for k, t in under(name, self.norm.tensors(c, layer)).items()}
        return tensors | self.per_layer.tensors(c, layer) | {"layer_scalar": Tensor((1,), "layer_scalars")}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        c = config.at_layer(layer)
        return (
            self.mixer.products(config, T, t, B, layer)
            | self.mlp.products(c, T, t, B, layer)
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

    def generation_macs(self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1,
                        windows: bool = True) -> int:  # fmt: skip
        """A prefill and n_new - 1 decode steps with the cache, or each step the whole sequence again without it."""
        if use_cache:
            passes = [(n_prompt, 0)] + [(1, n_prompt + k) for k in range(n_new - 1)]
        else:
            passes = [(n_prompt + k, 0) for k in range(n_new)]
        return sum(self.pass_macs(config, T, past, 1, B, windows) for T, past in passes)


NORM = RMSNorm(description="RMSNorm gains: four a block, the per-layer branch's, q's and k's, the final one")
GEMMA4 = Decoder(
    Gemma4Block(SharedKVAttention(), GatedMLP(activation="GELU, tanh approximation"), NORM),
    NORM,
    ScaledEmbedding(),
    after_logits=final_softcap,
    per_layer=PerLayerInputs(),
    symbols=SYMBOLS + ", P per-layer input width, L layers",
)

ARCHITECTURE = composed("gemma4", GEMMA4, Gemma4Formulas, config=Gemma4TextConfig, presets=PRESETS, label="Gemma 4",
                        reference=reference)  # fmt: skip
