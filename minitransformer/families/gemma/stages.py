"""The Gemma family's stage table: the Llama block's (llama/stages.py) with Gemma's stages in their place, and the
equations that differ rewritten (the vocabulary is the engine's: engine/stages.py)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import Stage, StageTable, edited
from ..llama.stages import llama_family

# Stages Gemma adds, each after the stage it follows; none is a product (zero dot products).
EMBED_SCALE = Stage("embed_scale", ("embed_scale",), "scale", "x = x sqrt(D)  (in the model's dtype)", "x [T, D]")
Q_NORM = Stage("q_norm", ("attn.q_norm",), "norm", "q = RMSNorm_q(q) (1 + w_q), each head on its own", "q [H, T, dh]")
K_NORM = Stage("k_norm", ("attn.k_norm",), "norm", "k = RMSNorm_k(k) (1 + w_k), each head on its own", "k [Hkv, T, dh]")
SOFTCAP = Stage(
    "softcap", ("attn.softcapped",), "softcap", "S = c tanh(S / c)  (c = attn_logit_softcapping)", "S [H, T, t]"
)
POST_ATTN_NORM = Stage(
    "post_attn_norm", ("post_attn_norm",), "norm", "o = RMSNorm_o(o) (1 + w)  (before the add)", "o [T, D]"
)
POST_MLP_NORM = Stage(
    "post_mlp_norm", ("post_mlp_norm",), "norm", "m = RMSNorm_m(m) (1 + w)  (before the add)", "m [T, D]"
)
FINAL_SOFTCAP = Stage(
    "final_softcap",
    ("final_softcap",),
    "softcap",
    "logits = c tanh(logits / c)  (c = final_logit_softcapping)",
    "logits [R, V]",
)

# Equations that read otherwise in a Gemma block.
EQUATIONS = {
    "ln_1": "h = RMSNorm_1(x) (1 + w)",
    "ln_2": "h = RMSNorm_2(x) (1 + w)  (pre_feedforward_layernorm)",
    "ln_f": "h = RMSNorm_f(x) (1 + w)",
    "scale": "S = S / sqrt(query_pre_attn_scalar)",
    "mask": "S[i, j] = -inf where j is in i's future or, on a sliding layer, more than the window behind",
    "mlp.act": "a = act(g)  (GELU, tanh approximation)",
    "resid_mid": "x = x + RMSNorm_o(o)",
    "resid_post": "x = x + RMSNorm_m(m)",
}
LOCAL_ROPE = "q, k = RoPE(q, k): each pair turned by position x frequency (sliding layers: their own base)"


@cache
def gemma_family(
    bias: bool = False,
    qk_norm: bool = True,
    attn_softcap: bool = True,
    final_softcap: bool = True,
    local_rope: bool = True,
) -> StageTable:
    """The Gemma block's stages: every one of them by default; a config's table has those it computes."""
    llama = llama_family(bias, bias, False, window=True)
    after = {
        "embed": (EMBED_SCALE,),
        "split_heads": (Q_NORM, K_NORM) if qk_norm else (),
        "scale": (SOFTCAP,) if attn_softcap else (),
        "out": (POST_ATTN_NORM,),
        "mlp.down": (POST_MLP_NORM,),
        "logits": (FINAL_SOFTCAP,) if final_softcap else (),
    }
    equations = EQUATIONS | ({"rope": LOCAL_ROPE} if local_rope else {})
    embed, block, final = (edited(stages, after=after, equations=equations) for stages in llama.parts)
    return StageTable("gemma", embed, block, final, llama.symbols)


def stages_of(config) -> StageTable:
    """The table of a Gemma config: Gemma 3's q and k norms, the soft-caps where the config has them."""
    return gemma_family(
        config.qkv_bias,
        config.qk_norm,
        config.attn_logit_softcapping is not None,
        config.final_logit_softcapping is not None,
        config.local_rope_theta is not None,
    )
