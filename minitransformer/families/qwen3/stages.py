"""The Qwen3 stage table: the Llama block's (families/llama/stages.py) with q_norm and k_norm between the split
into heads and the rotation."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...engine.stages import Family, Stage
from ..llama.stages import llama_family

Q_NORM = Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])",
               "q [H, T, dh]")  # fmt: skip
K_NORM = Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains [dh])",
               "k [Hkv, T, dh]")  # fmt: skip


@cache
def qwen3_family(bias: bool = False, window: bool = False, some_layers: bool = False) -> Family:
    """Llama's table with the per-head q and k norms; biases on q, k, v and o where the config has them, and the
    sliding window's mask (on the layers that have one, when `some_layers`)."""
    llama = llama_family(bias, bias, False, window)
    block: list[Stage] = []
    for stage in llama.block:
        if stage.op == "mask" and some_layers:
            stage = replace(stage, equation=stage.equation + "  (the window: sliding_attention layers only)")
        block.append(stage)
        if stage.op == "split_heads":
            block += [Q_NORM, K_NORM]
    return Family("qwen3", llama.embed, tuple(block), llama.final, llama.symbols)


def stages_of(config) -> Family:
    """The table of a Qwen3 config: its equations show the biases and the sliding window it has."""
    window = config.sliding_window is not None
    return qwen3_family(config.qkv_bias, window, window and len(set(config.layer_types)) > 1)
