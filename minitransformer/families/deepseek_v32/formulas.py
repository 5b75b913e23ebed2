"""DeepSeek-V3.2's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by
the tests to the ledger of real and shape-only runs: DeepSeek-V3's (families/deepseek_v3/formulas.py) and the
lightning indexer's.

Symbols: DeepSeek-V3's, and Hi index heads of di, ki = index_topk the keys a query attends to, s = min(t, ki).

Against DeepSeek-V3: three more products with weights a position, c_q W_iq [dq, Hi di], h W_ik [D, di] and h W_iw
[D, Hi]; two that grow with the context, the index scores (Hi t dot products of di a query) and their weighted sum
over the index heads (t of Hi), Hi (di + 1) MACs a (query, key) pair for every key in reach; and attention's scores
and mix over s keys a query, not t: where t > ki, H (dh + dv) s MACs a query, T ki pairs a head (a query that sees
fewer than ki is given ki all the same, the rest masked, as transformers' top-k gives them). The dense form beside
it, what transformers' eager attention computes, is every T x t pair.
"""

from __future__ import annotations

from ..deepseek_v3 import formulas as v3
from ..deepseek_v3.formulas import (  # noqa: F401 - DeepSeek-V3's, unchanged: this family's closed forms too
    absorbed_attention_macs,
    absorbed_products,
    attention_macs_per_pair,
    computed_attention_macs,
    full_cache_numbers,
    latent_cache_numbers,
)
from .config import DeepseekV32Config


def chosen_keys(config: DeepseekV32Config, t: int) -> int:
    """s = min(t, ki): the keys a query's scores and mix read, of the t in reach."""
    return min(t, config.index_topk)


def selection_per_pair(config: DeepseekV32Config) -> tuple[int, int]:
    """(MACs, dot products) of the indexer per (query, key) pair, over every key in reach: Hi scores of di and their
    weighted sum over the Hi heads, Hi (di + 1) MACs in Hi + 1 dot products (verbs/formulas.py reads it)."""
    Hi, di = config.index_n_heads, config.index_head_dim
    return Hi * (di + 1), Hi + 1


def products(config: DeepseekV32Config, T: int, t: int, R: int = 1, B: int = 1, layer: int | None = None) -> dict:
    """(dot products, dot-product length) of each matrix product of one pass, in the order it runs them, for one layer
    (block ops): DeepSeek-V3's, the indexer's before the scores, and the scores and mix over s = min(t, ki) keys a
    query where t > ki (the keys the indexer chose)."""
    c, Hi, di, dq = config, config.index_n_heads, config.index_head_dim, config.q_lora_rank or 0
    ops: dict[str, tuple[int, int]] = {}
    for op, counted in v3.products(c, T, t, R, B, layer).items():
        if op == "scores":
            ops["index.q"] = (B * T * Hi * di, dq)  # c_q [T, dq] x W_iq [dq, Hi di]
            ops["index.k"] = (B * T * di, c.n_embd)  # h [T, D] x W_ik [D, di]
            ops["index.scores"] = (B * T * Hi * t, di)  # q_i [T, Hi, di] x K_i^T [di, t]
            ops["index.weights"] = (B * T * Hi, c.n_embd)  # h [T, D] x W_iw [D, Hi]
            ops["index.sum"] = (B * T * t, Hi)  # w [T, 1, Hi] x S_i [T, Hi, t]
            s = chosen_keys(c, t)
            counted = (B * c.n_head * T * s, c.d_head)  # Q [H, T, 1, dh] x K_c^T [H, T, dh, s]
        elif op == "mix":
            counted = (B * c.n_head * T * c.v_head_dim, chosen_keys(c, t))  # A [H, T, 1, s] x V_c [H, T, s, dv]
        ops[op] = counted
    return ops


def _indexer_weights(c: DeepseekV32Config) -> tuple[int, int]:
    """(MACs, dot products) per position of the indexer's products with weights: W_iq, W_ik, W_iw."""
    Hi, di, dq, D = c.index_n_heads, c.index_head_dim, c.q_lora_rank or 0, c.n_embd
    return dq * Hi * di + D * di + D * Hi, Hi * di + di + Hi


def layer_weight_macs_per_position(config: DeepseekV32Config, layer: int) -> int:
    """DeepSeek-V3's (MLA's products with weights, then the dense MLP or the router and experts) and the indexer's,
    dq Hi di + D di + D Hi."""
    return v3.layer_weight_macs_per_position(config, layer) + _indexer_weights(config)[0]


def layer_weight_dot_products_per_position(config: DeepseekV32Config, layer: int) -> int:
    """DeepSeek-V3's and the indexer's, Hi di + di + Hi."""
    return v3.layer_weight_dot_products_per_position(config, layer) + _indexer_weights(config)[1]


def weight_macs_per_position(config: DeepseekV32Config) -> int:
    """A layer with experts' (the last layer's): layer_weight_macs_per_position."""
    return layer_weight_macs_per_position(config, config.n_layer - 1)


def weight_dot_products_per_position(config: DeepseekV32Config) -> int:
    return layer_weight_dot_products_per_position(config, config.n_layer - 1)


def _indexer_parameters(c: DeepseekV32Config) -> int:
    """One layer's indexer: W_iq [Hi di, dq], W_ik [di, D], the LayerNorm's gain and bias [di] each, W_iw [Hi, D]."""
    Hi, di, dq, D = c.index_n_heads, c.index_head_dim, c.q_lora_rank or 0, c.n_embd
    return Hi * di * dq + di * D + 2 * di + Hi * D


def parameters(config: DeepseekV32Config) -> int:
    """DeepSeek-V3's parameters and L indexers: + L (dq Hi di + D di + 2 di + D Hi)."""
    return v3.parameters(config) + config.n_layer * _indexer_parameters(config)


def active_parameters(config: DeepseekV32Config) -> int:
    """DeepSeek-V3's active parameters (k routed experts of E a layer, everything else whole) and the indexers."""
    return v3.active_parameters(config) + config.n_layer * _indexer_parameters(config)


def attention_vs_weights(c: DeepseekV32Config) -> tuple[str, str, str]:
    """A decode step's attention (MLA's scores and mix over min(t, ki) keys, the indexer's over all t) against the
    products with weights of layer 0 (count's comparison), in FLOPs, the ratio in symbols while t <= ki, the sizes."""
    mla = "D dq + dq H dh + D (dc + dr) + dc H (dn + dv) + H dv D"
    indexer = "dq Hi di + D di + D Hi"
    mlp = "3 D F" if not c.is_moe(0) else "D E + 3 k D Fe + 3 D Fs"
    which = "layer 0, dense" if not c.is_moe(0) else "layer 0, with experts"
    experts = f"F = {c.d_ff:,}" if not c.is_moe(0) else f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, " \
        f"Fs = {c.d_shared:,}"  # fmt: skip
    return (f"2 (H (dh + dv) min(t, ki) + Hi (di + 1) t) FLOPs against 2 ({mla} + {indexer} + {mlp}) for the weights "
            f"({which})",
            f"(for t <= ki) (H (dh + dv) + Hi (di + 1)) t / ({mla} + {indexer} + {mlp})",
            f"D = {c.n_embd:,}, H = {c.n_head}, dh = {c.d_head}, dv = {c.v_head_dim}, dq = {c.q_lora_rank}, "
            f"dc = {c.kv_lora_rank}, dr = {c.qk_rope_head_dim}, dn = {c.qk_nope_head_dim}, Hi = {c.index_n_heads}, "
            f"di = {c.index_head_dim}, ki = {c.index_topk:,}, {experts}")  # fmt: skip


def sparse_attention_macs(config: DeepseekV32Config, T: int, t: int) -> tuple[int, int, int]:
    """One layer's (indexer, attention as computed, attention's dense form) MACs for T queries at context t, every
    score counted (no row chunk or mask skipped): Hi (di + 1) T t; H (dh + dv) T s; H (dh + dv) T t."""
    per_pair, (selection, _) = attention_macs_per_pair(config), selection_per_pair(config)
    return selection * T * t, per_pair * T * chosen_keys(config, t), per_pair * T * t


def count_notes(config: DeepseekV32Config, n_prompt: int, n_new: int) -> list[str]:
    """count's lines (views/count_report.py): DeepSeek-V3's on MLA, then the indexer's on what it scores, what the
    attention it chooses for reads against the dense form, and the key cache it keeps."""
    c, L = config, config.n_layer
    Hi, di, ki = c.index_n_heads, c.index_head_dim, c.index_topk
    t = n_prompt + n_new - 1
    steps = [("the prefill", n_prompt, n_prompt)] + ([(f"a decode step at t = {t:,}", 1, t)] if n_new > 1 else [])
    rows = []
    for name, T, seen in steps:
        indexer, computed, dense = sparse_attention_macs(c, T, seen)
        if seen <= ki:
            rows.append(f"    {name}: every key chosen (t = {seen:,} <= ki): scores and mix as DeepSeek-V3's, "
                        f"{computed:,} MACs a layer; the indexer's scores {indexer:,}")  # fmt: skip
        else:
            rows.append(f"    {name}: scores and mix over {ki:,} keys a query, {computed:,} MACs a layer, against "
                        f"{dense:,} dense ({dense / computed:.3g}x); the indexer's scores of all {seen:,} keys "
                        f"{indexer:,}")  # fmt: skip
    latent = latent_cache_numbers(c)
    return [
        *v3.count_notes(c, n_prompt, n_new, keys=lambda t: chosen_keys(c, t)),
        "",
        "DSA (DeepSeek Sparse Attention): the lightning indexer chooses the keys each query attends to",
        f"  indexer: {Hi} heads of {di} score every key a query can see, Hi (di + 1) = {Hi * (di + 1):,} MACs a "
        f"(query, key) pair; each query then attends to the ki = {ki:,} keys they rank highest (all of them while "
        f"t <= ki)",
        "  scores and mix are counted over those keys, as computed here; the dense form beside them is transformers' "
        "eager attention,",
        "  every T x t score with the keys not chosen masked (--dense-attention computes it that way):",
        *rows,
        f"  the indexer's key cache: {di} numbers a layer and position beside MLA's {latent} (the latent and k_r): "
        f"{latent + di:,} in all, {L * (latent + di) * 4:,} bytes a token in float32; this implementation holds it "
        f"beside its per-head keys and values, {full_cache_numbers(c) + di:,} numbers a layer and position",
    ]
