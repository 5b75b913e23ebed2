"""Qwen3's attention, as transformers' Qwen3Attention computes it: the Llama family's (families/llama/forward.py),
with one step more. After q and k are split into heads, each head's q and k is RMS-normalised over its dh numbers,
with gains of dh shared by every head (q_norm, k_norm), and only then rotated. The norms are no products: the
products are the Llama family's, and the parameters Llama's + 2 dh a layer.

What it brings to the record (families/llama/family.py's Attention): its stages, its two tensors and their kind, the
two norms validate's float64 reference recomputes, and its closed form of the parameters.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

from ...engine.ops import rms_norm, rotate
from ...engine.stages import Stage, edited
from ...engine.tape import Tape
from ..blocks import LayerInputs
from ..llama import stages
from ..llama.config import LlamaConfig
from ..llama.family import Attention
from ..llama.formulas import LlamaFormulas
from ..llama.forward import attend_to_cache, heads
from ..llama.layout import L, attention_shapes
from .config import Qwen3Config


def attention(h, p: SimpleNamespace, config: Qwen3Config, at: Tape, inputs: LayerInputs):
    """Llama's grouped-query attention, with q and k RMS-normalised per head between the split and the rotation."""
    eps = config.norm_eps
    q, k, v = heads(h, p, config, at)
    q = at.stage("q_norm", rms_norm(q, p.q_norm.weight, eps), "H T dh")  # over each head's dh, gains [dh]
    k = at.stage("k_norm", rms_norm(k, p.k_norm.weight, eps), "Hkv T dh")
    q, k = at.stage("rope", (rotate(q, *inputs.rotary), rotate(k, *inputs.rotary)), "H T dh; Hkv T dh")
    return attend_to_cache(q, k, v, p, config, at, inputs)


NORMS = (
    Stage("q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])",
          "q [H, T, dh]"),
    Stage("k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (each head over its dh numbers, gains [dh])",
          "k [Hkv, T, dh]"),
)  # fmt: skip


@cache
def attention_stages(bias: bool = False, window: bool = False, some_layers: bool = False) -> tuple[Stage, ...]:
    """Llama's attention stages with the per-head q and k norms after the split; biases on q, k, v and o where the
    config has them, and the sliding window's mask (on the layers that have one, when `some_layers`)."""
    return edited(stages.attention(bias, bias, stages.mask(window, some_layers)), after={"split_heads": NORMS})


def stages_of(config: Qwen3Config) -> tuple[Stage, ...]:
    window = config.sliding_window is not None
    return attention_stages(config.qkv_bias, window, window and len(set(config.layer_types)) > 1)


def shapes(config: Qwen3Config, layer: int = 0) -> dict[str, tuple[int, ...]]:
    """Llama's q_proj, k_proj, v_proj and o_proj, then q_norm.weight and k_norm.weight [dh]."""
    return attention_shapes(config) | {"q_norm.weight": (config.d_head,), "k_norm.weight": (config.d_head,)}


class Qwen3Formulas(LlamaFormulas):
    def attention_parameters(self, config: LlamaConfig) -> int:
        """Llama's (biases on q, k, v and o when attention_bias) + 2 dh: the q and k norms' gains."""
        return super().attention_parameters(config) + 2 * config.d_head


QK_NORMED = Attention(
    attention,
    stages_of,
    attention_stages(True, True, True),
    shapes,
    kind_of=((L + r"self_attn\.[qk]_norm\.weight", "norms"),),
    norms=2,
)
