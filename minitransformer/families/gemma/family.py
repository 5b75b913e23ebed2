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
from typing import Any

import numpy as np

from ...engine.ops import add_mask, constant, group_heads, softmax, ungroup_heads
from ...engine.stages import Stage, by_op
from ...engine.tape import Tape
from ..llama.family import SYMBOLS
from ..parts.attention import PER_HEAD, ROPE, Attend, GroupedQueryAttention, core_stages
from ..parts.blocks import LayerInputs, norm_stage, under
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..parts.part import Part, Products, Tensors
from . import reference
from .config import PRESETS, GemmaConfig

EMBED_SCALE = Stage("embed_scale", ("embed_scale",), "scale", "x = x sqrt(D)  (in the model's dtype)", "x [T, D]")


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


NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


@dataclass(frozen=True)
class Sandwich(Part):
    """Gemma's block, four norms: x + norm(attention(norm(x))), then x + norm(mlp(norm(x))), each branch normed on its
    way in and on its way out. `names`: where a layer's checkpoint keeps the attention, the MLP and the four norms (in
    the order it holds them)."""

    mixer: Any
    mlp: Any
    norm: Any
    names: tuple[str, ...] = ("self_attn", "mlp", *NORMS)

    def stages(self, config: GemmaConfig) -> dict[str, Stage]:
        norm, note, ln_2 = self.norm.label, self.norm.note, norm_stage("ln_2", self.norm, "2")
        o = f"o = {norm}_o(o){note}  (before the add)"
        m = f"m = {norm}_m(m){note}  (before the add)"
        return by_op(
            norm_stage("ln_1", self.norm, "1"),
            Stage("post_attn_norm", ("post_attn_norm",), "norm", o, "o [T, D]"),
            Stage("resid_mid", ("resid_mid",), "residual", f"x = x + {norm}_o(o)", "x, o [T, D]"),
            replace(ln_2, equation=f"{ln_2.equation}  (pre_feedforward_layernorm)"),
            Stage("post_mlp_norm", ("post_mlp_norm",), "norm", m, "m [T, D]"),
            Stage("resid_post", ("resid_post",), "residual", f"x = x + {norm}_m(m)", "x, m [T, D]"),
        )

    def __call__(self, x, p: SimpleNamespace, config: GemmaConfig, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        mixer, mlp, ln_1, post_attn, ln_2, post_mlp = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        o = self.mixer(h, mixer, config, at, inputs)
        o = at.stage("post_attn_norm", self.norm(o, post_attn, config), "T D")
        x = at.stage("resid_mid", x + o, "T D")
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")
        m = self.mlp(h, mlp, config, at)
        m = at.stage("post_mlp_norm", self.norm(m, post_mlp, config), "T D")
        return at.stage("resid_post", x + m, "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: GemmaConfig, layer: int = 0) -> Tensors:
        mixer, mlp, *norms = self.names
        tensors = {**under(mixer, self.mixer.tensors(config, layer)), **under(mlp, self.mlp.tensors(config, layer))}
        return tensors | {k: t for name in norms for k, t in under(name, self.norm.tensors(config, layer)).items()}

    def products(self, config: GemmaConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


CAPPED_LOGITS = "logits = c tanh(logits / c)  (c = final_logit_softcapping)"
FINAL_SOFTCAP = Stage("final_softcap", ("final_softcap",), "softcap", CAPPED_LOGITS, "logits [R, V]")


def final_softcap(logits, config: GemmaConfig, tape: Tape):
    """The logits soft-capped as the scores are, where the config says (final_logit_softcapping)."""
    if config.final_logit_softcapping is None:
        return logits
    return tape.stage(FINAL_SOFTCAP, softcap(logits, config.final_logit_softcapping), "R V")


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
