"""The Phi-3 family's stage table: the Llama block's stages (families/llama/stages.py), with q, k and v from one
product cut apart (as GPT-2's qkv and split_heads), the MLP's gate and up from one product cut in two, and RoPE on
the first rd numbers of each head."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, MLP, Stage, StageTable, edited
from ..llama.stages import llama_family


@cache
def phi3_family(window: bool = False, partial: bool = False, longrope: bool = False) -> StageTable:
    """Phi-3's stages; the equations show the sliding window, a partial rotation and LongRoPE where a config has
    them."""
    llama = llama_family(window=window)
    turned = "the first rd = dh x partial_rotary_factor numbers of each head" if partial else "each pair of numbers"
    scaled = "; LongRoPE: frequencies / short or long factors, cos and sin x the attention factor" if longrope else ""
    instead = {
        "q": Stage("qkv", ("attn.qkv",), "matmul", "[q k v] = h W_qkv  (one product: H dh + 2 Hkv dh columns)",
                   "h [T, D], W_qkv [D, H*dh+2*Hkv*dh]", ATTENTION_PROJECTIONS),
        "split_heads": Stage("split_heads", ("attn.q", "attn.k", "attn.v"), "reshape",
                             "q, k, v = the first H dh, next Hkv dh, last Hkv dh columns -> H, Hkv, Hkv heads of dh",
                             "qkv [T, H*dh+2*Hkv*dh]"),
        "rope": Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate",
                      f"q, k = RoPE(q, k): {turned} turned by position x frequency{scaled}",
                      "q [H, T, dh], k [Hkv, T, dh]"),
        "mlp.gate": Stage("mlp.gate_up", ("mlp.gate_up",), "matmul", "[g u] = h W_gate_up  (one product: 2F columns)",
                          "h [T, D], W_gate_up [D, 2F]", MLP),
        "mlp.up": Stage("mlp.split", ("mlp.gate", "mlp.up"), "reshape", "g, u = the first F, last F columns (gate first)",
                        "gu [T, 2F]"),
    }  # fmt: skip
    block = edited(llama.block, instead={op: (stage,) for op, stage in instead.items()} | {"k": (), "v": ()})
    return StageTable("phi3", llama.embed, block, llama.final, llama.symbols)


def stages_of(config) -> StageTable:
    """The table of a Phi-3 config: its equations show its sliding window, partial rotation and LongRoPE."""
    return phi3_family(
        config.sliding_window is not None, config.rotary_dim < config.d_head, config.rope_scaling is not None
    )
