"""gpt-oss in the table of families (transformers' GptOssForCausalLM): the Llama family's pre-norm block with
grouped-query attention whose softmax weighs each head's sink, and a mixture of experts in place of its MLP
(families/parts/moe.py: a router with a bias, a softmax over each token's k largest logits, fused and clamped SwiGLU
experts with biases). Against Mixtral:
- attention sinks (its own part here): each head h has a learned logit s_h that joins every query's row of scores as
  one more column before the softmax, and whose weight is then dropped: A = softmax([S | s_h])[:, :t], so a head may
  give its query's weight to no key at all (rows of A sum to less than 1);
- sliding-window layers (a window of W keys) alternate with full ones, as layer_types says: each layer's tape carries
  its window, and the mask is that window's;
- biases on q, k, v and o; YaRN rotary positions (families/rotary.py: frequencies blended between kept and slowed
  ones, the cos and sin tables multiplied by the attention factor).

Its checkpoint (as transformers 5 saves it): the Llama family's names for attention (with biases) and norms, each
layer's self_attn.sinks [H], and in mlp the router and the E experts fused in 3-D tensors stored [in, out]."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache, partial
from types import SimpleNamespace
from typing import Any

from ...engine.ops import add_mask, group_heads, softmax, ungroup_heads
from ...engine.stages import Stage, by_op
from ...engine.tape import Tape
from ..mixtral.family import SYMBOLS
from ..parts.attention import MASK, SOME_LAYERS, WINDOW_MASK, Attend, GroupedQueryAttention, core_stages, scale_scores
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.moe import FusedClampedExperts, Mixture, TopKSoftmaxRouter
from ..parts.part import Products, Tensor, Tensors
from ..parts.sinks import SINKS, SOFTMAX, with_sinks
from . import reference
from .config import PRESETS, GptOssConfig


@cache
def sink_stages(window: bool) -> dict[str, Stage]:
    """The attention core's stages with the sinks between the mask and the softmax; the mask's equation shows the
    window, on the sliding_attention layers, where the config has one."""
    core = core_stages(WINDOW_MASK + SOME_LAYERS if window else MASK)
    return by_op(core["scores"], core["scale"], core["mask"], SINKS, SOFTMAX, core["mix"])


def attend_with_sinks(sinks, q, K, V, bias, config: GptOssConfig, at: Tape):
    """The attention core (parts/attention.py's attend) with each head's sink logit as one more column of its scores,
    dropped after the softmax."""
    at, Hkv = at.declaring(sink_stages(config.sliding_window is not None)), config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t")
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    s = at.stage("sinks", with_sinks(s, sinks), "H T t+1")
    a = at.stage("softmax", softmax(s, out=at.scratch(s))[..., :-1], "H T t")  # the sink's weight dropped
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


@dataclass(frozen=True)
class SinkAttention(GroupedQueryAttention):
    """Grouped-query attention whose softmax also weighs each head's sink logit (self_attn.sinks [H]); its biases are
    a kind of their own."""

    kinds = {
        **GroupedQueryAttention.kinds,
        "attention_biases": "attention biases b_q, b_k, b_v, b_o",
        "attention_sinks": "attention sinks: one logit per head [H]",
    }

    def core_of(self, p: SimpleNamespace) -> Attend:
        return partial(attend_with_sinks, p.sinks)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        tensors = {
            name: replace(t, kind="attention_biases") if t.kind == "biases" else t
            for name, t in super().tensors(config, layer).items()
        }
        return tensors | {"sinks": Tensor((config.n_head,), "attention_sinks")}


EXPERTS = FusedClampedExperts()
GPT_OSS = Decoder(PreNorm(SinkAttention(), Mixture(TopKSoftmaxRouter(), EXPERTS)), biases="", symbols=SYMBOLS)


class GptOssFormulas(DecoderFormulas):
    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1, layer: int = 0) -> Products:
        """The products of layer `layer` (by default the first), whose window they read, and the logits'."""
        return self.decoder.products(config, T, t, B, layer, R)


ARCHITECTURE = composed(
    "gpt_oss", GPT_OSS, GptOssFormulas, config=GptOssConfig, presets=PRESETS, label="gpt-oss", reference=reference
)
