"""Phi-3 (Phi3ForCausalLM): the Llama block (RMSNorm, grouped-query attention with rotary positions, a gated SiLU MLP,
no biases) with two fused products of its own, each cut apart by a named stage, and its rotary:

- q, k and v come out of ONE product, h W_qkv (qkv_proj, [H dh + 2 Hkv dh, D]): q the first H dh columns, k the next
  Hkv dh, v the last Hkv dh;
- the MLP's gate and up come out of ONE product, h W_gate_up (gate_up_proj, [2F, D]), cut in two: the gate the first F
  columns, up the last F (transformers' `chunk(2)`: gate first);
- RoPE turns only the first rd = int(dh x partial_rotary_factor) numbers of each head; the others pass;
- LongRoPE (rope_scaling "longrope", Phi-3-mini-128k and Phi-3.5): each frequency is divided by its own factor, the
  short factors while the pass's last position is within original_max_position_embeddings and the long ones beyond
  (transformers decides per call, on the largest position id), and cos and sin are multiplied by the attention factor
  (families/rotary.py's tables, which the decoder makes).

Against the Llama family the same multiply-accumulates, in fewer products; attention itself is the shared core.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from ...engine.ops import split_into_heads
from ...engine.stages import ATTENTION_PROJECTIONS, Stage, by_op
from ...engine.tape import Tape
from ..llama.family import SYMBOLS
from ..llama.reference import float64_throughout
from ..parts.attention import ROPE, GroupedQueryAttention, attend_to_cache
from ..parts.blocks import LayerInputs, PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import FusedGatedMLP
from ..parts.part import Products, Tensors, linear
from ..rotary import rotate_partial
from .config import PRESETS, Phi3Config

PARTIAL = "the first rd = dh x partial_rotary_factor numbers of each head"
LONGROPE = "; LongRoPE: frequencies / short or long factors, cos and sin x the attention factor"


@dataclass(frozen=True)
class FusedQKVAttention(GroupedQueryAttention):
    """Grouped-query attention whose q, k and v are one product, cut apart; RoPE on the first rd numbers of each
    head."""

    kinds = {
        "attention_qkv": "attention query, key and value weights in one, W_qkv [H*dh + 2*Hkv*dh, D]",
        "attention_out": "attention output weights W_o [D, H*dh]",
    }

    def stages(self, config: Phi3Config) -> dict[str, Stage]:
        turned = PARTIAL if config.rotary_dim < config.d_head else "each pair of numbers"
        rope = f"q, k = RoPE(q, k): {turned} turned by position x frequency{LONGROPE if config.rope_scaling else ''}"
        return by_op(
            Stage(
                "qkv",
                ("attn.qkv",),
                "matmul",
                "[q k v] = h W_qkv  (one product: H dh + 2 Hkv dh columns)",
                "h [T, D], W_qkv [D, H*dh+2*Hkv*dh]",
                ATTENTION_PROJECTIONS,
            ),
            Stage(
                "split_heads",
                ("attn.q", "attn.k", "attn.v"),
                "reshape",
                "q, k, v = the first H dh, next Hkv dh, last Hkv dh columns -> H, Hkv, Hkv heads of dh",
                "qkv [T, H*dh+2*Hkv*dh]",
            ),
            replace(ROPE, equation=rope),
        )

    def __call__(self, h, p: SimpleNamespace, config: Phi3Config, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        H, Hkv, dh = config.n_head, config.n_kv_head, config.d_head
        qkv = at.matmul("qkv", h, p.qkv_proj.weight.T, "T D, D H*dh+2*Hkv*dh -> T H*dh+2*Hkv*dh")
        q, k, v = qkv[..., : H * dh], qkv[..., H * dh : (H + Hkv) * dh], qkv[..., (H + Hkv) * dh :]
        split = (split_into_heads(q, H), split_into_heads(k, Hkv), split_into_heads(v, Hkv))
        q, k, v = at.stage("split_heads", split, "H T dh; Hkv T dh; Hkv T dh")
        q, k = at.stage("rope", tuple(rotate_partial(x, *inputs.rotary) for x in (q, k)), "H T dh; Hkv T dh")
        return attend_to_cache(q, k, v, p, config, at, inputs, self.core)

    def tensors(self, config: Phi3Config, layer: int = 0) -> Tensors:
        """qkv_proj [H dh + 2 Hkv dh, D] (q's rows first, then k's, then v's) and o_proj [D, H dh], no biases."""
        D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
        return {
            **linear("qkv_proj", q + 2 * kv, D, False, "attention_qkv"),
            **linear("o_proj", D, q, False, "attention_out"),
        }

    def products(self, config: Phi3Config, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Grouped-query attention's, with q, k and v in one product: (H + 2 Hkv) dh dot products a position."""
        separate = super().products(config, T, t, B, layer)
        qkv = (B * T * (config.n_head + 2 * config.n_kv_head) * config.d_head, config.n_embd)  # h [T, D] x W_qkv
        return {"qkv": qkv} | {op: separate[op] for op in ("scores", "mix", "out")}


# validate's float64 truth: the Llama family's (families/llama/reference.py), at Phi-3's frequencies (the first rd
# numbers of each head; LongRoPE's short or long factors, picked per call by the largest position).
NOTE = (
    "  (transformers' float64 Phi-3 computes RMSNorm and the rotary tables in float32; its reference here\n"
    "  has them in float64, as families/llama/reference.py explains)"
)

ARCHITECTURE = composed(
    "phi3",
    Decoder(PreNorm(FusedQKVAttention(), FusedGatedMLP()), biases="", symbols=SYMBOLS),
    config=Phi3Config,
    presets=PRESETS,
    label="Phi-3 family",
    float64_reference=float64_throughout,
    float64_note=NOTE,
)
