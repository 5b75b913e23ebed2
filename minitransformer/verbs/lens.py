"""The logit lens: each layer's residual stream read through the model's own final norm and unembedding.

Entry 0 is the stream the first block reads (the embedding), entry i the stream after block i - 1; the last entry
is the stream the final norm reads, whose readout is the model's logits. Conventions: the final norm recomputed on each
entry (its own statistics, its gain and bias as they are), nothing folded or centred, as TransformerLens's
`logit_lens` on its bridge does (`ActivationCache.accumulated_resid(apply_ln=True)`'s stack read through `ln_final`,
`W_U`, `b_U`). A rank is 1 for the most probable token (ties: only strictly larger logits count, as there), and the
probability is the softmax over the whole vocabulary.

Its bill (bill.py): the forward pass, and the readout's products (every entry's and position's logits, through the
counting door); `count_lens` gives the same from shapes alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.ledger import Phase
from ..engine.selection import top_k
from ..errors import OptionError, UserError
from ..models.model import Model
from ..models.options import switch
from .bill import Bill
from .choices import is_whole
from .count import check_pass


@dataclass
class LensEntry:
    """One entry of the lens at one position: the target's rank (1: the top) and probability, the top tokens."""

    label: str  # "embed", "after block 3"
    position: int
    rank: int
    probability: float
    top: list[tuple[int, float]]  # (token id, probability), most probable first


@dataclass
class Lens:
    prompt: list[int]
    target: int
    entries: list[LensEntry]
    bill: Bill
    logits: np.ndarray  # [entries, positions read, V]
    positions: list[int]

    def first_top(self, position: int | None = None) -> str | None:
        """The first entry at which the target is the most probable token (at the last position read, or `position`,
        counted from the end where negative), or None. A position the lens did not read is refused (it answered None,
        as if the target were never on top: -1 for the last position did)."""
        T, at = len(self.prompt), self.positions[-1] if position is None else position
        if (
            isinstance(at, bool)
            or not isinstance(at, (int, np.integer))
            or not -T <= at < T
            or at % T not in self.positions
        ):
            read = f"0..{T - 1}" if len(self.positions) == T else f"{T - 1}, the last (all_positions=True reads each)"
            raise UserError(f"position must be one the lens read ({read}), not {position!r}")
        at %= T
        return next((e.label for e in self.entries if e.position == at and e.rank == 1), None)

    def to_dict(self, decode=None) -> dict:
        word = (lambda i: decode([i])) if decode else (lambda i: None)
        return {
            "prompt": self.prompt,
            "prompt_pieces": [word(i) for i in self.prompt],
            "target": {"id": self.target, "text": word(self.target)},
            "conventions": CONVENTIONS,
            "entries": [
                {
                    "entry": e.label,
                    "position": e.position,
                    "rank": e.rank,
                    "probability": e.probability,
                    "top": [{"id": i, "text": word(i), "probability": p} for i, p in e.top],
                }
                for e in self.entries
            ],
            "bill": self.bill.to_dict(),
        }


TOP_TOKENS = 5  # the most likely tokens listed at each entry where nobody asks for another number
CONVENTIONS = "final norm recomputed per entry, nothing folded or centred (TransformerLens's logit_lens on its bridge)"


def check_analysed(model, verb: str, bill: str) -> None:
    """The model an analysis reads, refused in words before any pass: what is no Model (an AttributeError on its first
    use), and a shape-only one (Model.without_weights), whose stand-ins have no values to read (a TypeError in the
    first NumPy function that needs them); its cost is counted from the config alone (`bill`)."""
    if not isinstance(model, Model):
        raise UserError(f"{verb} reads a Model (load_model(...)), not {model!r:.60}")
    if model.shape_only:
        raise UserError(
            f"a shape-only model (Model.without_weights) has no numbers for {verb} to read: count its bill instead, "
            f"{bill}(model.config, tokens)"
        )


def one_token(model: Model, target, what: str = "--target") -> int:
    """A target token, text or id, as one id: text that is several tokens (or none) is refused, saying so."""
    if isinstance(target, (int, np.integer)):  # True too: check_ids refuses a bool as it refuses it among ids
        return int(model.check_ids([target])[0])
    ids = model.prompt_ids(target)
    if len(ids) != 1:
        pieces = " + ".join(repr(model.tokenizer.decode([i])) for i in ids) or "no token"
        raise UserError(f"{what} {target!r} is {len(ids)} tokens ({pieces}), not one: give a single token")
    return ids[0]


def two_tokens(model: Model, target, versus) -> tuple[int, int]:
    """The target and versus tokens (text or ids) as two ids, refused where they are the same token (patch's shares
    and attribute's pieces of a difference that is always 0)."""
    target_id, versus_id = one_token(model, target), one_token(model, versus, "--versus")
    if target_id == versus_id:
        raise UserError("--target and --versus are the same token: their logit difference is always 0")
    return target_id, versus_id


def entry_labels(n_layer: int) -> list[str]:
    return ["embed", *(f"after block {i}" for i in range(n_layer))]


def residual_stack(model: Model, ids: list[int], phase: Phase | None = None) -> np.ndarray:
    """[L + 1, T, D]: the stream each block reads and the one the final norm reads, from one pass (its logits of the
    last position only: the readout reads every entry out, the last too, so the pass's own would be read twice)."""
    wanted = stream_names(model.config.n_layer)
    _, cache = model.run_with_cache(ids, names=wanted, all_positions=False, phase=phase)
    return np.stack([cache[name][0] for name in wanted])


def stream_names(L: int) -> list[str]:
    """The names of the L + 1 streams the lens reads: each block's input, and the last block's output."""
    return [f"blocks.{i}.hook_resid_pre" for i in range(L)] + [f"blocks.{L - 1}.hook_resid_post"]


def logit_lens(model: Model, prompt, target, all_positions: bool = False, top: int = TOP_TOKENS) -> Lens:
    """The lens of `prompt` (text or ids) for `target` (a token's text or id): at the last position, or every one;
    `top`: the most likely tokens listed at each."""
    check_analysed(model, "logit_lens", "count_lens")
    switch("all_positions", all_positions)
    if not is_whole(top, 1):
        raise OptionError("top", f"(tokens listed) must be a whole number of at least 1, not {top!r}")
    ids = model.prompt_ids(prompt)
    if not ids:
        raise UserError('the prompt is empty; give some text, e.g. "The capital of France is"')
    model.check_ids(ids)
    target_id = one_token(model, target)
    forward, readout = Phase("prefill", 0, len(ids), len(ids), cached=False), Phase("prefill", 0, 0, 0, cached=False)
    stack = residual_stack(model, ids, forward)
    positions = list(range(len(ids))) if all_positions else [len(ids) - 1]
    logits = model.readout(stack[:, positions], phase=readout)  # [L + 1, P, V]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    entries = []
    for n, label in enumerate(entry_labels(model.config.n_layer)):
        for k, position in enumerate(positions):
            row, p = logits[n, k], probs[n, k]
            best = top_k(row, min(top, row.shape[-1]))  # the one rule: equal logits, the lowest id first
            rank = 1 + int((row > row[target_id]).sum())
            entries.append(LensEntry(label, position, rank, float(p[target_id]), [(int(i), float(p[i])) for i in best]))
    bill = Bill()
    bill.add("forward pass", [forward])
    bill.add(f"readout of {len(entry_labels(model.config.n_layer))} entries x {len(positions)} positions", [readout])
    return Lens(ids, target_id, entries, bill, logits, positions)


def count_lens(config, tokens: int, all_positions: bool = False) -> Bill:
    """The lens's bill from shapes alone: a shape-only pass of `tokens` positions, its streams captured as the lens
    captures them (a watched pass computes every T x t score: engine/row_chunks.py), and the readout's products."""
    from ..engine.shapes import ShapeOnly

    switch("all_positions", all_positions)
    check_pass(config, tokens)
    model = Model.without_weights(config)
    forward, readout = Phase("prefill", 0, tokens, tokens, cached=False), Phase("prefill", 0, 0, 0, cached=False)
    model.run_with_cache(
        np.zeros(tokens, dtype=np.int64), stream_names(config.n_layer), all_positions=False, phase=forward
    )
    P = tokens if all_positions else 1
    model.readout(ShapeOnly((config.n_layer + 1, P, *model.stream_shape)), phase=readout)
    bill = Bill()
    bill.add("forward pass", [forward])
    bill.add(f"readout of {config.n_layer + 1} entries x {P} positions", [readout])
    return bill
