"""The Gemma family: Gemma 2 (Gemma2ForCausalLM) and Gemma 3's text model (Gemma3ForCausalLM), the Llama family's
parts (grouped-query attention, the gated MLP) with these differences, each a part of its own or an option of the
shared ones:

- the embeddings are multiplied by sqrt(D) (`embed_scale`, in the pass's dtype: float32 rounds sqrt(D), as
  transformers' buffer does);
- every RMSNorm scales by (1 + w), not w (parts/norms.py's RMSNorm, one_plus);
- four norms a block, the sandwich: the attention's output and the MLP's output are each normed before their residual
  add (`post_attn_norm`, `post_mlp_norm`), beside the usual norms before them (`ln_1`, `ln_2`);
- Gemma 3 norms each head of q and k (`q_norm`, `k_norm`) before rotating them, and rotates its sliding layers by a
  base of their own (config.rope(i));
- the scores are scaled by query_pre_attn_scalar^-1/2 and, where the config says (Gemma 2), soft-capped, c tanh(S / c),
  before the mask (`softcap`);
- layers alternate a sliding window and full attention: each layer's mask is its own window's (tape.layer(i) carries
  it);
- the logits may be soft-capped as the scores are (`final_softcap`).

gemma3 (Gemma3ForConditionalGeneration) is read as its text model, as transformers' Gemma3ForCausalLM reads a gemma3
config.json; the whole model's checkpoint keeps it under other names, which the loader refuses by name (an unexpected
tensor for a "gemma3 model ... read as its text model").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from ...engine.ops import add_mask, constant, group_heads, softmax, ungroup_heads
from ...engine.stages import Stage, by_op
from ...engine.tape import Tape
from ..llama.family import SYMBOLS
from ..parts.attention import PER_HEAD, ROPE, Attend, GroupedQueryAttention, core_stages
from ..parts.blocks import Sandwich
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..parts.part import Tensors
from . import reference
from .config import PRESETS, GemmaConfig

EMBED_SCALE = Stage(
    "embed_scale", ("embed_scale",), "scale", "x = x sqrt(D)  (in the model's dtype)", "x [T, D]", lens="hook_embed"
)


@dataclass(frozen=True)
class ScaledEmbedding(TokenEmbedding):
    """x = W_te[ids] sqrt(D): the lookup, scaled in the pass's dtype (float32 rounds sqrt(D), as transformers' buffer
    does)."""

    def stages(self, config: GemmaConfig) -> dict[str, Stage]:
        return super().stages(config) | by_op(EMBED_SCALE)

    def __call__(self, ids, p: SimpleNamespace, config: GemmaConfig, tape: Tape, pads=None):
        x = super().__call__(ids, p, config, tape, pads)
        tape = tape.declaring(self.declared(config))
        return tape.stage("embed_scale", np.multiply(x, constant(x, config.n_embd**0.5)), "T D")


# Gemma's attention core: the Llama family's stages with its scale, its soft-cap and its mask's equation.
CAPPED = "S = c tanh(S / c)  (c = attn_logit_softcapping)"
SOFTCAP = Stage("softcap", ("attn.softcapped",), "softcap", CAPPED, "S [H, T, t]")
MASK = "S[i, j] = -inf where j is in i's future or, on a sliding layer, more than the window behind"
LLAMA_CORE = core_stages()
CORE = by_op(
    LLAMA_CORE["scores"],
    replace(LLAMA_CORE["scale"], equation="S = S / sqrt(query_pre_attn_scalar)"),
    SOFTCAP,
    replace(LLAMA_CORE["mask"], equation=MASK),
    LLAMA_CORE["softmax"],
    LLAMA_CORE["mix"],
)


def attend(q, K, V, bias, config: GemmaConfig, at: Tape):
    """softmax(cap(q K^T / sqrt(query_pre_attn_scalar)) + bias) V, for each query head with its group's keys."""
    at = at.declaring(CORE)
    Hkv = config.n_kv_head
    Q, Kt = group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :]
    s = ungroup_heads(at.matmul("scores", Q, Kt, "Hkv G T dh, Hkv 1 dh t -> Hkv G T t"))
    s = at.stage("scale", np.multiply(s, constant(s, config.query_pre_attn_scalar**-0.5), out=at.scratch(s)), "H T t")
    if config.attn_logit_softcapping is not None:
        s = at.stage("softcap", softcap(s, config.attn_logit_softcapping, out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def softcap(s, cap: float, out=None):
    """cap tanh(s / cap): every number kept within (-cap, cap), nearly unchanged where it is small."""
    c = constant(s, cap)
    capped = np.divide(s, c, out=out)
    capped = np.tanh(capped, out=capped)
    return np.multiply(capped, c, out=capped)


QK_NORMS = by_op(
    Stage("q_norm", ("attn.q_norm",), "norm", "q = RMSNorm_q(q) (1 + w_q), each head on its own", "q [H, T, dh]"),
    Stage("k_norm", ("attn.k_norm",), "norm", "k = RMSNorm_k(k) (1 + w_k), each head on its own", "k [Hkv, T, dh]"),
)
LOCAL_ROPE = "q, k = RoPE(q, k): each pair turned by position x frequency (sliding layers: their own base)"


@dataclass(frozen=True)
class GemmaAttention(GroupedQueryAttention):
    """Grouped-query attention with Gemma's core; Gemma 3's (config.qk_norm) with each head of q and k normed, gains
    1 + w of dh, before the rotation."""

    qk_norm: str = PER_HEAD
    one_plus: bool = True
    core: Attend = attend
    kinds = {
        **GroupedQueryAttention.kinds,
        "qk_norms": "RMSNorm gains of each head of q and k, w_q and w_k [dh] (Gemma 3)",
    }

    def qk_norm_of(self, config: GemmaConfig) -> str:
        return self.qk_norm if config.qk_norm else ""

    def stages(self, config: GemmaConfig) -> dict[str, Stage]:
        rope = ROPE if config.local_rope_theta is None else replace(ROPE, equation=LOCAL_ROPE)
        return super().stages(config) | (QK_NORMS if config.qk_norm else {}) | by_op(rope)

    def tensors(self, config: GemmaConfig, layer: int = 0) -> Tensors:
        """Grouped-query attention's, the q and k norms' gains of their own kind."""
        norms = ("q_norm.weight", "k_norm.weight")
        tensors = super().tensors(config, layer)
        return {name: replace(t, kind="qk_norms") if name in norms else t for name, t in tensors.items()}


CAPPED_LOGITS = "logits = c tanh(logits / c)  (c = final_logit_softcapping)"
FINAL_SOFTCAP = Stage("final_softcap", ("final_softcap",), "softcap", CAPPED_LOGITS, "logits [R, V]")


@dataclass(frozen=True)
class FinalSoftcap:
    """The logits soft-capped as the scores are, where the config says (final_logit_softcapping)."""

    def __call__(self, logits, config: GemmaConfig, tape: Tape):
        cap = config.final_logit_softcapping
        return logits if cap is None else tape.stage(FINAL_SOFTCAP, softcap(logits, cap), "R V")

    def applies(self, config: GemmaConfig) -> bool:
        """Whether a config's logits are capped at all (Gemma 3's are not: the unembedding is the readout)."""
        return config.final_logit_softcapping is not None


final_softcap = FinalSoftcap()


GAINS = "RMSNorm gains (less one: scaled by 1 + w), four a block and one at the end"
NORM = RMSNorm(one_plus=True, gains_note=" (1 + w)", description=GAINS)
GEMMA = Decoder(
    Sandwich(GemmaAttention(), GatedMLP(activation="GELU, tanh approximation"), NORM),
    NORM,
    ScaledEmbedding(),
    after_logits=final_softcap,
    symbols=SYMBOLS,
)

ARCHITECTURE = composed("gemma", GEMMA, config=GemmaConfig, presets=PRESETS, label="Gemma family", reference=reference)
