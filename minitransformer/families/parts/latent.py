"""Multi-head latent attention (MLA, DeepSeek-V3's), as transformers' DeepseekV3Attention computes it, with its tensors,
its stages, its closed forms and what count says of its cache and of the absorbed form.

- q from a low-rank bottleneck: q = RMSNorm(h W_qa) W_qb [T, H dh] (dh = dn + dr: a part without position, dn wide,
  and a rotary part, dr wide), or one product h W_q where q_lora_rank is None;
- one product h W_kva [T, dc + dr] gives the latent c (dc = kv_lora_rank) and a rotary key k_r (dr wide) that all
  heads share; c is RMSNormed, and W_kvb [dc, H (dn + dv)] up-projects it to every head's k_n (dn) and v (dv);
- rotary turns q's last dr numbers and k_r (in interleaved pairs where rope_interleave: transformers de-interleaves
  them, (x0, x2, ...; x1, x3, ...), then turns them as rotate_half does); each head's key is [k_n, k_r];
- NoPE (Kimi Linear's layers, whose config.rope(layer) is None): no rotary at all; q's last dr numbers and k_r are
  read as they are, so each head's key is still [k_n, k_r], k_r the same for every head;
- scores over dh = dn + dr, scaled by dh^-0.5 (times mscale^2 under YaRN), a mix over v (dv wide): keys and values
  differ in width, so the KV cache holds H dh keys and H dv values a position, as transformers' form computes them.
  (transformers caches the latent [c, k_r] and up-projects the whole cache each step; the products are the same rows,
  so caching k and v instead computes each row once. What MLA needs to keep is dc + dr numbers a position
  (`latent_cache_numbers`), and the absorbed form (`absorbed_products`) says what attending to the latent directly
  would cost.)
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import add_mask, constant, merge_heads, rms_norm, rotate, softmax, split_into_heads
from ...engine.shapes import ShapeOnly
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, Stage, by_op
from ...engine.tape import Tape
from ...errors import UserError
from .part import Part, Products, Tensor, Tensors, linear

# transformers' DeepseekV3RMSNorm default: q_a_layernorm and kv_a_layernorm are built without the config's eps
LATENT_NORM_EPS = 1e-6

Q_PLAIN = (
    Stage("q", ("attn.q_proj",), "matmul", "q = h W_q  (H heads of dh = dn + dr)", "h [T, D], W_q [D, H*dh]",
          ATTENTION_PROJECTIONS),
)  # fmt: skip
Q_LORA = (
    Stage("q_a", ("attn.q_a",), "matmul", "c_q = h W_qa  (down to the query rank dq)", "h [T, D], W_qa [D, dq]",
          ATTENTION_PROJECTIONS),
    Stage("q_a_norm", ("attn.q_a_norm",), "norm", "c_q = RMSNorm_qa(c_q)", "c_q [T, dq]"),
    Stage("q_b", ("attn.q_b",), "matmul", "q = c_q W_qb  (H heads of dh = dn + dr)", "c_q [T, dq], W_qb [dq, H*dh]",
          ATTENTION_PROJECTIONS),
)  # fmt: skip
LATENT = (
    Stage("kv_a", ("attn.kv_a",), "matmul", "[c, k_r] = h W_kva  (the latent c, dc wide, and one rotary key k_r, dr "
          "wide, for all heads)", "h [T, D], W_kva [D, dc+dr]", ATTENTION_PROJECTIONS),
    Stage("kv_split", ("attn.latent", "attn.k_rope_in"), "reshape", "c, k_r = the first dc and the last dr numbers",
          "c and k_r [T, dc+dr]"),
    Stage("kv_a_norm", ("attn.latent_norm",), "norm", "c = RMSNorm_kva(c)", "c [T, dc]"),
    Stage("kv_b", ("attn.kv_b",), "matmul", "[k_n, v] = c W_kvb  (each head's k_n, dn wide, and v, dv wide)",
          "c [T, dc], W_kvb [dc, H*dn+H*dv]", ATTENTION_PROJECTIONS),
    Stage("split_heads", ("attn.q",), "reshape", "q -> H heads of dh", "q [T, H*dh]"),
    Stage("kv_b_split", ("attn.k_nope", "attn.v"), "reshape", "k_n, v -> H heads of dn and of dv",
          "k_n and v [T, H*dn+H*dv]"),
    Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", "q_r, k_r = RoPE(the last dr numbers of q, k_r): each pair "
          "turned by position x frequency (interleaved pairs de-interleaved first)", "q [H, T, dr], k_r [1, T, dr]"),
    Stage("q_join", ("attn.q_full",), "reshape", "q = [q_n, q_r]", "q_n [H, T, dn], q_r [H, T, dr]"),
    Stage("k_join", ("attn.k",), "reshape", "k = [k_n, k_r]  (the one k_r beside every head's k_n)",
          "k_n [H, T, dn], k_r [1, T, dr]"),
    Stage("cache", ("attn.keys", "attn.values"), "cache",
          "K, V of the t attended positions (new rows written to the cache: H dh + H dv numbers a position)",
          "k [H, T, dh], v [H, T, dv]"),
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (every head its own keys, dh = dn + dr wide)",
          "Q [H, T, dh], K^T [H, dh, t]", ATTENTION_SCORES),
    Stage("scale", ("attn.scaled",), "scale", "S = S x dh^-0.5  (x mscale^2 under YaRN)", "S [H, T, t]"),
    Stage("mask", ("attn.scores",), "mask", "S[i, j] = -inf where j is in i's future", "S [H, T, t]"),
    Stage("softmax", ("attn.weights",), "softmax", "A = softmax(S) over j", "S [H, T, t]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A V  (values dv wide)", "A [H, T, t], V [H, t, dv]", ATTENTION_SCORES),
    Stage("merge_heads", ("attn.z",), "reshape", "Z -> [T, H*dv]", "Z [H, T, dv]"),
    Stage("out", ("attn.out",), "matmul", "o = Z W_o", "Z [T, H*dv], W_o [H*dv, D]", ATTENTION_PROJECTIONS),
)  # fmt: skip

# The same stages where the config has no rope (NoPE: Kimi Linear's MLA layers): k_r is a shared key, not a rotary one.
NOPE = {stage.op: stage for stage in (
    Stage("kv_a", ("attn.kv_a",), "matmul", "[c, k_r] = h W_kva  (the latent c, dc wide, and one key k_r, dr wide, for "
          "all heads, without positions)", "h [T, D], W_kva [D, dc+dr]", ATTENTION_PROJECTIONS),
    Stage("q_join", ("attn.q_full",), "reshape", "q = [q_n, q_r]  (no rotary: NoPE)", "q_n [H, T, dn], q_r [H, T, dr]"),
    Stage("scale", ("attn.scaled",), "scale", "S = S x dh^-0.5", "S [H, T, t]"),
)}  # fmt: skip


@dataclass(frozen=True)
class LatentAttention(Part):
    """Multi-head latent attention. `runnable`: the rope types its rotation computes; a config of another counts
    (without weights) and is refused by name where it would run."""

    runnable: tuple[str, ...] = ("default", "linear", "yarn")
    kinds = {
        "attention_q": "attention query weights: W_qa [dq, D] and W_qb [H*dh, dq], or W_q [H*dh, D]",
        "attention_kv_a": "the latent's down-projection W_kva [dc+dr, D] (latent and shared rotary key)",
        "attention_kv_b": "the latent's up-projection W_kvb [H*(dn+dv), dc] (keys without position and values)",
        "attention_out": "attention output weights W_o [D, H*dv]",
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        latent = LATENT if config.rope() is not None else tuple(NOPE.get(s.op, s) for s in LATENT)
        return by_op(*(Q_PLAIN if config.q_lora_rank is None else Q_LORA), *latent)

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        q, K, V, _ = self.keys(h, p, config, at, inputs)
        z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
        return output(z, p, at)

    def keys(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        """MLA up to its keys: the queries [H, T, dh], the t attended keys [H, t, dh] and values [H, t, dv], and c_q,
        the query's normed latent [T, dq] (None where q is one product h W_q)."""
        self.check_runnable(config, h)
        H, dn = config.n_head, config.qk_nope_head_dim
        cq = None
        if config.q_lora_rank is None:
            q = at.matmul("q", h, p.q_proj.weight.T, "T D, D H*dh -> T H*dh")
        else:
            cq = at.matmul("q_a", h, p.q_a_proj.weight.T, "T D, D dq -> T dq")
            cq = at.stage("q_a_norm", rms_norm(cq, p.q_a_layernorm.weight, LATENT_NORM_EPS), "T dq")
            q = at.matmul("q_b", cq, p.q_b_proj.weight.T, "T dq, dq H*dh -> T H*dh")
        ckv = at.matmul("kv_a", h, p.kv_a_proj_with_mqa.weight.T, "T D, D dc+dr -> T dc+dr")
        c, k_r = at.stage("kv_split", (ckv[..., : config.kv_lora_rank], ckv[..., config.kv_lora_rank :]), "T dc; T dr")
        c = at.stage("kv_a_norm", rms_norm(c, p.kv_a_layernorm.weight, LATENT_NORM_EPS), "T dc")
        kv_up = at.matmul("kv_b", c, p.kv_b_proj.weight.T, "T dc, dc H*dn+H*dv -> T H*dn+H*dv")
        q = at.stage("split_heads", split_into_heads(q, H), "H T dh")
        kv_up = split_into_heads(kv_up, H)  # [H, T, dn + dv]: each head's k_n then v
        k_n, v = at.stage("kv_b_split", (kv_up[..., :dn], kv_up[..., dn:]), "H T dn; H T dv")
        q_r, k_r = q[..., dn:], k_r[..., None, :, :]
        if inputs.rotary:  # a NoPE layer (no rope: no tables) reads q_r and k_r as they are
            q_r, k_r = turn(q_r, inputs.rotary, config), turn(k_r, inputs.rotary, config)
            q_r, k_r = at.stage("rope", (q_r, k_r), "H T dr; 1 T dr")
        q = at.stage("q_join", join(q[..., :dn], q_r), "H T dh")
        k = at.stage("k_join", join(k_n, broadcast(k_r, k_n.shape[:-1] + (config.qk_rope_head_dim,))), "H T dh")
        K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh; H t dv")
        return q, K, V, cq

    def check_runnable(self, config: Any, h) -> None:
        """A rope type read but not computed here counts (without weights), and is refused by name where it would
        run."""
        rope = config.rope()
        if rope is not None and rope.kind not in self.runnable and not isinstance(h, ShapeOnly):
            kind = rope.kind
            raise UserError(
                f"config rope_parameters rope_type={kind!r} is not computed here (only {', '.join(self.runnable)}): "
                f"this model counts, but does not run"
            )

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj."""
        D, H, dh, dc, dr = config.n_embd, config.n_head, config.d_head, config.kv_lora_rank, config.qk_rope_head_dim
        dn, dv, dq = config.qk_nope_head_dim, config.v_head_dim, config.q_lora_rank
        if dq is None:
            q = linear("q_proj", H * dh, D, False, "attention_q")
        else:
            q = linear("q_a_proj", dq, D, False, "attention_q") | {"q_a_layernorm.weight": Tensor((dq,), "norms")}
            q |= linear("q_b_proj", H * dh, dq, False, "attention_q")
        return {
            **q,
            **linear("kv_a_proj_with_mqa", dc + dr, D, False, "attention_kv_a"),
            "kv_a_layernorm.weight": Tensor((dc,), "norms"),
            **linear("kv_b_proj", H * (dn + dv), dc, False, "attention_kv_b"),
            **linear("o_proj", D, H * dv, False, "attention_out"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """h W_qa [D, dq] and c_q W_qb [dq, H dh] (or h W_q [D, H dh]), h W_kva [D, dc + dr], c W_kvb [dc, H (dn +
        dv)], the scores dh long and the mix dv wide over every key, Z W_o [H dv, D]."""
        D, H, dh, dn, dv, dr, dc = sizes(config)
        dq = config.q_lora_rank
        q = {"q": (B * T * H * dh, D)} if dq is None else {"q_a": (B * T * dq, D), "q_b": (B * T * H * dh, dq)}
        return q | {
            "kv_a": (B * T * (dc + dr), D),  # h [T, D] x W_kva [D, dc + dr]
            "kv_b": (B * T * H * (dn + dv), dc),  # c [T, dc] x W_kvb [dc, H (dn + dv)]
            "scores": (B * H * T * t, dh),  # per head Q [T, dh] x K^T [dh, t]
            "mix": (B * H * T * dv, t),  # per head A [T, t] x V [t, dv]
            "out": (B * T * D, H * dv),  # Z [T, H dv] x W_o [H dv, D]
        }

    def attention_macs_per_pair(self, config: Any) -> int:
        """H (dh + dv): a query head's score against a key, dh long, and its share of the mix, dv wide."""
        return config.n_head * (config.d_head + config.v_head_dim)

    def latent_cache_numbers(self, config: Any) -> int:
        """What MLA must keep a position and layer: the latent c and the rotary key k_r, dc + dr (576 in
        DeepSeek-V3)."""
        return config.kv_lora_rank + config.qk_rope_head_dim

    def full_cache_numbers(self, config: Any) -> int:
        """What a cache of the per-head keys and values keeps a position and layer: H (dh + dv) (40,960 in DeepSeek-V3,
        128 heads of 192-wide keys and 128-wide values), as this implementation's cache does."""
        return config.n_head * (config.d_head + config.v_head_dim)

    def absorbed_products(self, config: Any, T: int, t: int) -> dict[str, tuple[int, int]]:
        """(dot products, length) of one layer's attention in the absorbed form, for T new positions attending to t
        (every score, no mask skipped): W_uk (the key half of W_kvb, [H, dn, dc]) folded into the query and W_uv (the
        value half, [H, dc, dv]) into the output, so attention reads the latent [t, dc] and k_r [t, dr] directly:
        q_c = q_n W_uk [H, T, dc]; scores q_c c^T + q_r k_r^T (dc + dr long); the mix A c [H, T, dc]; z = that W_uv
        [H, T, dv]. kv_b is not computed."""
        _, H, _, dn, dv, dr, dc = sizes(config)
        return {
            "absorb_k": (T * H * dc, dn),
            "scores": (H * T * t, dc + dr),
            "mix": (H * T * dc, t),
            "absorb_v": (T * H * dv, dc),
        }

    def absorbed_attention_macs(self, config: Any, T: int, t: int) -> int:
        """MACs of one layer's attention in the absorbed form (absorbed_products): T H dc (dn + dv) + T t H (2 dc +
        dr)."""
        return sum(dots * length for dots, length in self.absorbed_products(config, T, t).values())

    def computed_attention_macs(self, config: Any, T: int, t: int) -> int:
        """The same as computed here (every score, no mask skipped): kv_b T dc H (dn + dv) + scores and mix
        T t H (dh + dv)."""
        _, H, _, dn, dv, _, dc = sizes(config)
        return T * dc * H * (dn + dv) + T * t * self.attention_macs_per_pair(config)

    def attention_vs_weights(self, c: Any, mlp: Any = None) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs, for
        layer 0 (as count's comparison takes it): a dense layer where first_k_dense_replace > 0, else one with
        experts."""
        q = "D H dh" if c.q_lora_rank is None else "D dq + dq H dh"
        mla = f"{q} + D (dc + dr) + dc H (dn + dv) + H dv D"
        mlp_terms, which, mlp_sizes = deepseek_mlp(c)
        return (
            f"2 H (dh + dv) t FLOPs against 2 ({mla} + {mlp_terms}) for the weights ({which})",
            f"H (dh + dv) t / ({mla} + {mlp_terms})",
            f"D = {c.n_embd:,}, H = {c.n_head}, dh = {c.d_head}, dv = {c.v_head_dim}, dq = {c.q_lora_rank}, "
            f"dc = {c.kv_lora_rank}, dr = {c.qk_rope_head_dim}, dn = {c.qk_nope_head_dim}, {mlp_sizes}",
        )

    def count_notes(self, config: Any, n_prompt: int, n_new: int, keys=None) -> list[str]:
        """count's lines on MLA (views/count_report.py): what its cache must hold against what a cache of per-head keys
        and values holds, and the absorbed form's attention MACs beside those computed here, for the prefill and the
        last decode step, every score counted (no mask skipped). `keys(t)`: the keys a query's scores and mix read at
        context t (all t; DeepSeek-V3.2's indexer chooses fewer)."""
        c, L = config, config.n_layer
        keys = keys or (lambda t: t)
        latent, full = self.latent_cache_numbers(c), self.full_cache_numbers(c)
        rows = []
        for name, T, seen in steps(n_prompt, n_new):
            computed = self.computed_attention_macs(c, T, keys(seen))
            absorbed = self.absorbed_attention_macs(c, T, keys(seen))
            rows.append(
                f"    {name}: {computed:,} MACs a layer as computed (kv_b, scores, mix), {absorbed:,} absorbed "
                f"({absorbed / computed:.3g}x)"
            )
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
            "  is not run, as in transformers' forward; count --mtp counts DeepSeek-V3's beside it, in its own phase)",
        ]


def sizes(c: Any) -> tuple[int, int, int, int, int, int, int]:
    """D, H, dh, dn, dv, dr, dc: the sizes MLA's formulas read."""
    return c.n_embd, c.n_head, c.d_head, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim, c.kv_lora_rank


def steps(n_prompt: int, n_new: int) -> list[tuple[str, int, int]]:
    """The passes count's notes show: (name, positions computed, context) of the prefill and the last decode step."""
    t = n_prompt + n_new - 1
    return [("the prefill", n_prompt, n_prompt)] + ([(f"a decode step at t = {t:,}", 1, t)] if n_new > 1 else [])


def deepseek_mlp(c: Any) -> tuple[str, str, str]:
    """Layer 0's MLP in DeepSeek-V3's closed form of the weights (MACs a position), which layer it is, its sizes: a
    dense layer's 3 D F, or the router, k routed experts and the shared experts."""
    if not c.is_moe(0):
        return "3 D F", "layer 0, dense", f"F = {c.d_ff:,}"
    sizes = f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, Fs = {c.d_shared:,}"
    return "D E + 3 k D Fe + 3 D Fs", "layer 0, with experts", sizes


def output(z, p: SimpleNamespace, at: Tape):
    """The heads' mixes [H, T, dv] merged and projected back to the stream: o = Z W_o [T, D]."""
    z = at.stage("merge_heads", merge_heads(z), "T H*dv")
    return at.matmul("out", z, p.o_proj.weight.T, "T H*dv, H*dv D -> T D")


def attend(q, K, V, bias, config: Any, at: Tape):
    """softmax(q K^T x scale + bias) V, per head: keys dh wide, values dv wide."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", np.multiply(s, constant(s, config.softmax_scale), out=at.scratch(s)), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", a, V, "H T t, H t dv -> H T dv")


def turn(x, rotary, config: Any):
    """Rotary on x's last dr numbers; where rope_interleave, the pairs (x0, x1), (x2, x3), ... de-interleaved first
    to (x0, x2, ...; x1, x3, ...), as transformers' apply_rotary_pos_emb_interleave lays its output out."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    if config.rope_interleave:
        x = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
    cos, sin = rotary
    if cos.ndim == 3:  # a batch's tables [B, T, dr]: one for every head
        cos, sin = cos[:, None], sin[:, None]
    return rotate(x, cos, sin)


def join(a, b):
    """[..., n] and [..., m] side by side: [..., n + m], their leading axes broadcast (one sequence's mask [T, t]
    beside a batch's [B, 1, T, c])."""
    if isinstance(a, ShapeOnly) or isinstance(b, ShapeOnly):
        return ShapeOnly((*a.shape[:-1], a.shape[-1] + b.shape[-1]), a.dtype)
    lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    return np.concatenate([np.broadcast_to(x, (*lead, x.shape[-1])) for x in (a, b)], axis=-1)


def broadcast(x, shape):
    """x repeated along its axes of 1 (the shared rotary key, for every head): a view."""
    return ShapeOnly(shape, x.dtype) if isinstance(x, ShapeOnly) else np.broadcast_to(x, shape)
