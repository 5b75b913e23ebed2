"""DeepSeek-V3.2's stage table: DeepSeek-V3's (families/deepseek_v3/stages.py, q through its low-rank latent), with
the lightning indexer's stages after the cache and the gather of each query's chosen keys before the scores
(forward.py); scores, mask and mix say that they read those keys alone."""

from __future__ import annotations

from functools import cache

from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, Stage, StageTable, edited
from ..deepseek_v3.stages import deepseek_family

INDEXER = (
    Stage("index.q", ("attn.index_q",), "matmul", "q_i = c_q W_iq  (the indexer's Hi heads of di, from the query's "
          "latent)", "c_q [T, dq], W_iq [dq, Hi*di]", ATTENTION_PROJECTIONS),
    Stage("index.k", ("attn.index_k",), "matmul", "k_i = h W_ik  (one key of di a position, for every index head)",
          "h [T, D], W_ik [D, di]", ATTENTION_PROJECTIONS),
    Stage("index.k_norm", ("attn.index_k_norm",), "norm", "k_i = LayerNorm_i(k_i)", "k_i [T, di]"),
    Stage("index.split_heads", ("attn.index_q_heads",), "reshape", "q_i -> Hi heads of di", "q_i [T, Hi*di]"),
    Stage("index.rope", ("attn.index_q_rot", "attn.index_k_rot"), "rotate", "q_i, k_i = RoPE(their first dr numbers), "
          "in halves (rotate_half), not in MLA's interleaved pairs", "q_i [T, Hi, dr], k_i [T, dr]"),
    Stage("index.cache", ("attn.index_keys",), "cache", "K_i of the t positions (new rows written to the indexer's "
          "key cache: di numbers a position)", "k_i [T, di]"),
    Stage("index.scores", ("attn.index_qk",), "matmul", "S_i = q_i K_i^T  (every index head against every key it "
          "can see)", "q_i [T, Hi, di], K_i^T [di, t]", ATTENTION_SCORES),
    Stage("index.scale", ("attn.index_scaled",), "scale", "S_i = S_i x di^-0.5", "S_i [T, Hi, t]"),
    Stage("index.relu", ("attn.index_relu",), "activation", "S_i = ReLU(S_i)", "S_i [T, Hi, t]"),
    Stage("index.weights", ("attn.index_head_weights",), "matmul", "w = h W_iw  (each query's weight of each index "
          "head)", "h [T, D], W_iw [D, Hi]", ATTENTION_PROJECTIONS),
    Stage("index.weigh", ("attn.index_weights",), "scale", "w = w x Hi^-0.5", "w [T, Hi]"),
    Stage("index.sum", ("attn.index_sum",), "matmul", "I = w S_i  (the weighted sum over the index heads: each "
          "query's score of each key)", "w [T, 1, Hi], S_i [T, Hi, t]", ATTENTION_SCORES),
    Stage("index.mask", ("attn.index_scores",), "mask", "I[i, j] = -inf where j is in i's future", "I [T, t]"),
    Stage("index.topk", ("attn.index_chosen",), "select", "the s = min(t, ki) keys of largest I for each query "
          "(their indices)", "I [T, t]"),
)  # fmt: skip
GATHER = Stage(
    "gather",
    ("attn.chosen_keys", "attn.chosen_values"),
    "cache",
    "K_c, V_c = each query's s chosen keys and values  (where t > ki; else every key)",
    "K [H, t, dh], V [H, t, dv], chosen [T, s]",
)
# Where the indexer chose (t > ki), attention reads each query's s keys alone; the dense form transformers' eager
# attention computes (every T x t score, the keys not chosen masked) is what a watched or --dense-attention pass runs.
SPARSE_EQUATIONS = {
    "scores": "S = Q K_c^T  (each query against its s chosen keys, dh = dn + dr wide; dense form: all t)",
    "mask": "S = -inf where a chosen key is in the query's future (dense form: and at every key not chosen)",
    "mix": "Z = A V_c  (the s chosen values, dv wide; dense form: all t)",
}


@cache
def deepseek_v32_family() -> StageTable:
    """DeepSeek-V3's stages with q through the latent, the indexer's and the gather after the cache."""
    v3 = deepseek_family(True)
    block = edited(v3.block, after={"cache": (*INDEXER, GATHER)}, equations=SPARSE_EQUATIONS)
    symbols = (
        f"{v3.symbols}; Hi index heads of di, ki the keys a query attends to (index_topk), s = min(t, ki) the keys it "
        f"reads"
    )
    return StageTable("deepseek_v32", v3.embed, block, v3.final, symbols)


def stages_of(config) -> StageTable:
    return deepseek_v32_family()
