"""Lightning attention (MiniMax-01's linear attention), as transformers' MiniMaxLightningAttention computes it, every
product through Tape.matmul: its tensors, its stages, its two forms and their closed forms.

H heads of dh (queries, keys and values alike): [q k v] = silu(h W_qkv) [T, 3 H dh], each head's three side by side;
no rotary positions, no scaling, no normalisation of q or k. Each head keeps a state S [dh, dh] (keys to values) and
fades it by a fixed decay e^-s a position, s the head's slope rate: s_h = r^(h+1) (1 - l / (L - 1) + 1e-5), r = 2^(-8 /
H), larger for the early heads and the early layers (l the layer, L the layers; ALiBi's slopes, MiniMax's schedule).

The recurrent form, which a decode step computes (`recurrent`): per position and head,

    S = e^-s S + k^T v      the state fades, the position written at its key (an outer product: dh^2 MACs of length 1)
    o = q S                 the output: the state read with the query (dh dot products of length dh)

A prompt is computed in blocks of C = min(block_size, T) positions (`chunked`; the last block is what is left, not
padded: transformers' loop takes each block as it is), block by block, so that most of its work is in products of C
rows. Within a block of b positions, i and j counted from its start:
- the output is what the state entering the block gives its queries, decayed from the block's start,
  (e^-s(i+1) q_i) S (`lightning.query`), plus the block's own linear attention: (Q K^T . e^-s(i-j), j <= i) V
  (`lightning.qk`, then `lightning.mix`);
- the state leaving the block is e^-sb S + (e^-s(b-1-j) k_j)^T V (`lightning.write`).
query and write are the recurrent form's two products for b positions at once (the same MACs); qk and mix are what
the blocks add. The ledger counts the blocks as computed and gives each of their records the recurrent form's cost
beside it (Record.recurrent).

In closed form (`scan_products`), per head: the recurrent form 2 dh^2 MACs a position, whatever the context; a prompt
of T positions in blocks b_1 .. b_N (N = ceil(T / C)), 2 T dh^2 (query and write) + 2 dh (b_1^2 + .. + b_N^2) (qk and
mix): per position 2 dh^2 + 2 dh C where C divides T. Around the scan, a position's products with weights: 3 D H dh
(qkv), D H dh (the output gate) and H dh D (out); its cache, each head's [dh, dh] state.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS, merge_heads, rms_norm, sigmoid, split_into_heads, without_pads
from ...engine.shapes import ShapeOnly
from ...engine.stages import READS_STATE, STATE, WRITES_STATE, Stage, by_op
from ...engine.tape import Tape
from .blocks import LayerInputs
from .deltanet import LINEAR_PROJECTIONS
from .part import Part, Products, Tensor, Tensors, linear

# The gated norm of the heads' outputs is MiniMaxRMSNorm(H dh) at its default epsilon, not the config's rms_norm_eps
NORM_EPS = 1e-6
NO_RECURRENT = (0, 0)  # what the recurrent form computes of a product it does not have (a block's qk and mix)


def projection(op: str, name: str, equation: str, reads: str) -> Stage:
    return Stage(op, (name,), "matmul", equation, reads, LINEAR_PROJECTIONS, product="projection")


# The scan's stages: one position at a time (a decode step: decay, write, update, query) and in blocks (a prompt).
LIGHTNING = by_op(
    Stage("lightning.qk", ("linear_attn.qk",), "matmul", "Q K^T  (within each block)",
          "Q [H, b, dh], K^T [H, dh, b]", STATE),
    Stage("lightning.attn", ("linear_attn.attn",), "scale", "A = Q K^T . e^-s(i-j)  (j <= i; 0 above)",
          "Q K^T [H, b, b]"),
    Stage("lightning.mix", ("linear_attn.mix",), "matmul", "A V  (within the block)", "A [H, b, b], V [H, b, dh]", STATE),
    Stage("lightning.q_decayed", ("linear_attn.q_decayed",), "scale", "e^-s(i+1) q_i  (decayed from the block's start)",
          "q [H, b, dh]"),
    Stage("lightning.query", ("linear_attn.query",), "matmul", "o = q S  (a prompt: (e^-s(i+1) Q) S, a block at once)",
          "q [H, 1, dh] or decayed Q [H, b, dh], S [H, dh, dh]", STATE, state=READS_STATE),
    Stage("lightning.block_out", ("linear_attn.block_out",), "add", "o = (e^-s(i+1) Q) S + A V", "[H, b, dh]"),
    Stage("lightning.k_decayed", ("linear_attn.k_decayed",), "scale", "e^-s(b-1-j) k_j  (decayed to the block's end)",
          "k [H, b, dh]"),
    Stage("lightning.write", ("linear_attn.write",), "matmul", "k^T v  (an outer product; a prompt: K'^T V, a block)",
          "k^T [H, dh, 1], v [H, 1, dh] or K'^T [H, dh, b], V [H, b, dh]", STATE, state=WRITES_STATE),
    Stage("lightning.update", ("linear_attn.state",), "add", "S = e^-s S + k^T v  (a prompt: e^-sb S + K'^T V)",
          "S [H, dh, dh]"),
    Stage("lightning.joined", ("linear_attn.core_out",), "reshape", "o: the blocks' outputs in order", "o [H, T, dh]"),
)  # fmt: skip
# A block's products and stages, each as the whole prompt's record shows the blocks side by side (N blocks of C)
ACROSS_BLOCKS = {
    "lightning.qk": "H N C dh, H N dh C -> H N C C",
    "lightning.attn": "H N C C",
    "lightning.mix": "H N C C, H N C dh -> H N C dh",
    "lightning.q_decayed": "H N C dh",
    "lightning.query": "H N C dh, H N dh dh -> H N C dh",
    "lightning.block_out": "H N C dh",
    "lightning.k_decayed": "H N C dh",
    "lightning.write": "H N dh C, H N C dh -> H N dh dh",
    "lightning.update": "H N dh dh",
}


@dataclass(frozen=True)
class LightningAttention(Part):
    """A lightning-attention layer of a config with its shapes (n_head H, d_head dh, block_size, n_layer for the
    slopes' schedule; hidden_act the activation of q, k and v)."""

    kinds = {
        "lightning_in": "lightning attention projection W_qkv [3*H*dh, D]",
        "lightning_gate": "lightning attention output gate W_gate [H*dh, D]",
        "lightning_out": "lightning attention output weights W_out [D, H*dh]",
        "lightning_decay": "lightning attention decays (buffers: slope_rate, query_decay, key_decay, diagonal_decay)",
    }
    buffers = ("lightning_decay",)  # transformers computes them from the config and saves them: no parameters

    def stages(self, config: Any) -> dict[str, Stage]:
        """Its stages around the scan (LIGHTNING, the scan's, in between)."""
        return by_op(
            Stage("lightning.pads", ("linear_attn.unpadded",), "mask",
                  "h = 0 at a left-padded row's pad slots (none enters the state)", "h [T, D]"),
            projection("lightning.qkv", "linear_attn.qkv_proj", "[q k v] = h W_qkv", "h [T, D], W_qkv [D, 3*H*dh]"),
            Stage("lightning.act", ("linear_attn.qkv_act",), "activation", "[q k v] = silu([q k v])", "qkv [T, 3*H*dh]"),
            Stage("lightning.split", ("linear_attn.q", "linear_attn.k", "linear_attn.v"), "reshape",
                  "q, k, v -> H heads of dh  (each head's three side by side)", "qkv [T, 3*H*dh]"),
            *LIGHTNING.values(),
            Stage("lightning.merge", ("linear_attn.z",), "reshape", "o -> [T, H*dh]", "o [H, T, dh]"),
            Stage("lightning.norm", ("linear_attn.normed",), "norm", "o = RMSNorm(o)  (over all H dh numbers)",
                  "o [T, H*dh]"),
            projection("lightning.gate", "linear_attn.output_gate", "g = h W_gate", "h [T, D], W_gate [D, H*dh]"),
            Stage("lightning.gated", ("linear_attn.gated",), "scale", "o = sigmoid(g) o", "g, o [T, H*dh]"),
            projection("lightning.out", "linear_attn.out_proj", "o = o W_out", "o [T, H*dh], W_out [H*dh, D]"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """silu(h W_qkv) split into heads, the scan (recurrent for one position, in blocks for more), the heads'
        RMSNorm gated by sigmoid(h W_gate), out_proj. `inputs.cache`: the layer's state ("recurrent" [H, dh, dh]), or
        None without a cache; `inputs.pads`, a left-padded batch's pad slots (zeroed before q, k and v: silu(0) = 0)."""
        at, state, pads = at.declaring(self.declared(config)), inputs.cache, inputs.pads
        H, dh = config.n_head, config.d_head
        x = at.stage("lightning.pads", without_pads(h, at.dims.past, pads), "T D") if pads is not None else h
        qkv = at.matmul("lightning.qkv", x, p.qkv_proj.weight.T, "T D, D 3*H*dh -> T 3*H*dh")
        qkv = at.stage("lightning.act", ACTIVATIONS[config.hidden_act](qkv), "T 3*H*dh")
        q, k, v = at.stage("lightning.split", split_qkv(qkv, H, dh), "H T dh; H T dh; H T dh")
        slopes = slope_rates(config, at.layer_index or 0)
        o = lightning(at, q, k, v, slopes, None if state is None else state["recurrent"], config.block_size)
        o = at.stage("lightning.merge", merge_heads(o), "T H*dh")
        o = at.stage("lightning.norm", rms_norm(o, p.norm.weight, NORM_EPS), "T H*dh")
        g = at.matmul("lightning.gate", h, p.output_gate.weight.T, "T D, D H*dh -> T H*dh")
        o = at.stage("lightning.gated", sigmoid(g) * o, "T H*dh")
        return at.matmul("lightning.out", o, p.out_proj.weight.T, "T H*dh, H*dh D -> T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """qkv_proj [3 H dh, D], out_proj [D, H dh], output_gate [H dh, D], norm [H dh]: no biases; and the decays
        transformers keeps as buffers (slope_rate [H, 1, 1], query_decay and key_decay [H, C, 1], diagonal_decay [1,
        H, C, C], C the block size), which it saves and this computes from the config."""
        D, H, dh, C = config.n_embd, config.n_head, config.d_head, config.block_size
        return {
            **linear("qkv_proj", 3 * H * dh, D, False, "lightning_in"),
            **linear("out_proj", D, H * dh, False, "lightning_out"),
            **linear("output_gate", H * dh, D, False, "lightning_gate"),
            "norm.weight": Tensor((H * dh,), "norms"),
            "slope_rate": Tensor((H, 1, 1), "lightning_decay"),
            "query_decay": Tensor((H, C, 1), "lightning_decay"),
            "key_decay": Tensor((H, C, 1), "lightning_decay"),
            "diagonal_decay": Tensor((1, H, C, C), "lightning_decay"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """Its projections and the scan's products (mix's length as the blocks' average where the last is shorter),
        in the order they run."""
        D, H, dh = config.n_embd, config.n_head, config.d_head
        scan = {op: (dots, macs // dots) for op, (dots, macs) in self.scan(config, T, t, B).items()}
        return {
            "lightning.qkv": (B * T * 3 * H * dh, D),
            **scan,
            "lightning.gate": (B * T * H * dh, D),
            "lightning.out": (B * T * D, H * dh),
        }

    # A recurrent layer's scan (parts/hybrid.py reads these): its products as computed, and in the recurrent form.
    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        return scan_products(config, T, B)

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        return 2 * T * config.n_head * config.d_head**2


def split_qkv(qkv, H: int, dh: int) -> tuple:
    """[..., T, 3 H dh], each head's q, k and v side by side (transformers' reshape to [T, H, 3 dh], then split) ->
    q, k, v [..., H, T, dh] (views)."""
    heads = split_into_heads(qkv, H)  # [..., H, T, 3 dh]
    return heads[..., :dh], heads[..., dh : 2 * dh], heads[..., 2 * dh :]


def slope_rates(config: Any, layer: int) -> np.ndarray:
    """Each head's decay rate s_h = r^(h+1) (1 - l / (L - 1 + 1e-5) + 1e-5), r = 1 / 2^(8 / H), in float64 (transformers'
    get_slope_rate: the first heads fade fastest, the last layer's least)."""
    H = config.n_head
    rates = (1 / 2 ** (8 / H)) ** np.arange(1, H + 1, dtype=np.float64)
    return rates * (1 - layer / (config.n_layer - 1 + 1e-5) + 1e-5)


def _decay(slopes: np.ndarray, steps, like) -> Any:
    """e^(-s steps) for each head's slope s [H] and an array of steps [...] -> [H, ...], in `like`'s dtype (a stand-in
    of that shape where `like` is one: counting computes no decays)."""
    if isinstance(like, ShapeOnly):
        return ShapeOnly((len(slopes), *np.shape(steps)), like.dtype)
    return np.exp(-slopes.reshape(-1, *([1] * np.ndim(steps))) * steps).astype(like.dtype)


def _pairwise_decay(slopes: np.ndarray, b: int, like) -> Any:
    """e^-s(i-j) for each head's slope s and each pair of a block's b positions, 0 where j > i (the future) -> [H, b,
    b]: a view of each head's 2 b - 1 decays (distances -(b - 1) .. b - 1), the same numbers as e^-s(i-j) made pair
    by pair, without making [H, b, b] float64 exponents and their exp, each twice the block's scores (MiniMax's 250
    positions in one block peaked at 2.3x the activation estimate)."""
    distances = np.arange(2 * b - 1) - (b - 1.0)
    decays = _decay(slopes, np.where(distances >= 0, distances, np.inf), like)  # [H, 2 b - 1]
    if isinstance(decays, ShapeOnly):
        return ShapeOnly((len(slopes), b, b), like.dtype)
    # row i, column j: decays[i - j + b - 1], a window of b read backwards from b - 1 + i
    return np.lib.stride_tricks.sliding_window_view(decays, b, axis=-1)[..., ::-1]


def lightning(at: Tape, q, k, v, slopes: np.ndarray, state, block: int):
    """q, k, v [..., H, T, dh] -> o [..., H, T, dh]: the recurrent form for one position, blocks of `block` for more.
    `state` [..., H, dh, dh] is read and overwritten in place (None: a fresh sequence whose state is not kept)."""
    S = state if state is not None else _zeros(v, (*v.shape[:-2], v.shape[-1], v.shape[-1]))
    if q.shape[-2] == 1:
        o, S = recurrent(at, q, k, v, slopes, S)
    else:
        o, S = chunked(at, q, k, v, slopes, S, block)
    if state is not None and not isinstance(state, ShapeOnly):
        state[...] = S
    return o


def recurrent(at: Tape, q, k, v, slopes: np.ndarray, S):
    """One position, as a decode step computes it: the state faded and written at k, read with q (transformers'
    recurrent loop). Returns (o [..., H, 1, dh], the new state)."""
    write = at.matmul("lightning.write", k.swapaxes(-1, -2), v, "H dh T, H T dh -> H dh dh")
    S = at.stage("lightning.update", _decay(slopes, np.ones((1, 1)), v) * S + write, "H dh dh")
    return at.matmul("lightning.query", q, S, "H T dh, H dh dh -> H T dh"), S


def chunked(at: Tape, q, k, v, slopes: np.ndarray, S, block: int):
    """T > 1 positions in blocks of C = min(block, T), the last what is left (transformers' loop, unpadded), each block
    needing the state the one before it left. Written as one record per op of the whole prompt (Tape.record_gathered),
    each with the recurrent form's cost beside it. Returns (o [..., H, T, dh], the state after the last position)."""
    T, H, dh = q.shape[-2], q.shape[-3], q.shape[-1]
    C = min(block, T)
    N = -(-T // C)
    at = at.with_sizes(C=C, N=N)
    pieces = at.in_pieces()
    outputs = []
    every_step = np.arange(C)  # positions within a block (a shorter last block's are the first)
    for start in range(0, T, C):
        b = min(C, T - start)
        part = pieces.with_sizes(Cn=b)
        qn, kn, vn = (x[..., start : start + b, :] for x in (q, k, v))
        steps = every_step[:b]
        scores = part.matmul("lightning.qk", qn, kn.swapaxes(-1, -2), "H Cn dh, H dh Cn -> H Cn Cn")
        A = part.stage("lightning.attn", scores * _pairwise_decay(slopes, b, v), "H Cn Cn")
        del scores  # freed before mix, which reads A (the estimate holds A and mix's output: verbs/memory.py)
        mix = part.matmul("lightning.mix", A, vn, "H Cn Cn, H Cn dh -> H Cn dh")
        q_decayed = part.stage("lightning.q_decayed", qn * _decay(slopes, steps[:, None] + 1.0, v), "H Cn dh")
        query = part.matmul("lightning.query", q_decayed, S, "H Cn dh, H dh dh -> H Cn dh")
        outputs.append(part.stage("lightning.block_out", query + mix, "H Cn dh"))
        k_decayed = part.stage("lightning.k_decayed", kn * _decay(slopes, b - 1.0 - steps[:, None], v), "H Cn dh")
        write = part.matmul("lightning.write", k_decayed.swapaxes(-1, -2), vn, "H dh Cn, H Cn dh -> H dh dh")
        S = part.stage("lightning.update", S * _decay(slopes, np.full((1, 1), float(b)), v) + write, "H dh dh")
    batch = int(np.prod(q.shape[:-3]))  # the recurrent form's counts are a sequence's, times the batch
    recurrent_form = {
        "lightning.query": (batch * T * H * dh, batch * T * H * dh * dh),
        "lightning.write": (batch * T * H * dh * dh, batch * T * H * dh * dh),
        "lightning.qk": NO_RECURRENT,
        "lightning.mix": NO_RECURRENT,
    }
    at.record_gathered(pieces, ACROSS_BLOCKS, along="N", recurrent=recurrent_form)
    o = _joined(outputs, q)
    return at.stage("lightning.joined", o, "H T dh"), S


def blocks(T: int, block: int) -> tuple[int, int]:
    """(the number of blocks, the sum of their squared sizes) of a prompt of T positions computed in blocks of
    C = min(block, T), the last what is left."""
    C = min(block, T)
    full, left_over = divmod(T, C)
    return full + (left_over > 0), full * C * C + left_over * left_over


def scan_products(c: Any, T: int, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, MACs) of each product of one lightning layer's scan over T positions (a config with its shapes),
    in the order they run: the recurrent form's two where T = 1 (write k^T v: dh^2 of length 1; query q S: dh of
    length dh), the blocks' four where T > 1 (qk: b^2 of length dh and mix: b dh of length b within each block of b
    positions; query: b dh of length dh and write: dh^2 of length b, the recurrent form's two a block at once)."""
    H, dh = c.n_head, c.d_head
    if T == 1:
        return {"lightning.write": (B * H * dh * dh, B * H * dh * dh), "lightning.query": (B * H * dh, B * H * dh * dh)}
    n_blocks, squares = blocks(T, c.block_size)
    return {
        "lightning.qk": (B * H * squares, B * H * squares * dh),
        "lightning.mix": (B * H * T * dh, B * H * squares * dh),
        "lightning.query": (B * H * T * dh, B * H * T * dh * dh),
        "lightning.write": (B * H * n_blocks * dh * dh, B * H * T * dh * dh),
    }


def _zeros(like, shape):
    return ShapeOnly(shape, like.dtype) if isinstance(like, ShapeOnly) else np.zeros(shape, like.dtype)


def _joined(outputs: list, like):
    """The blocks' outputs [..., H, b, dh] back in one row of positions, [..., H, T, dh]."""
    if isinstance(outputs[0], ShapeOnly):
        T = sum(o.shape[-2] for o in outputs)
        return ShapeOnly((*outputs[0].shape[:-2], T, outputs[0].shape[-1]), like.dtype)
    return np.concatenate(outputs, axis=-2)
