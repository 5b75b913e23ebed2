"""The OLMo 2 stage table: the Llama block's (families/llama/stages.py) without its two pre-norms, with q_norm and
k_norm on the whole projections before the split into heads, and a norm on each branch's output before its add."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...engine.stages import Stage, StageTable, edited
from ..llama.stages import llama_family

Q_NORM = Stage(
    "q_norm", ("attn.q_normed",), "norm", "q = RMSNorm_q(q)  (over all H*dh numbers, gains [H*dh])", "q [T, H*dh]"
)
K_NORM = Stage(
    "k_norm", ("attn.k_normed",), "norm", "k = RMSNorm_k(k)  (over all Hkv*dh numbers, gains [Hkv*dh])", "k [T, Hkv*dh]"
)
POST_ATTN_NORM = Stage(
    "post_attn_norm", ("attn.normed",), "norm", "o = RMSNorm_attn(o)  (the branch, before the add)", "o [T, D]"
)
POST_MLP_NORM = Stage(
    "post_mlp_norm", ("mlp.normed",), "norm", "m = RMSNorm_mlp(m)  (the branch, before the add)", "m [T, D]"
)
AFTER = {"v": (Q_NORM, K_NORM), "out": (POST_ATTN_NORM,), "mlp.down": (POST_MLP_NORM,)}
READ_X = ("q", "k", "v", "mlp.gate", "mlp.up")  # the products that read the stream x itself, not a normed h


@cache
def olmo2_family(bias: bool = False) -> StageTable:
    """Llama's table without ln_1 and ln_2, with OLMo 2's four norms in their place; biases on q, k, v and o where
    the config has them."""
    llama = llama_family(bias, bias)
    reading_x = {
        s.op: (
            replace(
                s, equation=s.equation.replace("= h W", "= x W"), reads=s.reads.replace("h [", "x ["), reads_stream=True
            ),
        )
        for s in llama.block
        if s.op in READ_X
    }
    block = edited(llama.block, instead={"ln_1": (), "ln_2": (), **reading_x}, after=AFTER)
    return StageTable("olmo2", llama.embed, block, llama.final, llama.symbols)


def stages_of(config) -> StageTable:
    """The table of an OLMo 2 config: its equations show the biases it has."""
    return olmo2_family(config.qkv_bias)
