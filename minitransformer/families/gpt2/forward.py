"""GPT-2's forward pass, one named stage per line, as GPT2LMHeadModel computes it at inference.

Each line is an equation of the model: its stage name (stages.py), the NumPy that computes it, and
its shape in symbols that the tape checks against the real sizes (T new positions, t attended
positions, D = d_model, H heads of dh, F = MLP width, V vocabulary; see stages.py). Every matrix
product goes through `tape.matmul`, which counts its dot products.

The same code runs on real arrays and on shape-only stand-ins (shapes.py): counting a model too
big for this machine is running this code without weights. families/llama/forward.py is the same pass
for the Llama family, written as its difference from this one; both are the pre-norm block (families/blocks.py)
of their parts in the decoder (families/decoder.py).
"""

from __future__ import annotations

from math import sqrt
from types import SimpleNamespace

import numpy as np

from ...engine.ops import (
    ACTIVATIONS,
    add_mask,
    mask_future,
    merge_heads,
    slot_positions,
    softmax,
    split_heads,
)
from ...engine.tape import Tape
from ..blocks import LayerInputs, PreNorm, ln
from ..decoder import Decoder
from .config import GPT2Config


def embed(ids, p: SimpleNamespace, config: GPT2Config, tape: Tape, pads=None):
    """x = W_te[ids] + W_pe[positions]. `pads` (a batch of left-padded rows): each row's positions start at its
    first real token; pad slots sit at negative positions and read row 0 of W_pe: no real query sees them."""
    d = tape.dims
    positions = slice(d.past, d.past + d.T) if pads is None else np.maximum(slot_positions(d.past, d.T, pads), 0)
    return tape.stage("embed", p.wte.weight[ids] + p.wpe.weight[positions], "T D")


def attention(h, p: SimpleNamespace, config: GPT2Config, at: Tape, inputs: LayerInputs):
    """Causal multi-head self-attention from the fused c_attn projection; the mask of a padded batch (inputs.mask)
    adds the pad keys to the future."""
    qkv = at.matmul("qkv", h, p.c_attn.weight, "T D, D 3D -> T 3D", bias=p.c_attn.bias)
    q, k, v = at.stage("split_heads", split_heads(qkv, config.n_head), "H T dh")
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh")
    # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage("merge_heads", merge_heads(z), "T D")
    return at.matmul("out", z, p.c_proj.weight, "T D, D D -> T D", bias=p.c_proj.bias)


def attend(q, K, V, bias, config: GPT2Config, at: Tape):
    """Each query's mix of the values, weighted by softmax(mask(q K^T x scale)) over the keys: the causal mask,
    or `bias` where a batch's pad keys are masked too."""
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", scale_scores(s, config, at.layer_index or 0, out=at.scratch(s)), "H T t")
    if bias is None:  # the causal mask alone, from a table of the whole context
        s = at.stage("mask", mask_future(s, at.dims.past, config.n_positions, out=at.scratch(s)), "H T t")
    else:
        s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", a, V, "H T t, H t dh -> H T dh")


def mlp(h, p: SimpleNamespace, config: GPT2Config, at: Tape):
    u = at.matmul("mlp.up", h, p.c_fc.weight, "T D, D F -> T F", bias=p.c_fc.bias)
    g = at.stage("mlp.act", ACTIVATIONS[config.activation_function](u), "T F")
    return at.matmul("mlp.down", g, p.c_proj.weight, "T F, F D -> T D", bias=p.c_proj.bias)


def attention_scale(config: GPT2Config, layer: int) -> float:
    """1/sqrt(dh) (scale_attn_weights), further divided by layer + 1 (scale_attn_by_inverse_layer_idx)."""
    factor = 1.0 / sqrt(config.d_head) if config.scale_attn_weights else 1.0
    return factor / (layer + 1) if config.scale_attn_by_inverse_layer_idx else factor


def scale_scores(s, config: GPT2Config, layer: int, out=None):
    factor = attention_scale(config, layer)
    return s if factor == 1.0 else np.multiply(s, s.dtype.type(factor), out=out)


# Token ids [T] (or [B, T]) -> logits [R, V]: the pre-norm blocks (LayerNorm) of these parts, between the embedding
# with its learned positions and the tied unembedding. Without padded rows, each block's attention masks its own
# future (mask_future); a padded batch's mask hides the pad keys too.
block = PreNorm(attention, mlp, ln, names=("ln_1", "attn", "ln_2", "mlp"))
gpt2 = Decoder(block, ln, embed, embedding="wte", layers="h", final_norm="ln_f", masks_its_future=True)
