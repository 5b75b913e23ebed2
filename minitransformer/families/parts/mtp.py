"""Multi-token prediction (DeepSeek-V3's MTP module; transformers 5.24's `MtpLayer` and `MtpModel`, in
modeling_layers.py): beside the main pass, a draft of the token after the next one, from the main model's last hidden
state and the next token's embedding. MTP layer k (k = 0 .. n_mtp - 1) reads row i's hidden state h_i (the main
model's after its final norm, for k = 0; layer k - 1's output after) and the embedding of the token one further on:

    u = [RMSNorm_e(W_te[t_{i+1+k}]), RMSNorm_h(h_i)]     [T, 2D]  (the embedding first; mtp_hidden_states_first is
                                                                   no published checkpoint's)
    x = u W_eh^T                                          [T, D]   eh_proj, 2D down to D
    x = block(x)                                                   a decoder layer of the main model's kind (its
                                                                   experts where the model has them), its own cache
    h' = RMSNorm_head(x)                                  [T, D]   shared_head.norm (transformers' post_norm)
    logits = h' W_U^T                                     [R, V]   the main model's head: the draft of t_{i+2+k}

Its rows sit one position further on than the main pass's (transformers' MtpCache: row i of layer k at position
i + 1 + k, which its rotary tables turn by), and it keeps its own keys and values. A family that has it declares it
(Decoder's `mtp`), with `layer_config`: its config as the MTP layers see it, they appended after the main model's (a
DeepSeek-V3's: every one with experts, as transformers' get_mtp_config sets first_k_dense_replace to 0). Its tensors
sit in the checkpoint as further layers, layers.{n_layer + k} (DeepSeek-V3's layers.61), beside copies of the
embedding and the head that it reads from the main model instead. Counting rule: its passes are their own phase of the
ledger ("mtp", one beside each pass of the main model), never the main pass's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.kvcache import KVCache
from ...engine.ops import attention_bias
from ...engine.shapes import ShapeOnly
from ...engine.stages import LAST, UNEMBEDDING, Stage, by_op
from ...engine.tape import Tape
from .. import rotary
from .blocks import LayerInputs, under
from .norms import RMSNorm
from .part import Part, Products, Tensor, Tensors

MTP = "multi-token prediction"  # the group of its own product, eh_proj

STAGES = (
    Stage(
        "mtp_embed",
        ("mtp_embed",),
        "lookup",
        "e = W_te[t_{i+1}]  (the next token's embedding: the main model's table)",
        "ids [T]",
    ),
    Stage("enorm", ("enorm",), "norm", "e = RMSNorm_e(e)", "e [T, D]"),
    Stage(
        "hnorm",
        ("hnorm",),
        "norm",
        "h = RMSNorm_h(h_i)  (the main model's last hidden state, after its final norm)",
        "h [T, D]",
    ),
    Stage("mtp_concat", ("mtp_concat",), "reshape", "u = [e, h]", "e, h [T, D]"),
    Stage(
        "eh_proj",
        ("eh_proj",),
        "matmul",
        "x = u W_eh^T  (2D down to D)",
        "u [T, 2D], W_eh^T [2D, D]",
        MTP,
        product="projection",
    ),
    Stage("mtp_norm", ("mtp_norm",), "norm", "h' = RMSNorm_head(x)  (shared_head.norm)", "x [T, D]"),
    LAST,
    Stage(
        "logits",
        ("logits",),
        "matmul",
        "logits = h' W_U^T  (the main model's head: the draft of t_{i+2})",
        "h' [R, D], W_U^T [D, V]",
        UNEMBEDDING,
    ),
)
DECLARED = by_op(*STAGES)

# Copies of the main model's embedding and head that DeepSeek-V3's checkpoint keeps in its MTP layer, read from the
# main model instead (as transformers' MtpModel does: its _keys_to_ignore_on_load_unexpected)
COPIES = ("embed_tokens.weight", "shared_head.head.weight")


@dataclass(frozen=True, eq=False)
class MultiTokenPrediction(Part):
    """The MTP layers of a decoder: `block`, the decoder's block, run as layer n_layer + k of `layer_config(config)`
    (the config with the MTP layers appended); `count`, the config's field that says how many there are (0: none);
    `norm`, the norm of its three RMSNorms; `layers`, the checkpoint's list of blocks they continue."""

    block: Any
    layer_config: Callable[[Any], Any]
    count: str = "n_mtp"
    norm: Any = RMSNorm()
    layers: str = "layers"

    kinds = {"mtp": "multi-token prediction: eh_proj [D, 2D] and its norms"}

    def stages(self, config: Any) -> dict[str, Stage]:
        return DECLARED

    def n_layers(self, config: Any) -> int:
        return int(getattr(config, self.count))

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """Every MTP layer's tensors, by name under the model's prefix: layers.{n_layer + k}.*."""
        D, extended = config.n_embd, self.layer_config(config)
        tensors: Tensors = {}
        for k in range(self.n_layers(config)):
            at = config.n_layer + k
            own = {"enorm.weight": Tensor((D,), "mtp"), "hnorm.weight": Tensor((D,), "mtp"),
                   "eh_proj.weight": Tensor((D, 2 * D), "mtp"), "shared_head.norm.weight": Tensor((D,), "mtp")}  # fmt: skip
            tensors |= under(f"{self.layers}.{at}", own | self.block.tensors(extended, at))
        return tensors

    def copies(self, config: Any) -> tuple[str, ...]:
        """The names of the copies of the embedding and head a checkpoint may keep in its MTP layers (not read)."""
        n = config.n_layer
        return tuple(f"{self.layers}.{n + k}.{name}" for k in range(self.n_layers(config)) for name in COPIES)

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0, R: int = 1) -> Products:
        """One MTP layer's products in a pass of T rows attending to t (its own cache's: the main pass's T and t):
        eh_proj, its block's (layer n_layer + `layer`), its logits."""
        D, extended = config.n_embd, self.layer_config(config)
        block = self.block.products(extended, T, t, B, config.n_layer + layer)
        return {"eh_proj": (B * T * D, 2 * D), **block, "logits": (B * R * config.vocab_size, D)}

    def new_cache(self, config: Any, batch: tuple[int, ...], capacity: int, shape_only: bool, dtype) -> KVCache:
        """The MTP layers' own keys and values (transformers' MtpCache), layer k's at the cache's layer k."""
        extended, n = self.layer_config(config), config.n_layer
        layers = tuple(extended.layer_cache(n + k) for k in range(self.n_layers(config)))
        return KVCache(capacity=capacity, batch=batch, shape_only=shape_only, dtype=dtype, layers=layers)

    def __call__(self, h, next_ids: np.ndarray, layers: list, p: SimpleNamespace, config: Any, cache: KVCache,
                 tape: Tape, decoder: Any, all_positions: bool = False) -> list[np.ndarray]:  # fmt: skip
        """h [T, D] (or [B, T, D]): the main pass's last hidden states, after its final norm; next_ids [T]: the token
        after each row's; `layers`: the MTP layers' weights; `p`: the main model's (its embedding and head) -> each MTP
        layer's logits [R, V], the draft of the token one further on than the last. Layer k + 1 reads layer k's
        output and the ids moved on by one, the last its greedy draft (transformers' MtpModel.forward)."""
        extended, drafts = self.layer_config(config), []
        d = tape.dims
        ids = next_ids
        for k, weights in enumerate(layers):
            at = tape.layer(config.n_layer + k)
            mine = at.declaring(self.declared(config))
            e = mine.stage("mtp_embed", getattr(p, decoder.embedding).weight[ids], "T D")
            e = mine.stage("enorm", self.norm(e, weights.enorm, config), "T D")
            g = mine.stage("hnorm", self.norm(h, weights.hnorm, config), "T D")
            u = mine.stage("mtp_concat", concat(e, g), "T 2D")
            x = mine.matmul("eh_proj", u, weights.eh_proj.weight.T, "T 2D, 2D D -> T D")
            x = self.block(x, weights, extended, at, self.inputs(extended, config.n_layer + k, k, cache, at, x, ids))
            h = mine.stage("mtp_norm", self.norm(x, weights.shared_head.norm, config), "T D")
            last = h if all_positions else mine.stage("last", h[..., -1:, :], "R D")
            unembedding = getattr(p, decoder.embedding if config.tie_word_embeddings else decoder.unembedding).weight
            logits = mine.matmul("logits", last, unembedding.T, "R D, D V -> R V")
            drafts.append(logits)
            if k + 1 < len(layers):  # the next layer reads the ids moved on by one, this layer's draft last
                shapes_only = isinstance(logits, ShapeOnly)
                draft = np.zeros(ids.shape[:-1] + (1,), np.int64) if shapes_only else logits[..., -1:, :].argmax(-1)
                ids = np.concatenate([ids[..., 1:], draft], axis=-1)
        cache.advance(d.T)
        return drafts

    def inputs(self, extended: Any, layer: int, k: int, cache: KVCache, at: Tape, x, ids) -> LayerInputs:
        """What MTP layer k's block reads: its cache's handle, its causal mask, its rope's tables at its rows'
        positions, one further on than the main pass's and k more (transformers' MtpCache offsets)."""
        e, rope = at.dims, extended.rope(layer)
        shape_only = isinstance(x, ShapeOnly)
        mask = None if shape_only else attention_bias(e.past, e.start, e.T, e.t, e.window, x.dtype)
        tables: tuple = ()
        if rope is not None:
            tables = (
                (ShapeOnly((e.T, rope.turned)), ShapeOnly((e.T, rope.turned)))
                if shape_only
                else rotary.tables(rope, e.past + 1 + k + np.arange(e.T), x.dtype)
            )
        return LayerInputs(cache.layer(k), mask, tables, None, {}, ids)


def concat(e, h):
    """[e, h] along the last axis (shape-only stand-ins: their shapes joined)."""
    if isinstance(e, ShapeOnly):
        return ShapeOnly((*e.shape[:-1], e.shape[-1] + h.shape[-1]))
    return np.concatenate([e, h], axis=-1)
