"""GPT-NeoX (GPT-NeoX-20B, Pythia), as transformers' GPTNeoXForCausalLM computes it: LayerNorms with biases and biased
products as GPT-2's, rotary positions as the Llama family's, between embed_in and an untied embed_out, and these parts
of its own:

- q, k and v come from one fused product (query_key_value), as GPT-2's, but its 3D outputs are laid out head by head,
  [H, 3, dh] (each head's q, k and v side by side), where GPT-2's are [3, H, dh]: the split is a reshape;
- partial rotary: only the first r = rotary_pct x dh numbers of each head's q and k are turned, the other dh - r pass
  through unchanged (Pythia: a quarter);
- the parallel residual (use_parallel_residual, the default): attention and MLP both read the block's input,
  x + attn(ln1(x)) + mlp(ln2(x)), in one sum; serial when false, the pre-norm block of the same parts.

The scores, mask, softmax and mix are the attention core of the Llama family's (parts/attention.py's `attend`), every
head its own key/value head, shown per head. Weights are stored as transformers' nn.Linear holds them, [out, in].
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from ...engine.ops import merge_heads, ungroup_heads
from ...engine.stages import ATTENTION_PROJECTIONS, Stage, by_op
from ...engine.tape import Tape
from ..gpt2.family import SYMBOLS  # the same symbols as GPT-2's
from ..parts.attention import (
    MULTI_HEAD_CACHE,
    attend,
    bias_of,
    core_stages,
    fused_multi_head_products,
    multi_head_vs_weights,
)
from ..parts.blocks import LayerInputs, PreNorm, held_under, norm_stage
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.mlps import UngatedMLP
from ..parts.norms import LayerNorm
from ..parts.part import Part, Products, Tensors, linear, plus
from ..rotary import rotate_partial
from . import reference
from .config import PRESETS, NeoXConfig

# What the core's products read, per head: every head is its own group of one.
PER_HEAD = {
    "scores": ("S = Q K^T  (per head)", "Q [H, 1, T, dh], K^T [H, 1, dh, t]"),
    "mix": ("Z = A V  (per head)", "A [H, 1, T, t], V [H, 1, t, dh]"),
}


@dataclass(frozen=True)
class HeadByHeadAttention(Part):
    """Causal multi-head attention from the fused query_key_value laid out head by head, with partial rotary
    positions; biases on its two products where attention_bias."""

    kinds = {
        "attention_qkv": "attention Q, K, V weights W_qkv [3D, D], head by head",
        "attention_out": "attention output weights W_o [D, D]",
    }

    def stages(self, config: NeoXConfig) -> dict[str, Stage]:
        b, r, dh = (lambda n: plus(config.attention_bias, n)), config.rotary_dims, config.d_head
        core = core_stages()
        core |= {op: replace(core[op], equation=equation, reads=reads) for op, (equation, reads) in PER_HEAD.items()}
        turned = f"q, k = RoPE on each head's first r = {r} of its {dh} numbers; the other {dh - r} pass through"
        return by_op(
            Stage(
                "qkv",
                ("attn.qkv",),
                "matmul",
                f"[q k v per head] = h W_qkv{b('qkv')}  (one product, head by head)",
                "h [T, D], W_qkv [D, 3D]",
                ATTENTION_PROJECTIONS,
            ),
            Stage(
                "split_heads",
                ("attn.q", "attn.k", "attn.v"),
                "reshape",
                "[T, 3D] as [T, H, 3, dh] -> Q, K, V of H heads of dh",
                "[T, 3D]",
            ),
            Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", turned, "q, k [H, T, dh]"),
            MULTI_HEAD_CACHE,
            *core.values(),
            Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, D]", "Z [H, T, dh]"),
            Stage("out", ("attn.out",), "matmul", f"o = Z W_o{b('o')}", "Z [T, D], W_o [D, D]", ATTENTION_PROJECTIONS),
        )

    def __call__(self, h, p: SimpleNamespace, config: NeoXConfig, at: Tape, inputs: LayerInputs):
        at = at.declaring(declared := self.declared(config))
        qkv = at.matmul("qkv", h, p.query_key_value.weight.T, "T D, D 3D -> T 3D", bias=bias_of(p.query_key_value))
        q, k, v = at.stage("split_heads", split_heads_by_head(qkv, config.n_head), "H T dh")
        q, k = at.stage("rope", (rotate_partial(q, *inputs.rotary), rotate_partial(k, *inputs.rotary)), "H T dh")
        K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh")
        # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
        z = at.in_row_chunks(
            lambda q, K, V, bias, at: attend(q, K, V, bias, config, at, declared), q, K, V, inputs.mask
        )
        z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T D")
        w_o, b_o = self.output_projection(p)
        return at.matmul("out", z, w_o, "T D, D D -> T D", bias=b_o)

    def output_projection(self, p: SimpleNamespace):
        """W_o [D, D] as the output product reads it (its rows head by head: head h's share is z_h W_o[h], as direct
        logit attribution splits a serial block's attention), and its bias (or None)."""
        return p.dense.weight.T, bias_of(p.dense)

    def tensors(self, config: NeoXConfig, layer: int = 0) -> Tensors:
        """query_key_value [3D, D] (its rows head by head, [H, 3, dh]) and dense [D, D], biased where attention_bias."""
        D, b = config.n_embd, config.attention_bias
        return {**linear("query_key_value", 3 * D, D, b, "attention_qkv"), **linear("dense", D, D, b, "attention_out")}

    def products(self, config: NeoXConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return fused_multi_head_products(config, T, t, B)

    def attention_vs_weights(self, c: NeoXConfig, mlp: Any) -> tuple[str, str, str]:
        return multi_head_vs_weights(c)


def split_heads_by_head(qkv, n_head: int):
    """[..., T, 3D] laid out [H, 3, dh] -> Q, K, V each [..., H, T, dh]: views, no copies (GPT-2's split_heads reads
    [3, H, dh])."""
    *lead, T, three_d = qkv.shape
    heads = qkv.reshape(*lead, T, n_head, 3, three_d // (3 * n_head))
    return tuple(heads[..., i, :].swapaxes(-3, -2) for i in range(3))


@dataclass(frozen=True)
class ParallelResidual(Part):
    """x + attn(norm_1(x)) + mlp(norm_2(x)): both branches read the block's input x, added back in one sum (a config
    with use_parallel_residual); a config without it runs the same parts one after the other, the pre-norm block
    (`serial`). The checkpoint keeps both norms before the attention and the MLP, whichever the wiring."""

    mixer: Any
    mlp: Any
    norm: Any
    names: tuple[str, str, str, str] = ("input_layernorm", "attention", "post_attention_layernorm", "mlp")

    def stages(self, config: NeoXConfig) -> dict[str, Stage]:
        ln_2 = f"h = {self.norm.label}_2(x)  (the block's input x, as ln_1's)"
        parallel = "parallel: x + attn(ln1(x)) + mlp(ln2(x))"
        return by_op(
            norm_stage("ln_1", self.norm, "1"),
            Stage("ln_2", ("ln_2",), "norm", ln_2, "x [T, D]", reads_stream=True),
            Stage("resid_post", ("resid_post",), "residual", parallel, "x, o, m [T, D]"),
        )

    def __call__(self, x, p: SimpleNamespace, config: NeoXConfig, at: Tape, inputs: LayerInputs):
        if not config.use_parallel_residual:
            return self.serial(x, p, config, at, inputs)
        at = at.declaring(self.declared(config))
        ln_1, mixer, ln_2, mlp = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        o = self.mixer(h, mixer, config, at, inputs)
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")  # x itself, not x + o
        m = self.mlp(h, mlp, config, at)
        return at.stage("resid_post", m + o + x, "T D")  # in transformers' order: (m + o) + x

    @property
    def serial(self) -> PreNorm:
        return PreNorm(self.mixer, self.mlp, self.norm, self.names)

    def wired(self, config: NeoXConfig) -> Part:
        """The block a config runs: this one, or the serial pre-norm block (where analyses may split its parts)."""
        return self if config.use_parallel_residual else self.serial

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: NeoXConfig, layer: int = 0) -> Tensors:
        ln_1, mixer, ln_2, mlp = self.names
        return held_under(config, layer, ((ln_1, self.norm), (ln_2, self.norm), (mixer, self.mixer), (mlp, self.mlp)))

    def products(self, config: NeoXConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


NORM = LayerNorm()
EMBED = TokenEmbedding(
    "embed_in", "x = W_in[ids]  (positions enter later, by rotating q and k)", "token embedding W_in [V, D]"
)
NEOX = Decoder(
    ParallelResidual(HeadByHeadAttention(), UngatedMLP(("dense_h_to_4h", "dense_4h_to_h")), NORM),
    NORM,
    EMBED,
    embedding="embed_in",
    final_norm="final_layer_norm",
    unembedding="embed_out",
    prefix="gpt_neox.",
    # older checkpoints carry the causal mask and the rotary frequencies, which the model computes itself
    ignored=r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",
    biases="biases of the linear layers",
    untied="unembedding W_out [V, D] (embed_out, untied)",
    symbols=SYMBOLS,
)

# Every stage: those of the sequential residual too (use_parallel_residual false: resid_mid), which no preset has.
ARCHITECTURE = composed(
    "neox",
    NEOX,
    config=NeoXConfig,
    presets=PRESETS,
    label="GPT-NeoX family",
    every_stage=NEOX.stage_table("neox", replace(PRESETS["pythia-70m"], use_parallel_residual=False)),
    float64_reference=reference.float64_rotary_tables,
    float64_note=reference.NOTE,
)
