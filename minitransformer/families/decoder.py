"""The decoder around the blocks, one for every family: embed the tokens, run each layer's block on its own tape with
what its layer needs (its cache's handle, the mask of its window, the rotary tables of its rope), the final norm,
the logits. A family hands it its block and says where its checkpoint keeps the rest; `Decoder(...)` is its forward
pass (architecture.Forward).

Each layer's tape carries its window (tape.layer(i)), and the decoder makes each window's mask (for the layers that
attend: those that keep keys and values, config.layer_cache(i)) and each rope's tables (config.rope(i)) once a pass:
layers that alternate a window and full attention (Gemma, gpt-oss), or a local rotary base (Gemma 3), each get their
own; a hybrid's recurrent layers (Qwen3.5's Gated DeltaNet, a Mamba-2 mixer) get neither. Counting without weights (shape-only stand-ins) makes no masks and tables of the right
shape, no values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..engine.kvcache import KeysValues, KVCache
from ..engine.ops import attention_bias, slot_positions
from ..engine.shapes import ShapeOnly
from ..engine.tape import Dims, Tape
from . import rotary
from .blocks import Block, LayerInputs, Norm, rms
from .rotary import Rope

Embed = Callable[[np.ndarray, SimpleNamespace, Any, Tape, Any], Any]  # (ids, weights, config, tape, pads) -> x


@dataclass(frozen=True)
class Decoder:
    """A decoder-only model: the embedding, then `block` on each layer, the final norm `norm`, the logits h W_U^T
    (W_U the token embedding when the config ties them), and `after_logits` where the family has a step there
    (Gemma's soft-cap). The embedding is x = W_te[ids], a lookup (positions enter later, by rotating q and k), unless
    the family has its own `embed` (GPT-2's learned positions, Gemma's scale). The names are the checkpoint's, without
    its prefix."""

    block: Block
    norm: Norm = rms
    embed: Embed | None = None
    embedding: str = "embed_tokens"  # the token embedding's module (tied: the unembedding too)
    layers: str = "layers"
    final_norm: str = "norm"
    unembedding: str = "lm_head"  # untied
    # GPT-2's attention masks its own future (from a table of the whole context): the decoder makes a mask only for a
    # batch's pads. Every other family's layers read their window's mask (an attention bias) from the decoder.
    masks_its_future: bool = False
    after_logits: Callable[[Any, Any, Tape], Any] | None = None

    def __call__(
        self,
        ids: np.ndarray,
        p: SimpleNamespace,
        config: Any,
        cache: KVCache | None,
        tape: Tape,
        all_positions: bool,
        pads: np.ndarray | None = None,
    ) -> np.ndarray:
        """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only.

        `pads` (a batch of left-padded rows): the first pads[b] slots of row b hold no token; each row's
        positions start at its first real token, and pad keys are masked (ops.attention_bias)."""
        d = tape.dims
        if self.embed is None:
            x = tape.stage("embed", getattr(p, self.embedding).weight[ids], "T D")
        else:
            x = self.embed(ids, p, config, tape, pads)
        shape_only = isinstance(x, ShapeOnly)
        tables: dict[Rope, tuple] = {}  # each rope's cos and sin, made once a pass
        masks: dict[int | None, np.ndarray | None] = {}  # each window's attention bias, the same for every head
        for i, layer_params in enumerate(getattr(p, self.layers)):
            at = tape.layer(i)  # its dims carry its window
            e, rope = at.dims, config.rope(i)
            if rope is not None and rope not in tables:
                tables[rope] = rotary_tables(rope, d, x, pads)
            attends = isinstance(config.layer_cache(i), KeysValues)  # a hybrid's recurrent layers read no mask
            if attends and e.window not in masks:
                unmasked = shape_only or (pads is None and self.masks_its_future)
                masks[e.window] = (
                    None if unmasked else attention_bias(e.past, e.start, e.T, e.t, e.window, x.dtype, pads)
                )
            kv = cache.layer(i) if cache is not None else None
            inputs = LayerInputs(kv, masks[e.window] if attends else None, () if rope is None else tables[rope], pads)
            x = self.block(x, layer_params, config, at, inputs)
        h = tape.stage("ln_f", self.norm(x, getattr(p, self.final_norm), config), "T D")
        if not all_positions:
            h = tape.stage("last", h[..., -1:, :], "R D")
        if cache is not None:
            cache.advance(d.T)
        unembedding = getattr(p, self.embedding if config.tie_word_embeddings else self.unembedding).weight
        logits = tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")  # .T is a view: no copy of W_U
        return logits if self.after_logits is None else self.after_logits(logits, config, tape)


def rotary_tables(rope: Rope, d: Dims, x, pads) -> tuple:
    """cos and sin of this pass's positions at the rope's frequencies ([T, r], or [B, 1, T, r] with pads: one for
    every head), r the numbers of a head it turns; shape-only stand-ins when counting."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly((d.T, rope.turned)), ShapeOnly((d.T, rope.turned))
    at = slot_positions(d.past, d.T, pads)  # [T], or [B, T]: each row's count starts at its first real token
    return rotary.tables(rope, at if pads is None else at[:, None], x.dtype)
