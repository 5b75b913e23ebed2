"""The Llama family in the table of families, and the record of a family that differs from it only in its attention
(Qwen3; the made-up family of tests/families/test_made_up_family.py): its config, its attention and its presets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ...engine.stages import Stage, StageTable
from ..architecture import Architecture, Formulas, kind_rules
from ..blocks import Mixer, PreNorm
from ..config import ModelConfig
from ..decoder import Decoder
from . import forward, layout, reference, stages
from .config import PRESETS, LlamaConfig
from .formulas import FORMULAS


@dataclass(frozen=True)
class Attention:
    """An attention in the Llama block's place, with what it brings to its family's record: its stages, its tensors
    (under each layer's self_attn) and their kinds, and the RMSNorms it adds a layer (validate's float64 reference
    recomputes them)."""

    forward: Mixer  # (h, its weights, config, the layer's tape, the layer's inputs) -> o [T, D]
    stages: Callable[[Any], tuple[Stage, ...]]  # config -> its stages, in the order it runs them
    every: tuple[Stage, ...]  # every stage it can have (the record's every_stage)
    shapes: Callable[[Any, int], dict[str, tuple[int, ...]]] = layout.attention_shapes  # (config, layer) -> tensors
    kind_of: tuple[tuple[str, str], ...] = ()  # (pattern, kind) of the tensors it adds to the Llama family's
    norms: int = 0


def llama_attention_stages(config: LlamaConfig) -> tuple[Stage, ...]:
    return stages.attention(config.qkv_bias, config.o_bias, stages.mask(config.sliding_window is not None))


GROUPED_QUERY = Attention(forward.attention, llama_attention_stages, stages.attention(True, True, stages.WINDOW_MASK))


def llama_like(
    name: str,
    model_types: tuple[str, ...],
    config: type[ModelConfig],
    presets: dict,
    attention: Attention = GROUPED_QUERY,
    formulas: Formulas = FORMULAS,
    **record: Any,
) -> Architecture:
    """The record of a family whose block is the Llama block with `attention` (Qwen3's: q and k normed per head):
    the Llama family's decoder, gated MLP, checkpoint and closed forms (`formulas`, where its attention changes
    them), and its attention's stages and tensors. `record`: the rest of Architecture's fields (label,
    reference_classes, float64_note...)."""

    def stage_table(config: Any) -> StageTable:
        block = stages.pre_norm(attention.stages(config), stages.gated_mlp(config.mlp_bias))
        return StageTable(name, stages.EMBED, block, stages.FINAL, stages.SYMBOLS)

    def shapes(config: Any) -> dict[str, tuple[int, ...]]:
        return layout.pre_norm_shapes(config, attention.shapes, layout.gated_mlp_shapes)

    every = StageTable(
        name, stages.EMBED, stages.pre_norm(attention.every, stages.gated_mlp(True)), stages.FINAL, stages.SYMBOLS
    )
    checkpoint = layout.llama_layout(shapes, layout.KINDS, layout.KIND_OF + kind_rules(*attention.kind_of))
    norms = partial(reference.float64_throughout, norms_per_layer=2 + attention.norms)
    return Architecture(
        name=name,
        model_types=model_types,
        config=config,
        presets=presets,
        forward=Decoder(PreNorm(attention.forward, forward.mlp)),
        stage_table=stage_table,
        every_stage=every,
        layout=checkpoint,
        formulas=formulas,
        float64_reference=norms,
        **record,
    )


ARCHITECTURE = llama_like(
    "llama", LlamaConfig.model_types, LlamaConfig, PRESETS, label="Llama family", float64_note=reference.NOTE
)
