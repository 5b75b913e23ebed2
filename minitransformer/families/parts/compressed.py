"""DeepSeek-V4's attention as a part (transformers' DeepseekV4Attention and its compressors): every layer attends
through a sliding window, and a compressed layer also to entries that each stand for a window of m positions.

- q from a low-rank latent, c_q = RMSNorm(h W_qa) [T, dq], q = c_q W_qb [H, T, dh], each head RMS-normed without
  gains; one key-value head, kv = RMSNorm(h W_kv) [1, T, dh], read as both the keys and the values (K = V); the last
  dr numbers of q and kv turned in interleaved pairs, in place (the sliding layers at rope_theta, the compressed ones at
  compress_rope_theta with YaRN); the cache keeps the window's kv;
- a compressor (`Compressor`) of rate m: kv_c = h W_kv', z = h W_z' [T, w] (w = d, or 2d for two series), and for each
  window of m positions it closes, the entry sum over the window's slots of softmax(z + B)_slot * kv_c,slot, channel by
  channel (a product of length m, or 2m: the 4:1 compressor's entry reads its window's second series and the previous
  window's first), RMS-normed, its last dr numbers turned at the window's first position. Rows of a window not yet
  closed (and the last closed window's first series) wait in the cache's state; the entries are a stream of the cache,
  one for every m positions (engine/kvcache.py's `compressed`);
- heavily compressed (128:1): each query attends to its window's keys and to every entry (those of windows it has not
  seen masked); compressed sparse (4:1): a lightning indexer (`CompressedIndexer`: its own compressor of index_head_dim,
  query heads from c_q, DeepSeek-V3.2's ReLU scores weighed per head and summed, parts/indexer.py's stages) chooses
  the kc = min(index_topk, c) entries each query attends to beside its window;
- one softmax over the window's scores, the entries' and each head's sink (parts/sinks.py: gpt-oss's), scaled by
  dh^-1/2; Z = A_w K + A_c C; the output's last dr numbers turned back (the conjugate rotation at the query's
  position: values carried the keys' rotation); the grouped low-rank output: the heads in g groups, each group's
  H dh / g numbers projected to dg (o_a), the g dg of them to D (o_b).

Counting rules: the compressors' products are products (their projections with weights; the pooled sum of a window's
slots a product of length m or 2m, channel by channel); attention over compressed entries counts the entries each
query reads (every entry so far at 128:1, the kc chosen at 4:1, with the dense form beside them: every entry, as
transformers' eager attention computes them and masks all but the chosen with its block_bias), the window branch its
window (in chunks of query rows past 128: parts/attention.py's in_row_chunks). A --dense-attention pass computes that
dense form at 4:1; a watched pass, unlike DeepSeek-V3.2's, still reads the chosen entries alone (its stages show the
gathered E_c, and a pass resumed from its streams, unwatched, is the same pass to the bit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import (
    constant,
    gather_keys,
    merge_heads,
    relu,
    rms_norm,
    softmax,
    split_into_heads,
    unchosen_mask,
)
from ...engine.row_chunks import computed_pairs
from ...engine.shapes import ShapeOnly
from ...engine.stages import ATTENTION_PROJECTIONS, ATTENTION_SCORES, STATE, Stage, by_op
from ...engine.tape import Tape
from .. import rotary
from ..rotary import rotate_interleaved
from .hyper import unweighted_rms
from .indexer import INDEXER, largest
from .latent import join
from .part import Part, Products, Tensor, Tensors, linear
from .sinks import SINKS, with_sinks

SLIDING, CSA = "sliding_attention", "compressed_sparse_attention"


def turn_last(x, rotary_tables: tuple, inverse: bool = False, heads: bool = False):
    """x's last dr numbers turned in interleaved pairs, in place (transformers' V4 apply_rotary_pos_emb: a pair
    (2i, 2i + 1) by position x frequency i), dr the tables' width; `inverse`: the conjugate rotation (-sin); `heads`:
    x [..., T, Hi, d], the tables one for every head."""
    if isinstance(x, ShapeOnly):
        return ShapeOnly(x.shape, x.dtype)
    cos, sin = rotary_tables
    if heads:  # a batch's tables [B, 1, T, dr] (laid out for [B, H, T, d]) to [B, T, 1, dr]; [T, dr] to [T, 1, dr]
        cos, sin = (t[:, 0, :, None, :] if t.ndim == 4 else t[..., None, :] for t in (cos, sin))
    dr = cos.shape[-1]
    out = x.copy()
    out[..., -dr:] = rotate_interleaved(x[..., -dr:], cos, -sin if inverse else sin)
    return out


@cache
def compressor_stages(name: str, d: str, overlap: bool) -> tuple[Stage, ...]:
    """A compressor's stages under `name` ("compressor", "index.compressor"), its entries `d` wide."""
    w = f"2*{d}" if overlap else d
    slots = "2m: the previous window's first series and this one's second" if overlap else "m"
    return (
        Stage(f"{name}.kv", (f"attn.{name}.kv",), "matmul", f"kv_c = h W_kv'  ({'two series of ' if overlap else ''}"
              f"{d} a position)", f"h [T, D], W_kv' [D, {w}]", ATTENTION_PROJECTIONS),
        Stage(f"{name}.gate", (f"attn.{name}.gate",), "matmul", "z = h W_z'  (the slots' weights, channel by channel)",
              f"h [T, D], W_z' [D, {w}]", ATTENTION_PROJECTIONS),
        Stage(f"{name}.windows", (f"attn.{name}.slots", f"attn.{name}.slot_weights"), "cache",
              f"the windows of m positions this pass closes, with the rows of the open window kept from before: {slots} "
              "slots each (z + B, B the slots' position bias)", f"kv_c, z [T, {w}]"),
        Stage(f"{name}.softmax", (f"attn.{name}.weights",), "softmax", "a = softmax(z + B) over each window's slots, "
              "channel by channel", f"z [Nw, {d}, S]"),
        Stage(f"{name}.pool", (f"attn.{name}.pooled",), "matmul", "e = sum over the slots of a kv_c  (each window's "
              "entry, channel by channel: a product of length S)", f"a [Nw, {d}, 1, S], kv_c [Nw, {d}, S, 1]", STATE,
              product="projection"),
        Stage(f"{name}.norm", (f"attn.{name}.normed",), "norm", "e = RMSNorm(e)", f"e [Nw, {d}]"),
        Stage(f"{name}.rope", (f"attn.{name}.turned",), "rotate", "e = RoPE(its last dr numbers, interleaved pairs) at "
              "its window's first position", f"e [Nw, {d}]"),
        Stage(f"{name}.cache", (f"attn.{name}.entries",), "cache", "the entries so far (new ones written to the cache's "
              f"stream: {d} numbers every m positions)", f"e [Nw, {d}]"),
    )  # fmt: skip


@dataclass(frozen=True)
class Compressor(Part):
    """One compressor (transformers' DeepseekV4HCACompressor, DeepseekV4CSACompressor, the indexer's own): its
    `stream` in the cache ("compressed", "index") and state ("compressor", "indexer"), its stages' `name`, its entries'
    width `d` (a config field: head_dim, index_head_dim) and symbol, `overlap`: two series, the entry of window j
    from window j - 1's first series and window j's second (2m slots: the 4:1 compressors)."""

    name: str = "compressor"
    stream: str = "compressed"
    state: str = "compressor"
    d: str = "head_dim"
    symbol: str = "dh"
    overlap: bool = False

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(*compressor_stages(self.name, self.symbol, self.overlap))

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs, m: int, rope: rotary.Rope):
        """Every entry so far [..., c, d] (c = (past + T) // m), and the number this pass made."""
        at, d, n_d = at.declaring(self.declared(config)), self.symbol, getattr(config, self.d)
        w = f"2*{d}" if self.overlap else d
        kv = at.matmul(f"{self.name}.kv", h, p.wkv.weight.T, f"T D, D {w} -> T {w}")
        z = at.matmul(f"{self.name}.gate", h, p.wgate.weight.T, f"T D, D {w} -> T {w}")
        past, T, held = at.dims.past, at.dims.T, inputs.cache
        before, after = past // m, (past + T) // m
        n, slots = after - before, (2 if self.overlap else 1) * m
        if n:
            at = at.with_sizes(Nw=n, S=slots)
            kv_w, z_w = at.stage(
                f"{self.name}.windows", self.windows(kv, z, p, held, before, n, m, n_d), f"Nw S {d}; Nw S {d}"
            )
            a = at.stage(f"{self.name}.softmax", softmax(z_w.swapaxes(-1, -2)), f"Nw {d} S")
            spec = f"Nw {d} 1 S, Nw {d} S 1 -> Nw {d} 1 1"
            e = at.matmul(f"{self.name}.pool", a[..., None, :], kv_w.swapaxes(-1, -2)[..., None], spec)[..., 0, 0]
            e = at.stage(f"{self.name}.norm", rms_norm(e, p.norm.weight, config.norm_eps), f"Nw {d}")
            positions = (before + np.arange(n)) * m
            tables = () if isinstance(e, ShapeOnly) else rotary.tables(rope, positions, e.dtype)
            e = at.stage(f"{self.name}.rope", turn_last(e, tables), f"Nw {d}")
        else:
            e = ShapeOnly((*kv.shape[:-2], 0, n_d), kv.dtype) if isinstance(kv, ShapeOnly) else kv[..., :0, :n_d]
        if held is not None:
            self.keep(kv, z, held, past, m, n_d)
        if not after:
            return e, 0
        at = at.with_sizes(c=after, Nw=n)
        entries = held.compress(self.stream, e, T) if held is not None else e
        return at.stage(f"{self.name}.cache", entries, f"c {d}"), n

    def windows(self, kv, z, p: SimpleNamespace, held, before: int, n: int, m: int, d: int):
        """The slots of the n windows this pass closes ([..., n, S, d] values and weights, the position bias added):
        the rows kept of the open window first, then this pass's; with two series, window j's slots the first series
        of window j - 1 (kept from the last pass for the first window; none, zero weight, before the first window)
        and its own second series."""
        lead = kv.shape[:-2]
        if isinstance(kv, ShapeOnly):
            shape = (*lead, n, (2 if self.overlap else 1) * m, d)
            return ShapeOnly(shape, kv.dtype), ShapeOnly(shape, kv.dtype)
        kept = 0 if held is None else (held.cache.length % m)
        if kept:
            kv = np.concatenate([held[f"{self.state}.kv"][..., :kept, :], kv], axis=-2)
            z = np.concatenate([held[f"{self.state}.gate"][..., :kept, :], z], axis=-2)
        kv = kv[..., : n * m, :].reshape(*lead, n, m, -1)
        z = z[..., : n * m, :].reshape(*lead, n, m, -1) + p.ape.astype(kv.dtype)
        if not self.overlap:
            return kv, z
        first_kv, first_z = np.zeros_like(kv[..., :d]), np.full_like(z[..., :d], -np.inf)
        first_kv[..., 1:, :, :], first_z[..., 1:, :, :] = kv[..., :-1, :, :d], z[..., :-1, :, :d]
        if held is not None and before:  # the last closed window's first series, kept from an earlier pass
            first_kv[..., 0, :, :], first_z[..., 0, :, :] = (
                held[f"{self.state}.prior_kv"],
                held[f"{self.state}.prior_gate"],
            )
        if held is not None:
            held[f"{self.state}.prior_kv"][...], held[f"{self.state}.prior_gate"][...] = (
                kv[..., -1, :, :d],
                z[..., -1, :, :d],
            )
        return np.concatenate([first_kv, kv[..., d:]], axis=-2), np.concatenate([first_z, z[..., d:]], axis=-2)

    def keep(self, kv, z, held, past: int, m: int, d: int) -> None:
        """The rows of the window left open after this pass, kept in the cache's state for the next."""
        if isinstance(kv, ShapeOnly):
            return
        kept, T = past % m, kv.shape[-2]
        rows = (kept + T) % m  # the open window's rows after this pass: its last ones
        if rows:
            if rows > T:  # the open window began before this pass: its first rows are kept already
                held[f"{self.state}.kv"][..., kept:rows, :] = kv
                held[f"{self.state}.gate"][..., kept:rows, :] = z
            else:
                held[f"{self.state}.kv"][..., :rows, :] = kv[..., T - rows :, :]
                held[f"{self.state}.gate"][..., :rows, :] = z[..., T - rows :, :]

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, d, m = config.n_embd, getattr(config, self.d), config.ratio(layer)
        w = 2 * d if self.overlap else d
        own = {"ape": Tensor((m, w), "compressor"), "norm.weight": Tensor((d,), "norms")}
        return linear("wkv", w, D, False, "compressor") | linear("wgate", w, D, False, "compressor") | own

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Its projections of the T positions, and the pooled entry of each window the pass closes (t - T positions
        before it: t the context)."""
        D, d, m = config.n_embd, getattr(config, self.d), config.ratio(layer)
        w, n = (2 * d if self.overlap else d), t // m - (t - T) // m
        pool = {f"{self.name}.pool": (B * n * d, (2 if self.overlap else 1) * m)} if n else {}
        return {f"{self.name}.kv": (B * T * w, D), f"{self.name}.gate": (B * T * w, D), **pool}


INDEX = by_op(*INDEXER)
INDEX_STAGES = (
    INDEX["index.q"],
    INDEX["index.split_heads"],
    Stage("index.rope", ("attn.index_q_rot",), "rotate", "q_i = RoPE(its last dr numbers, interleaved pairs), at "
          "compress_rope_theta", "q_i [T, Hi, di]"),
    Stage("index.scores", ("attn.index_qk",), "matmul", "S_i = q_i E_i^T  (every index head against every entry so "
          "far)", "q_i [T, Hi, di], E_i^T [di, c]", ATTENTION_SCORES),
    Stage("index.relu", ("attn.index_relu",), "activation", "S_i = ReLU(S_i) x di^-0.5", "S_i [T, Hi, c]"),
    INDEX["index.weights"],
    INDEX["index.weigh"],
    Stage("index.sum", ("attn.index_sum",), "matmul", "I = w S_i  (each query's score of each entry)",
          "w [T, 1, Hi], S_i [T, Hi, c]", ATTENTION_SCORES),
    Stage("index.mask", ("attn.index_scores",), "mask", "I[i, j] = -inf where entry j's window is not all in i's past",
          "I [T, c]"),
    Stage("index.topk", ("attn.index_chosen",), "select", "the kc = min(index_topk, c) entries of largest I for each "
          "query (those it cannot see yet marked unchosen)", "I [T, c]"),
)  # fmt: skip
INDEX_COMPRESSOR = Compressor("index.compressor", "index", "indexer", "index_head_dim", "di", overlap=True)


def future_entries(past: int, T: int, c: int, m: int, dtype):
    """0 where query i (at past + i) has seen all of entry j's window (j < (past + i + 1) // m), -inf elsewhere [T, c]."""
    number = np.dtype(dtype).type
    seen = (past + np.arange(T) + 1)[:, None] // m
    return np.where(np.arange(c)[None, :] >= seen, number(-np.inf), number(0.0))


@dataclass(frozen=True)
class CompressedIndexer(Part):
    """transformers' DeepseekV4Indexer: its own compressor of index_head_dim (two series, at the layer's rate), query
    heads q_i = c_q W_iq [T, Hi, di] turned on their last dr numbers; I = sum over the Hi heads of w_h ReLU(q_h e /
    sqrt(di)), w = h W_iw / sqrt(Hi); the kc = min(index_topk, c) entries of largest I for each query, -1 where a
    query cannot see the entry yet."""

    compressor: Compressor = INDEX_COMPRESSOR
    kinds = {
        "indexer": "the indexer's weights: its compressor's W_kv', W_z' [2 di, D], position bias [m, 2 di] and "
        "norm, W_iq [Hi di, dq], W_iw [Hi, D]"
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(*INDEX_STAGES)

    def __call__(self, h, cq, p: SimpleNamespace, config: Any, at: Tape, inputs, m: int, rope):
        """The entries chosen for each query [..., T, kc] (-1: none) and the entries' count c; None where there are
        none yet."""
        entries, _ = self.compressor(h, p.compressor, config, at, inputs, m, rope)
        c = entries.shape[-2]
        if not c:
            return None, 0
        at = at.declaring(self.declared(config)).with_sizes(c=c, kc=min(c, config.compressed_topk))
        Hi, di = config.index_n_heads, config.index_head_dim
        q = at.matmul("index.q", cq, p.wq_b.weight.T, "T dq, dq Hi*di -> T Hi*di")
        q = at.stage("index.split_heads", q.reshape(*q.shape[:-1], Hi, di), "T Hi di")
        q = at.stage("index.rope", turn_last(q, inputs.rotary, heads=True), "T Hi di")
        s = at.matmul("index.scores", q, entries[..., None, :, :].swapaxes(-1, -2), "T Hi di, 1 di c -> T Hi c")
        s = at.stage("index.relu", relu(s) * constant(s, di**-0.5), "T Hi c")
        w = at.matmul("index.weights", h, p.weights_proj.weight.T, "T D, D Hi -> T Hi")
        w = at.stage("index.weigh", w * constant(w, Hi**-0.5), "T Hi")
        scores = at.matmul("index.sum", w[..., None, :], s, "T 1 Hi, T Hi c -> T 1 c")[..., 0, :]
        future = None if isinstance(scores, ShapeOnly) else future_entries(at.dims.past, at.dims.T, c, m, scores.dtype)
        scores = at.stage("index.mask", scores if future is None else scores + future, "T c")
        chosen = largest(scores, at.dims.size("kc"), at)
        if future is not None:  # an entry the query cannot see yet is no choice
            chosen = np.where(np.take_along_axis(np.broadcast_to(future, scores.shape), chosen, -1) < 0, -1, chosen)
        return at.stage("index.topk", chosen, "T kc", indices=range(-1, c)), c  # -1: an entry not yet seen

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        Hi, di, dq, D = config.index_n_heads, config.index_head_dim, config.q_lora_rank, config.n_embd
        own = {
            f"compressor.{name}": Tensor(t.shape, "indexer" if t.kind != "norms" else "norms")
            for name, t in self.compressor.tensors(config, layer).items()
        }
        return linear("wq_b", Hi * di, dq, False, "indexer") | linear("weights_proj", Hi, D, False, "indexer") | own

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        c, Hi, di = t // config.ratio(layer), config.index_n_heads, config.index_head_dim
        own = self.compressor.products(config, T, t, B, layer)
        if not c:
            return own
        return own | {
            "index.q": (B * T * Hi * di, config.q_lora_rank),  # c_q [T, dq] x W_iq [dq, Hi di]
            "index.scores": (B * T * Hi * c, di),  # q_i [T, Hi, di] x E_i^T [di, c]
            "index.weights": (B * T * Hi, config.n_embd),  # h [T, D] x W_iw [D, Hi]
            "index.sum": (B * T * c, Hi),  # w [T, 1, Hi] x S_i [T, Hi, c]
        }


ATTENTION = (
    Stage("q_a", ("attn.q_a",), "matmul", "c_q = h W_qa  (down to the query rank dq)", "h [T, D], W_qa [D, dq]",
          ATTENTION_PROJECTIONS),
    Stage("q_a_norm", ("attn.q_a_norm",), "norm", "c_q = RMSNorm_qa(c_q)", "c_q [T, dq]"),
    Stage("q_b", ("attn.q_b",), "matmul", "q = c_q W_qb  (H heads of dh)", "c_q [T, dq], W_qb [dq, H*dh]",
          ATTENTION_PROJECTIONS),
    Stage("split_heads", ("attn.q",), "reshape", "q -> H heads of dh", "q [T, H*dh]"),
    Stage("q_norm", ("attn.q_normed",), "norm", "q = q / rms(q)  (each head, no gains)", "q [H, T, dh]"),
    Stage("kv", ("attn.kv",), "matmul", "kv = h W_kv  (one key-value head: the keys are the values, K = V)",
          "h [T, D], W_kv [D, dh]", ATTENTION_PROJECTIONS),
    Stage("kv_norm", ("attn.kv_normed",), "norm", "kv = RMSNorm_kv(kv)", "kv [T, dh]"),
    Stage("rope", ("attn.q_rot", "attn.k_rot"), "rotate", "q, kv = RoPE(their last dr numbers, interleaved pairs in "
          "place): rope_theta in the sliding layers, compress_rope_theta (YaRN) in the compressed ones",
          "q [H, T, dh], kv [1, T, dh]"),
    Stage("cache", ("attn.keys",), "cache", "K = V: the window's kv (new rows written to the cache: dh numbers a "
          "position, once)", "kv [1, T, dh]"),
    Stage("gather", ("attn.chosen_entries",), "cache", "E_c = each query's kc chosen entries (4:1 layers; a dense "
          "pass reads every entry, those not chosen masked)", "E [1, c, dh], chosen [T, kc]"),
    Stage("scores", ("attn.qk",), "matmul", "S = Q K^T  (each head against the window's keys)",
          "Q [H, T, dh], K^T [1, dh, t]", ATTENTION_SCORES),
    Stage("compressed.scores", ("attn.qe",), "matmul", "S_c = Q E^T  (against every entry so far, 128:1; against "
          "each query's kc chosen entries, 4:1; dense form: every entry)", "Q [H, T, dh], E^T [1, dh, c] (or E_c^T "
          "[T, dh, kc])", ATTENTION_SCORES),
    Stage("join", ("attn.all_scores",), "reshape", "S = [S | S_c]  (one softmax over the window and the entries)",
          "S [H, T, t], S_c [H, T, c]"),
    Stage("scale", ("attn.scaled",), "scale", "S = S / sqrt(dh)", "S [H, T, t+c]"),
    Stage("mask", ("attn.scores",), "mask", "S = -inf at a key in the future or behind the window, and at an entry "
          "whose window is not all in the query's past (4:1: not chosen)", "S [H, T, t+c]"),
    SINKS,
    Stage("softmax", ("attn.all_weights",), "softmax", "A = softmax(S') over the keys, the entries and the sink, the "
          "sink's column dropped", "S' [H, T, t+c+1]"),
    Stage("split", ("attn.weights", "attn.entry_weights"), "reshape", "A_w, A_c = A's columns of the window's keys "
          "and of the entries", "A [H, T, t+c]"),
    Stage("mix", ("attn.mix",), "matmul", "Z = A_w V  (V = K: the window's kv)", "A_w [H, T, t], V [1, t, dh]",
          ATTENTION_SCORES),
    Stage("compressed.mix", ("attn.mix_entries",), "matmul", "Z_c = A_c E  (the entries are values too)",
          "A_c [H, T, c], E [1, c, dh]", ATTENTION_SCORES),
    Stage("compressed.add", ("attn.z",), "add", "Z = Z + Z_c", "Z [H, T, dh]"),
    Stage("unrope", ("attn.z_unturned",), "rotate", "Z = RoPE^-1(its last dr numbers) at the query's position (the "
          "values carried their keys' rotation)", "Z [H, T, dh]"),
    Stage("merge_heads", ("attn.z_heads",), "reshape", "Z -> g groups of H dh / g", "Z [H, T, dh]"),
    Stage("out_a", ("attn.out_a",), "matmul", "o_g = Z_g W_oa,g  (each group of heads to dg: the grouped low-rank "
          "output)", "Z_g [g, T, H dh / g], W_oa [g, H dh / g, dg]", ATTENTION_PROJECTIONS),
    Stage("merge_groups", ("attn.out_groups",), "reshape", "o_a -> [T, g dg]", "o_g [g, T, dg]"),
    Stage("out", ("attn.out",), "matmul", "o = o_a W_ob", "o_a [T, g*dg], W_ob [g*dg, D]", ATTENTION_PROJECTIONS),
)  # fmt: skip


@dataclass(frozen=True)
class CompressedAttention(Part):
    """DeepSeek-V4's attention: its window in every layer, a compressor in the compressed layers (config.ratio(layer):
    0 none, and an indexer where the layer is compressed sparse)."""

    kinds = {
        "attention_q": "attention query weights W_qa [dq, D] and W_qb [H*dh, dq]",
        "attention_kv": "the one key-value head's weights W_kv [dh, D]",
        "attention_out": "grouped output weights W_oa [g*dg, H*dh/g] and W_ob [D, g*dg]",
        "attention_sinks": "attention sinks: one logit per head [H]",
        "compressor": "the compressors' weights W_kv', W_z' [w, D] and position bias [m, w] (w = dh, 2 dh at 4:1)",
        **CompressedIndexer.kinds,
    }

    def stages(self, config: Any) -> dict[str, Stage]:
        kinds = set(config.attention_types)
        compressors = [Compressor(overlap=False)] * (any(k not in (SLIDING, CSA) for k in kinds))
        compressors += [Compressor(overlap=True)] * (CSA in kinds)
        stages = [s for c in compressors for s in c.stages(config).values()]
        indexer = list(CompressedIndexer().stages(config).values()) if CSA in kinds else []
        index_compressor = list(INDEX_COMPRESSOR.stages(config).values()) if CSA in kinds else []
        return by_op(*ATTENTION[:9], *stages, *index_compressor, *indexer, *ATTENTION[9:])

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs):
        at = at.declaring(self.declared(config))
        layer = at.layer_index or 0
        H, eps, kind, m = config.n_head, config.norm_eps, config.attention_kind(layer), config.ratio(layer)
        cq = at.matmul("q_a", h, p.wq_a.weight.T, "T D, D dq -> T dq")
        cq = at.stage("q_a_norm", rms_norm(cq, p.q_norm.weight, eps), "T dq")
        q = at.matmul("q_b", cq, p.wq_b.weight.T, "T dq, dq H*dh -> T H*dh")
        q = at.stage("split_heads", split_into_heads(q, H), "H T dh")
        q = at.stage("q_norm", unweighted_rms(q, eps), "H T dh")
        kv = at.matmul("kv", h, p.wkv.weight.T, "T D, D dh -> T dh")
        kv = at.stage("kv_norm", rms_norm(kv, p.norm.weight, eps), "T dh")[..., None, :, :]
        q, kv = at.stage("rope", (turn_last(q, inputs.rotary), turn_last(kv, inputs.rotary)), "H T dh; 1 T dh")
        K = at.stage("cache", inputs.cache.append(kv, kv)[0] if inputs.cache is not None else kv, "1 t dh")
        entries, chosen, c = None, None, 0
        if m:
            rope = config.rope(layer)
            compressor = Compressor(overlap=kind == CSA)
            entries, _ = compressor(h, p.compressor, config, at, inputs, m, rope)
            c = entries.shape[-2]
            if kind == CSA:  # also before its first entry: its compressor keeps the open window's rows for the next
                chosen, _ = CompressedIndexer()(h, cq, p.indexer, config, at, inputs, m, rope)
        z = self.attend(q, K, entries if c else None, chosen, p.attn_sink, config, at, inputs, m)
        z = at.stage("unrope", turn_last(z, inputs.rotary, inverse=True), "H T dh")
        return self.output(z, p, config, at)

    def attend(self, q, K, entries, chosen, sinks, config: Any, at: Tape, inputs, m: int):
        """The window and the entries in one softmax with the sinks, in chunks of query rows past 128. At 4:1 each
        query's chosen entries, gathered (watched too: the stages show them); a dense pass reads every entry, those
        not chosen masked."""
        past, c = at.dims.past, 0 if entries is None else entries.shape[-2]
        sized = at.with_sizes(c=c, kc=min(c, config.compressed_topk)) if c else at
        gathers = bool(c) and chosen is not None and not at.dense
        unchosen = None
        if c and chosen is not None and at.dense and not isinstance(chosen, ShapeOnly):
            unchosen = unchosen_mask(chosen, c, q.dtype)  # [B, 1, T, c]; one sequence's [T, c], as its mask is
            unchosen = unchosen[0] if chosen.ndim == 2 else unchosen

        def core(q_rows, K_rows, _, bias, chunk: Tape):
            mine = None
            if gathers:  # each query's chosen entries, a chunk's rows at a time (the whole pass's: kc dh a query)
                rows = slice(chunk.dims.past - past, chunk.dims.past - past + chunk.dims.T)
                indices = chosen[..., rows, :]
                safe = indices if isinstance(indices, ShapeOnly) else np.maximum(indices, 0)
                mine = (chunk.stage("gather", gather_keys(entries[..., None, :, :], safe), "1 T kc dh"), indices)
            return attend_window_and_entries(q_rows, K_rows, bias, entries, mine, sinks, config, chunk, m, unchosen)

        return sized.in_row_chunks(core, q, K, K, inputs.mask)

    def output(self, z, p: SimpleNamespace, config: Any, at: Tape):
        """The grouped low-rank output: the heads in g groups, each group's H dh / g numbers to dg, then to D."""
        g, dg = config.o_groups, config.o_lora_rank
        z = merge_heads(z)  # [T, H dh]
        z = at.stage("merge_heads", z.reshape(*z.shape[:-1], g, -1).swapaxes(-2, -3), "g T Hg")
        w = p.wo_a.weight.reshape(g, dg, -1).swapaxes(-1, -2)  # [g, H dh / g, dg]
        o = at.matmul("out_a", z, w, "g T Hg, g Hg dg -> g T dg")
        o = o.swapaxes(-2, -3)
        o = at.stage("merge_groups", o.reshape(*o.shape[:-2], g * dg), "T g*dg")
        return at.matmul("out", o, p.wo_b.weight.T, "T g*dg, g*dg D -> T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, H, dh, dq = config.n_embd, config.n_head, config.head_dim, config.q_lora_rank
        g, dg = config.o_groups, config.o_lora_rank
        tensors = {
            **linear("wq_a", dq, D, False, "attention_q"),
            "q_norm.weight": Tensor((dq,), "norms"),
            **linear("wq_b", H * dh, dq, False, "attention_q"),
            **linear("wkv", dh, D, False, "attention_kv"),
            "norm.weight": Tensor((dh,), "norms"),
            **linear("wo_a", g * dg, H * dh // g, False, "attention_out"),
            **linear("wo_b", D, g * dg, False, "attention_out"),
            "attn_sink": Tensor((H,), "attention_sinks"),
        }
        kind = config.attention_kind(layer)
        if kind != SLIDING:
            own = Compressor(overlap=kind == CSA).tensors(config, layer)
            tensors |= {f"compressor.{name}": t for name, t in own.items()}
        if kind == CSA:
            tensors |= {f"indexer.{name}": t for name, t in CompressedIndexer().tensors(config, layer).items()}
        return tensors

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """A pass of T positions at context t (t - T before it), as a real run computes them: the window's scores and
        mix as parts/attention.py's row chunks compute them (a pass of at most 128 positions: T min(t, W + T - 1)),
        the compressed entries' over every entry (128:1) or each query's kc (4:1). (Dot products, length); the window's
        mix is stated by its MACs in window_pairs."""
        D, H, dh, dq = config.n_embd, config.n_head, config.head_dim, config.q_lora_rank
        g, dg = config.o_groups, config.o_lora_rank
        pairs = computed_pairs(T, t, config.sliding_window)
        ops = {
            "q_a": (B * T * dq, D),
            "q_b": (B * T * H * dh, dq),
            "kv": (B * T * dh, D),
            "scores": (B * H * pairs, dh),
            "mix": (B * H * T * dh, pairs // T),  # (in row chunks the lengths differ: window_macs has their sum)
        }
        kind, m = config.attention_kind(layer), config.ratio(layer)
        if m:
            ops |= Compressor(overlap=kind == CSA).products(config, T, t, B, layer)
            c = t // m
            read = min(c, config.compressed_topk) if kind == CSA else c
            if kind == CSA:
                ops |= CompressedIndexer().products(config, T, t, B, layer)
            if c:
                ops |= {"compressed.scores": (B * H * T * read, dh), "compressed.mix": (B * H * T * dh, read)}
        return ops | {"out_a": (B * T * g * dg, H * dh // g), "out": (B * T * D, g * dg)}


def attend_window_and_entries(q, K, bias, entries, chosen, sinks, config: Any, at: Tape, m: int, unchosen=None):
    """softmax([q K^T | q E^T] / sqrt(dh) + masks, the sinks) [K | E], for one chunk of query rows; `chosen`: at 4:1,
    (each query's gathered entries [..., 1, T, kc, dh], their indices [..., T, kc], -1 where none); `unchosen`: at 4:1
    in a dense pass, every entry read and this mask added (ops.unchosen_mask)."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, 1 dh t -> H T t")
    width = "t"
    if entries is not None:
        if chosen is None:  # every entry: 128:1, or 4:1's dense form
            s_c = at.matmul(
                "compressed.scores", q, entries[..., None, :, :].swapaxes(-1, -2), "H T dh, 1 dh c -> H T c"
            )
            bias_c = unchosen
            if bias_c is None and bias is not None and not isinstance(s_c, ShapeOnly):
                bias_c = future_entries(at.dims.past, at.dims.T, s_c.shape[-1], m, s_c.dtype)
            if bias is None and bias_c is not None:  # a step that needs no mask of its window's keys
                bias = np.zeros((*bias_c.shape[:-1], s.shape[-1]), s.dtype)
            width = "t+c"
        else:  # 4:1: each query's chosen entries
            rows, indices = chosen
            s_c = at.matmul(
                "compressed.scores",
                q[..., None, :],
                rows.swapaxes(-1, -2),
                "H T 1 dh, 1 T dh kc -> H T 1 kc",
                dense="H T dh, 1 dh c -> H T c",
            )[..., 0, :]
            bias_c = None
            if bias is not None and not isinstance(s_c, ShapeOnly):
                bias_c = np.where(indices < 0, s_c.dtype.type(-np.inf), s_c.dtype.type(0.0))
                bias_c = bias_c[..., None, :, :] if bias_c.ndim > 2 else bias_c  # a batch's [B, T, kc]: every head
            width = "t+kc"
        s = at.stage("join", join(s, s_c), f"H T {width}")
        bias = None if bias is None else join(bias, bias_c)
    s = at.stage("scale", np.multiply(s, constant(s, config.head_dim**-0.5), out=at.scratch(s)), f"H T {width}")
    if bias is not None:
        s = at.stage("mask", s + bias, f"H T {width}")
    else:
        s = at.stage("mask", s + constant(s, 0.0), f"H T {width}")
    s = at.stage("sinks", with_sinks(s, sinks), f"H T {width}+1")
    a = at.stage("softmax", softmax(s)[..., :-1], f"H T {width}")
    t = K.shape[-2]
    if entries is None:
        return at.matmul("mix", at.stage("split", a, "H T t"), K, "H T t, 1 t dh -> H T dh")
    a, a_c = at.stage("split", (a[..., :t], a[..., t:]), f"H T t; H T {width[2:]}")
    z = at.matmul("mix", a, K, "H T t, 1 t dh -> H T dh")
    if chosen is None:
        z_c = at.matmul("compressed.mix", a_c, entries[..., None, :, :], "H T c, 1 c dh -> H T dh")
    else:
        z_c = at.matmul(
            "compressed.mix",
            a_c[..., None, :],
            chosen[0],
            "H T 1 kc, 1 T kc dh -> H T 1 dh",
            dense="H T c, 1 c dh -> H T dh",
        )[..., 0, :]
    return at.stage("compressed.add", z + z_c, "H T dh")
