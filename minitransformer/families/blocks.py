"""A block from its parts: the pre-norm block every family shares, x + mixer(norm(x)), then x + MLP(norm(x)).

A family hands its parts to one block: its mixer (its attention: Llama's grouped-query attention, Qwen3's with per-head
q and k norms, DeepSeek-V3's latent attention; a hybrid's state-space or linear-attention layer), its MLP or mixture
of experts, its norm, and the names its checkpoint gives each. A family writes a block of its own only where the
wiring itself differs (Gemma's sandwich norms, GPT-NeoX's parallel residual, OLMo 2's norms after each branch), and
then from the same parts.

The parts' signatures, which every family's parts keep:

- a mixer: (h [T, D], its weights, config, the layer's tape, the layer's `LayerInputs`) -> [T, D]. It reads what the
  decoder made for its layer: the handle of its cache (a KV cache's layer, or a recurrent layer's state), the mask
  of its window, the rotary tables of its rope, the pads of a batch;
- an MLP (or a mixture of experts): (h [T, D], its weights, config, the layer's tape) -> [T, D];
- a norm: (x, its weights, config) -> x normed (rms, layer_norm below; Gemma's (1 + w) RMSNorm).

`Residual` is a layer that is one branch, x + part(norm(x)) (Nemotron-H: each layer one of Mamba-2, attention, MLP or
mixture of experts). `ByKind` gives each kind of layer its own block (a hybrid's: Qwen3.5's Gated DeltaNet layers and
attention layers, each a `PreNorm` with its mixer and its checkpoint's names; Nemotron-H's, each a `Residual`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..engine.ops import layer_norm, rms_norm
from ..engine.tape import Tape


@dataclass(frozen=True)
class LayerInputs:
    """What a layer's mixer reads besides the stream, made by the decoder for that layer (families/decoder.py)."""

    cache: Any  # its cache's handle: KVCache.layer(i) (append(k, v) -> K, V), or a recurrent layer's state; None
    mask: np.ndarray | None  # the attention bias of its window (0 or -inf, [T, t] or [B, 1, T, t]); None: counting
    rotary: tuple  # (cos, sin) of its rope (families/rotary.py); () where its layer has none
    pads: np.ndarray | None  # a left-padded batch: the pad slots of each row (a recurrent state must skip them)


Mixer = Callable[[Any, SimpleNamespace, Any, Tape, LayerInputs], Any]
Mlp = Callable[[Any, SimpleNamespace, Any, Tape], Any]
Norm = Callable[[Any, SimpleNamespace, Any], Any]
Block = Callable[[Any, SimpleNamespace, Any, Tape, LayerInputs], Any]  # (x, weights, config, tape, inputs) -> x


def rms(x, w: SimpleNamespace, config):
    """RMSNorm with the gains w.weight and the config's norm_eps."""
    return rms_norm(x, w.weight, config.norm_eps)


def ln(x, w: SimpleNamespace, config):
    """LayerNorm with gains and biases, and the config's norm_eps."""
    return layer_norm(x, w.weight, w.bias, config.norm_eps)


@dataclass(frozen=True)
class PreNorm:
    """The pre-norm block: x + mixer(norm_1(x)), then x + mlp(norm_2(x)). `names`: where a layer's checkpoint keeps
    the first norm, the mixer, the second norm and the MLP ("input_layernorm", "self_attn", ...)."""

    mixer: Mixer
    mlp: Mlp
    norm: Norm = rms
    names: tuple[str, str, str, str] = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")

    def __call__(self, x, p: SimpleNamespace, config, at: Tape, inputs: LayerInputs):
        ln_1, mixer, ln_2, mlp = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        x = at.stage("resid_mid", x + self.mixer(h, mixer, config, at, inputs), "T D")
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")
        return at.stage("resid_post", x + self.mlp(h, mlp, config, at), "T D")


@dataclass(frozen=True)
class Residual:
    """A layer that is one branch: x + part(norm(x)), its stages named `stages` (the norm's, the add's). The part is a
    mixer; an MLP takes its place as `as_mixer(mlp)`."""

    part: Mixer
    norm: Norm = rms
    names: tuple[str, str] = ("norm", "mixer")
    stages: tuple[str, str] = ("ln_1", "resid_post")

    def __call__(self, x, p: SimpleNamespace, config, at: Tape, inputs: LayerInputs):
        norm, part = (getattr(p, name) for name in self.names)
        h = at.stage(self.stages[0], self.norm(x, norm, config), "T D")
        return at.stage(self.stages[1], x + self.part(h, part, config, at, inputs), "T D")


def as_mixer(mlp: Mlp) -> Mixer:
    """An MLP (or a mixture of experts) in a mixer's place: it reads nothing of the layer's inputs."""

    def mixer(h, p: SimpleNamespace, config, at: Tape, inputs: LayerInputs):
        return mlp(h, p, config, at)

    return mixer


@dataclass(frozen=True)
class ByKind:
    """A block for each kind of layer the config names (config.layer_types[i]): layer i runs its kind's."""

    blocks: Mapping[str, Block]

    def __call__(self, x, p: SimpleNamespace, config, at: Tape, inputs: LayerInputs):
        return self.blocks[config.layer_types[at.layer_index or 0]](x, p, config, at, inputs)
