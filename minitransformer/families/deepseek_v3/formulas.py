"""DeepSeek-V3's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by
the tests to the ledger of real and shape-only runs.

Symbols: D d_model, H heads, dn + dr = dh the query/key head width (dr rotary), dv the value head width, dq the query
rank (q_lora_rank), dc the latent (kv_lora_rank), F the dense MLP width, E routed experts of width Fe, k a token,
Fs = n_shared_experts Fe the shared experts' width, V vocabulary.

Against the Llama family: the attention's products with weights are h W_qa [D, dq] and c_q W_qb [dq, H dh] (or h W_q
[D, H dh]), h W_kva [D, dc + dr], c W_kvb [dc, H (dn + dv)] and Z W_o [H dv, D]; scores are dh long and the mix dv
wide, so a (query, key) pair costs H (dh + dv) MACs. Past the first_k_dense_replace dense layers (3 D F, a Llama
MLP), the MLP is a router (D E), k of E experts (3 D Fe each token) and the shared experts (3 D Fs).
"""

from __future__ import annotations

from .config import DeepseekConfig


def _q(c: DeepseekConfig) -> tuple[int, int]:
    """(MACs, dot products) of the query's products per position."""
    D, Hdh = c.n_embd, c.n_head * c.d_head
    if c.q_lora_rank is None:
        return D * Hdh, Hdh
    return D * c.q_lora_rank + c.q_lora_rank * Hdh, c.q_lora_rank + Hdh


def products(config: DeepseekConfig, T: int, t: int, R: int = 1, B: int = 1, layer: int | None = None) -> dict:
    """(dot products, dot-product length) of each matrix product of one pass, for one layer (block ops): `layer`, or
    by default the last (a layer with experts, where there are any)."""
    c = config
    D, H, dh, dv, dn, dr, dc = c.n_embd, c.n_head, c.d_head, c.v_head_dim, c.qk_nope_head_dim, c.qk_rope_head_dim, \
        c.kv_lora_rank  # fmt: skip
    layer = c.n_layer - 1 if layer is None else layer
    ops: dict[str, tuple[int, int]] = {}
    if c.q_lora_rank is None:
        ops["q"] = (B * T * H * dh, D)
    else:
        ops["q_a"] = (B * T * c.q_lora_rank, D)
        ops["q_b"] = (B * T * H * dh, c.q_lora_rank)
    ops["kv_a"] = (B * T * (dc + dr), D)  # h [T, D] x W_kva [D, dc + dr]
    ops["kv_b"] = (B * T * H * (dn + dv), dc)  # c [T, dc] x W_kvb [dc, H (dn + dv)]
    ops["scores"] = (B * H * T * t, dh)
    ops["mix"] = (B * H * T * dv, t)
    ops["out"] = (B * T * D, H * dv)
    if c.is_moe(layer):
        E, k, Fe, Fs = c.n_experts, c.top_k, c.moe_inner, c.d_shared
        ops["router"] = (B * T * E, D)
        ops["expert.gate"] = (B * T * k * Fe, D)
        ops["expert.up"] = (B * T * k * Fe, D)
        ops["expert.down"] = (B * T * k * D, Fe)
        ops["shared.gate"] = (B * T * Fs, D)
        ops["shared.up"] = (B * T * Fs, D)
        ops["shared.down"] = (B * T * D, Fs)
    else:
        F = c.d_ff
        ops["mlp.gate"] = (B * T * F, D)
        ops["mlp.up"] = (B * T * F, D)
        ops["mlp.down"] = (B * T * D, F)
    ops["logits"] = (B * R * c.vocab_size, D)
    return ops


def _attention_weights(c: DeepseekConfig) -> tuple[int, int]:
    """(MACs, dot products) per position of MLA's products with weights: q, kv_a, kv_b, out."""
    D, H, dn, dv, dr, dc = c.n_embd, c.n_head, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim, c.kv_lora_rank
    q_macs, q_dots = _q(c)
    macs = q_macs + D * (dc + dr) + dc * H * (dn + dv) + H * dv * D
    return macs, q_dots + (dc + dr) + H * (dn + dv) + D


def layer_weight_macs_per_position(config: DeepseekConfig, layer: int) -> int:
    """MACs of the products with weights, per position, in `layer`: MLA's (q, kv_a, kv_b, out), then 3 D F (dense)
    or D E + k 3 D Fe + 3 D Fs (router, k routed experts, the shared experts)."""
    c, D = config, config.n_embd
    attention, _ = _attention_weights(c)
    if not c.is_moe(layer):
        return attention + 3 * D * c.d_ff
    return attention + D * c.n_experts + c.top_k * 3 * D * c.moe_inner + 3 * D * c.d_shared


def layer_weight_dot_products_per_position(config: DeepseekConfig, layer: int) -> int:
    """Dot products of the products with weights, per position, in `layer`: MLA's, then 2 F + D (dense) or
    E + k (2 Fe + D) + 2 Fs + D."""
    c, D = config, config.n_embd
    _, attention = _attention_weights(c)
    if not c.is_moe(layer):
        return attention + 2 * c.d_ff + D
    return attention + c.n_experts + c.top_k * (2 * c.moe_inner + D) + 2 * c.d_shared + D


def weight_macs_per_position(config: DeepseekConfig) -> int:
    """A layer with experts' (the last layer's): layer_weight_macs_per_position."""
    return layer_weight_macs_per_position(config, config.n_layer - 1)


def weight_dot_products_per_position(config: DeepseekConfig) -> int:
    return layer_weight_dot_products_per_position(config, config.n_layer - 1)


def attention_macs_per_pair(config: DeepseekConfig) -> int:
    """H (dh + dv): a query head's score against a key, dh long, and its share of the mix, dv wide."""
    return config.n_head * (config.d_head + config.v_head_dim)


def _parameters(config: DeepseekConfig, experts: int) -> int:
    c = config
    D, H, dh, dn, dv, dr, dc = c.n_embd, c.n_head, c.d_head, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim, \
        c.kv_lora_rank  # fmt: skip
    q = D * H * dh if c.q_lora_rank is None else D * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * H * dh
    attention = q + D * (dc + dr) + dc + dc * H * (dn + dv) + H * dv * D
    dense = sum(not c.is_moe(i) for i in range(c.n_layer))
    moe = c.n_layer - dense
    mixture = c.n_experts * D + experts * 3 * D * c.moe_inner + 3 * D * c.d_shared
    head = 0 if c.tie_word_embeddings else c.vocab_size * D
    return c.vocab_size * D + c.n_layer * (attention + 2 * D) + dense * 3 * D * c.d_ff + moe * mixture + D + head


def parameters(config: DeepseekConfig) -> int:
    """V D + L (MLA + 2 D) + L_dense 3 D F + L_moe (E D + 3 E D Fe + 3 D Fs) + D [+ V D untied], MLA = D dq + dq +
    dq H dh (or D H dh) + D (dc + dr) + dc + dc H (dn + dv) + H dv D (its two RMSNorm gains dq and dc included). The
    routers' correction biases (E a layer) are buffers, not parameters, as transformers counts them."""
    return _parameters(config, config.n_experts)


def active_parameters(config: DeepseekConfig) -> int:
    """The parameters one token's pass reads: k routed experts of E a layer, everything else whole (the shared
    experts, the dense layers, the embedding and the head in full)."""
    return _parameters(config, config.top_k)


def latent_cache_numbers(config: DeepseekConfig) -> int:
    """What MLA must keep a position and layer: the latent c and the rotary key k_r, dc + dr (576 in DeepSeek-V3)."""
    return config.kv_lora_rank + config.qk_rope_head_dim


def full_cache_numbers(config: DeepseekConfig) -> int:
    """What a cache of the per-head keys and values keeps a position and layer: H (dh + dv) (40,960 in DeepSeek-V3,
    128 heads of 192-wide keys and 128-wide values), as this implementation's cache does."""
    return config.n_head * (config.d_head + config.v_head_dim)


def absorbed_products(config: DeepseekConfig, T: int, t: int) -> dict[str, tuple[int, int]]:
    """(dot products, length) of one layer's attention in the absorbed form, for T new positions attending to t
    (every score, no mask skipped): W_uk (the key half of W_kvb, [H, dn, dc]) folded into the query and W_uv (the
    value half, [H, dc, dv]) into the output, so attention reads the latent [t, dc] and k_r [t, dr] directly:
    q_c = q_n W_uk [H, T, dc]; scores q_c c^T + q_r k_r^T (dc + dr long); the mix A c [H, T, dc]; z = that W_uv
    [H, T, dv]. kv_b is not computed."""
    c = config
    H, dn, dv, dr, dc = c.n_head, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim, c.kv_lora_rank
    return {
        "absorb_k": (T * H * dc, dn),
        "scores": (H * T * t, dc + dr),
        "mix": (H * T * dc, t),
        "absorb_v": (T * H * dv, dc),
    }


def absorbed_attention_macs(config: DeepseekConfig, T: int, t: int) -> int:
    """MACs of one layer's attention in the absorbed form (absorbed_products): T H dc (dn + dv) + T t H (2 dc + dr)."""
    return sum(dots * length for dots, length in absorbed_products(config, T, t).values())


def computed_attention_macs(config: DeepseekConfig, T: int, t: int) -> int:
    """The same as computed here (every score, no mask skipped): kv_b T dc H (dn + dv) + scores and mix
    T t H (dh + dv)."""
    c = config
    return T * c.kv_lora_rank * c.n_head * (c.qk_nope_head_dim + c.v_head_dim) + T * t * attention_macs_per_pair(c)


def attention_vs_weights(c: DeepseekConfig) -> tuple[str, str, str]:
    """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs, for
    layer 0 (as count's comparison takes it): a dense layer where first_k_dense_replace > 0, else one with experts."""
    q = "D H dh" if c.q_lora_rank is None else "D dq + dq H dh"
    mla = f"{q} + D (dc + dr) + dc H (dn + dv) + H dv D"
    mlp = "3 D F" if not c.is_moe(0) else "D E + 3 k D Fe + 3 D Fs"
    which = "layer 0, dense" if not c.is_moe(0) else "layer 0, with experts"
    return (f"2 H (dh + dv) t FLOPs against 2 ({mla} + {mlp}) for the weights ({which})",
            f"H (dh + dv) t / ({mla} + {mlp})",
            f"D = {c.n_embd:,}, H = {c.n_head}, dh = {c.d_head}, dv = {c.v_head_dim}, dq = {c.q_lora_rank}, "
            f"dc = {c.kv_lora_rank}, dr = {c.qk_rope_head_dim}, dn = {c.qk_nope_head_dim}, "
            + (f"F = {c.d_ff:,}" if not c.is_moe(0) else f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, "
               f"Fs = {c.d_shared:,}"))  # fmt: skip


def count_notes(config: DeepseekConfig, n_prompt: int, n_new: int, keys=None) -> list[str]:
    """count's lines on MLA (views/count_report.py calls a family's count_notes where it has one): what its cache
    must hold against what a cache of per-head keys and values holds, and the absorbed form's attention MACs beside
    those computed here, for the prefill and the last decode step, every score counted (no mask skipped). `keys(t)`:
    the keys a query's scores and mix read at context t (all t; DeepSeek-V3.2's indexer chooses fewer)."""
    c, L = config, config.n_layer
    keys = keys or (lambda t: t)
    latent, full = latent_cache_numbers(c), full_cache_numbers(c)
    t = n_prompt + n_new - 1
    steps = [("the prefill", n_prompt, n_prompt)] + ([(f"a decode step at t = {t:,}", 1, t)] if n_new > 1 else [])
    rows = []
    for name, T, seen in steps:
        computed, absorbed = computed_attention_macs(c, T, keys(seen)), absorbed_attention_macs(c, T, keys(seen))
        rows.append(f"    {name}: {computed:,} MACs a layer as computed (kv_b, scores, mix), {absorbed:,} absorbed "
                    f"({absorbed / computed:.3g}x)")  # fmt: skip
    return [
        "MLA (multi-head latent attention): what its KV cache must hold, and the absorbed form",
        f"  MLA's cache: {latent:,} numbers a layer and position (kv_lora_rank {c.kv_lora_rank:,} + qk_rope_head_dim "
        f"{c.qk_rope_head_dim}: the latent c and the one rotary key k_r), against {full:,} for {c.n_head} heads of "
        f"{c.d_head}-wide keys and {c.v_head_dim}-wide values ({full / latent:.3g}x more)",
        f"  (this implementation caches the per-head keys and values, as transformers' form computes them: "
        f"{L * full * 4:,} bytes a token in float32, where MLA needs {L * latent * 4:,})",
        "  absorbed form: W_uk (W_kvb's key half) folded into the query, W_uv (its value half) into the output, so "
        "attention",
        f"  reads the latent directly (scores {c.kv_lora_rank + c.qk_rope_head_dim} long, the mix {c.kv_lora_rank} "
        f"wide) and kv_b is never computed: H (2 dc + dr) MACs a (query, key) pair against H (dh + dv) here; more "
        f"MACs,",
        f"  but a step reads {latent:,} cached numbers a key and layer instead of {full:,}:",
        *rows,
        "  (the parameters and products are the base model's: a checkpoint's multi-token-prediction layer "
        "(num_nextn_predict_layers)",
        "  is neither counted nor run, as in transformers)",
    ]
