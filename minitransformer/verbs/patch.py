"""Activation patching: which layers and positions of a clean prompt carry what the corrupted prompt lacks.

Two prompts of the same length, a clean one ("The capital of France is") and a corrupted one ("... Germany is"), and
two tokens, the target A (" Paris") and the one it is told apart from, B (" Berlin"). The metric is the logit
difference at the last position, logit(A) - logit(B). For each layer l and position p, the corrupted run is repeated
with the stream block l reads at position p replaced by the clean run's (TransformerLens's `hook_resid_pre`); with
heads, with one head's output at one position replaced (its `attn.hook_z`, what W_O reads). Each cell is the share of
the difference restored, (patched - corrupted) / (clean - corrupted): 0 where the patch changed nothing, 1 where it
gave back the clean run's difference (TransformerLens's `PatchingResult.normalized`; its
`patching.generic_activation_patch` with `get_act_patch_resid_pre`'s and `get_act_patch_attn_head_out_by_pos`'s
setters computes the same cells, whole passes each).

Nothing before layer l changes when layer l is patched, so a patched run starts at block l (Model.run_from) on the
corrupted run's own stream, kept from its pass, and the T runs of a layer go as one batch of T rows; the bill
(bill.py) counts what was recomputed, from the ledger, and what reusing the stream saved against whole passes.
`count_patch` gives the same bill from shapes alone: each layer's products from one shape-only pass, summed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.kvcache import KeysValues
from ..engine.ledger import Phase
from ..errors import UserError
from ..models.model import Model
from ..models.options import switch
from ..text import plural
from .bill import Bill, Item
from .count import check_pass
from .lens import check_analysed, two_tokens

SHARE_CONVENTIONS = (
    "share restored = (patched - corrupted) / (clean - corrupted) of logit(target) - logit(versus) at the last "
    "position; no fold_ln, no centring (TransformerLens's fold_ln, center_writing_weights, center_unembed not applied)"
)


@dataclass
class Patching:
    """A patching sweep's result: the logit differences and the share restored per (layer, position[, head])."""

    clean: list[int]
    corrupt: list[int]
    target: int
    versus: int
    clean_difference: float
    corrupt_difference: float
    residual: np.ndarray  # [L, T]: the share restored patching the stream block l reads at position p
    heads: np.ndarray | None  # [L, T, H]: patching one head's output (NaN in layers without attention heads)
    bill: Bill
    # The layers whose heads were patched (head_layers; none without `heads`): a NaN of `heads` elsewhere is a share
    # that came out NaN (a pass that overflowed), not a head that is not there
    head_layers: tuple[int, ...] = ()

    def to_dict(self, decode=None) -> dict:
        pieces = lambda ids: [decode([i]) if decode else None for i in ids]  # noqa: E731
        cells = lambda a: [[None if np.isnan(v) else float(v) for v in row] for row in a]  # noqa: E731
        return {
            "clean": {"ids": self.clean, "pieces": pieces(self.clean)},
            "corrupt": {"ids": self.corrupt, "pieces": pieces(self.corrupt)},
            "target": {"id": self.target, "text": pieces([self.target])[0]},
            "versus": {"id": self.versus, "text": pieces([self.versus])[0]},
            "conventions": SHARE_CONVENTIONS,
            "clean_difference": self.clean_difference,
            "corrupt_difference": self.corrupt_difference,
            "residual": cells(self.residual),  # [layer][position]
            **({"heads": [cells(layer) for layer in self.heads]} if self.heads is not None else {}),  # [l][p][h]
            **({"head_layers": list(self.head_layers)} if self.heads is not None else {}),
            "bill": self.bill.to_dict(),
        }


def difference(logits: np.ndarray, target: int, versus: int) -> np.ndarray:
    """logit(target) - logit(versus) at the last position, of logits [..., R, V]."""
    return logits[..., -1, target] - logits[..., -1, versus]


def _attending(model: Model) -> list[int]:
    """The layers that attend (keep keys and values; a hybrid's recurrent layers do not)."""
    return [i for i in range(model.config.n_layer) if isinstance(model.config.layer_cache(i), KeysValues)]


def head_layers(model: Model) -> list[int]:
    """The layers whose attention heads can be patched: those that attend, where TransformerLens names each head's
    output `attn.hook_z`."""
    return [i for i in _attending(model) if f"blocks.{i}.attn.hook_z" in model.lens_aliases]


def _check_heads_named(model: Model, cache, T: int) -> None:
    """Refuse --heads where a layer that attends names no head's output attn.hook_z [1, T, H, dh], one a position and
    head (DeepSeek-V4's sliding layers name none, its compressed ones [1, groups, T, H, dh]): patching only the others
    would leave heads out without a word."""
    H = model.config.n_head
    for i in _attending(model):
        name = f"blocks.{i}.attn.hook_z"
        if name not in cache.lens() or np.ndim(cache[name]) != 4 or np.shape(cache[name])[1:3] != (T, H):
            raise UserError(
                f"--heads patches each head's output at each position, TransformerLens's attn.hook_z [batch, pos, "
                f"head, d_head], which {model.config.name}'s layer {i} does not name; patch the stream (without --heads)"
            )


def patch(model: Model, clean, corrupt, target, versus, heads: bool = False) -> Patching:
    """Patch `clean`'s residual stream (and with `heads` each head's output) into `corrupt`'s run, layer by layer and
    position by position: the share of logit(target) - logit(versus) each patch restores."""
    check_analysed(model, "patch", "count_patch")
    clean_ids, corrupt_ids = (model.prompt_ids(p) for p in (clean, corrupt))
    if not clean_ids or not corrupt_ids:
        raise UserError('a prompt is empty; give some text, e.g. "The capital of France is"')
    if len(clean_ids) != len(corrupt_ids):
        raise UserError(
            f"the clean prompt is {plural(len(clean_ids), 'token')} and the corrupted one {len(corrupt_ids)}: "
            "patching swaps "
            f"position for position, give two prompts of the same length in tokens"
        )
    model.check_ids([clean_ids, corrupt_ids])  # both, as one batch of two rows of one length
    target_id, versus_id = two_tokens(model, target, versus)
    L, T, H = model.config.n_layer, len(clean_ids), model.config.n_head
    attending = head_layers(model) if switch("heads", heads) else []
    names = [f"blocks.{i}.hook_resid_pre" for i in range(L)] + [f"blocks.{i}.attn.hook_z" for i in attending]
    runs = {what: Phase("prefill", 0, T, T, cached=False) for what in ("clean", "corrupt", "residual", "heads")}
    clean_logits, clean_cache = model.run_with_cache(clean_ids, names, all_positions=False, phase=runs["clean"])
    if heads:
        _check_heads_named(model, clean_cache, T)
    choices: dict = {}  # the corrupted pass's choices (shared indexer keys), which a run from a later block reads
    corrupt_logits, corrupt_cache = model.run_with_cache(
        corrupt_ids, names, all_positions=False, phase=runs["corrupt"], choices=choices
    )
    clean_difference = float(difference(clean_logits, target_id, versus_id))
    corrupt_difference = float(difference(corrupt_logits, target_id, versus_id))
    if clean_difference == corrupt_difference:
        raise UserError(
            f"the clean and corrupted runs give the same logit difference ({clean_difference:.6g}): no share of it "
            f"can be restored; choose prompts or tokens that differ"
        )
    share = lambda patched: (patched - corrupt_difference) / (clean_difference - corrupt_difference)  # noqa: E731
    every, residual = np.arange(T), np.empty((L, T))  # residual [L, T]: the share each patch of the stream restores
    for layer in range(L):  # T runs from block `layer`, one a position, as one batch: row p patched at p
        name = f"blocks.{layer}.hook_resid_pre"
        streams = np.repeat(corrupt_cache[name], T, axis=0)  # [T, T, D]
        streams[every, every] = clean_cache[name][0]
        logits = model.run_from(layer, streams, phase=runs["residual"], choices=choices, ids=corrupt_ids)
        residual[layer] = share(difference(logits, target_id, versus_id))
    head_shares = None
    if heads:
        head_shares = np.full((L, T, H), np.nan)
        rows, head = np.repeat(every, H), np.tile(np.arange(H), T)  # row p H + h patches head h at position p
        for layer in attending:
            clean_z = clean_cache[f"blocks.{layer}.attn.hook_z"][0]  # [T, H, dh]

            def patched(z, name, clean_z=clean_z):  # z [T H, T, H, dh], TransformerLens's layout
                z = z.copy()
                z[np.arange(T * H), rows, head] = clean_z[rows, head]
                return z

            streams = np.repeat(corrupt_cache[f"blocks.{layer}.hook_resid_pre"], T * H, axis=0)
            with model.add_hook(f"blocks.{layer}.attn.hook_z", patched):
                logits = model.run_from(layer, streams, phase=runs["heads"], choices=choices, ids=corrupt_ids)
            head_shares[layer] = share(difference(logits, target_id, versus_id)).reshape(T, H)
    bill = _bill(runs, L * T, len(attending) * T * H, L, T)
    tokens = clean_ids, corrupt_ids, target_id, versus_id
    return Patching(*tokens, clean_difference, corrupt_difference, residual, head_shares, bill, tuple(attending))


def _bill(runs: dict[str, Phase], residual_runs: int, head_runs: int, L: int, T: int) -> Bill:
    """The sweep's bill from its passes' ledgers (or a shape-only count's): the two cached runs, the patched runs, and
    what starting each at its layer saved against as many whole passes."""
    bill = Bill()
    bill.add("clean run, its streams kept", [runs["clean"]])
    bill.add("corrupted run, its streams kept", [runs["corrupt"]])
    _add_runs(bill, f"stream patched: {L} layers x {T} positions, each from its block", residual_runs, runs["residual"])
    if head_runs:
        _add_runs(bill, f"heads patched: {head_runs // T:,} heads x {T} positions", head_runs, runs["heads"])
    patched = residual_runs + head_runs
    whole = runs["corrupt"]
    recomputed = sum(i.dot_products for i in bill.items[2:]), sum(i.macs for i in bill.items[2:])
    saved = patched * whole.dot_products - recomputed[0], patched * whole.macs - recomputed[1]
    bill.saved = Item(f"starting each patched run at its block saved, against {patched:,} whole passes", 0, *saved)
    return bill


def _add_runs(bill: Bill, what: str, passes: int, phase: Phase | _Counted) -> None:
    bill.add_item(Item(what, passes, phase.dot_products, phase.macs))


@dataclass
class _Counted:
    """Products summed from shapes (count_patch): what a Phase's totals say."""

    dot_products: int = 0
    macs: int = 0


def _from_each_block(phase: Phase, L: int) -> np.ndarray:
    """[L, 2]: (dot products, MACs) of a run from block l to the logits, for each l, from one whole pass's records."""
    per_layer = np.zeros((L, 2), dtype=object)  # (dot products, MACs) of each block, Python ints
    readout = np.zeros(2, dtype=object)
    for record in phase.records:
        if record.layer is not None:
            per_layer[record.layer] += (record.dot_products, record.macs)
        elif per_layer.any():  # after the blocks: the final norm and the unembedding
            readout += (record.dot_products, record.macs)
    return np.cumsum(per_layer[::-1], axis=0)[::-1] + readout


def count_patch(config, tokens: int, heads: bool = False) -> Bill:
    """The sweep's bill from shapes alone, fast for any preset: a shape-only pass of `tokens` positions gives each
    block's products and the readout's; a run from block l costs the blocks from l on and the readout, T runs a layer
    (T H with heads, in the layers with attention heads). The clean and corrupted runs, captured, and the hooked runs
    of the heads cost what a watched pass computes (every T x t score: engine/row_chunks.py); the stream's runs from
    a block, unwatched, what a plain one does."""
    switch("heads", heads)
    check_pass(config, tokens)
    model = Model.without_weights(config)
    watched, plain = (Phase("prefill", 0, tokens, tokens, cached=False) for _ in range(2))
    attending = head_layers(model) if heads else []
    names = [f"blocks.{i}.hook_resid_pre" for i in range(config.n_layer)]
    names += [f"blocks.{i}.attn.hook_z" for i in attending]
    _, named = model.run_with_cache(np.zeros(tokens, dtype=np.int64), names, all_positions=False, phase=watched)
    if heads:  # billed only where the real sweep would run: a pass of as many tokens says which name heads
        _check_heads_named(model, named, tokens)
    model.run(np.zeros(tokens, dtype=np.int64), phase=plain)
    L, H = config.n_layer, config.n_head
    residual = _Counted(*(int(v) * tokens for v in _from_each_block(plain, L).sum(axis=0)))
    hooked = _from_each_block(watched, L)
    heads_run = _Counted(*(int(v) * tokens * H for v in hooked[attending].sum(axis=0))) if attending else _Counted()
    runs = {"clean": watched, "corrupt": watched, "residual": residual, "heads": heads_run}
    return _bill(runs, L * tokens, len(attending) * tokens * H, L, tokens)  # type: ignore[arg-type]
