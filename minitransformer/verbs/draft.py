"""Multi-token prediction's draft beside the main pass (families/parts/mtp.py): its logits on a model whose checkpoint
holds the MTP layers, and its count from shapes alone, each MTP pass its own phase of the ledger ("mtp"), one beside
each pass of the main model: after the prefill over T prompt tokens, an MTP pass over T rows (each prompt position's
last hidden state beside the token after it); after each decode step, one over its one row. Each pass drafts one
token per MTP layer; its attention reads its own cache, as long as the main pass's context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.ledger import Ledger, Phase, totals_of
from ..engine.shapes import ShapeOnly
from ..engine.tape import Dims, Tape
from ..errors import OptionError, UserError
from ..families.config import ModelConfig
from ..families.table import architecture_of
from ..models.model import Model
from ..models.weights import mtp_tree
from ..text import plural
from .choices import is_whole
from .count import Count


def mtp_of(config: ModelConfig):
    """The family's MTP part (parts/mtp.py) where the config has MTP layers; refused by name elsewhere."""
    decoder = architecture_of(config).forward
    mtp = getattr(decoder, "mtp", None)
    if mtp is None or not mtp.n_layers(config):
        has = (
            "has no multi-token-prediction layers here (DeepSeek-V3's and GLM-4.5's have)"
            if mtp is None
            else "declares 0 (num_mtp_layers, num_nextn_predict_layers)"
        )
        raise UserError(f"{config.name}: a {config.family} model {has}; multi-token prediction drafts with them")
    return decoder, mtp


def draft_logits(model: Model, ids, phase: Phase | None = None, main: Phase | None = None) -> list[np.ndarray]:
    """Each MTP layer's logits [T - 1, V] at every row of one prompt's ids [T], without a cache: row i reads the main
    pass's last hidden state at i (after its final norm) and the token ids[i + 1], and drafts ids[i + 2]
    (transformers' MtpModel.forward_layer and its head, on the same rows and positions). `phase`: the MTP pass's
    ledger; `main`: the main pass's."""
    decoder, mtp = mtp_of(model.config)
    layers = getattr(model.params, "mtp", None)
    if layers is None:
        raise UserError(
            f"{model.source}: the checkpoint holds no multi-token-prediction layers "
            f"(layers.{model.config.n_layer}.eh_proj and the rest)"
        )
    ids = model.check_ids(ids)
    if ids.ndim != 1 or ids.shape[0] < 2:
        raise UserError("the draft reads one prompt of at least 2 token ids")
    _, kept = model.run_with_cache(ids, "ln_f", all_positions=True, phase=main)
    h = kept["ln_f"][:-1]  # [T - 1, D]: each row but the last, beside the token after it
    c, T = model.config, ids.shape[0] - 1
    cache = mtp.new_cache(c, (), T, False, model.dtype)
    tape = Tape(Dims.of(c, T, 0, R=T), phase, precision=model.precision)
    return mtp(h, ids[1:], layers, model.params, c, cache, tape, decoder, all_positions=True)


@dataclass
class DraftCount:
    """The MTP passes of a generation counted from shapes alone, one beside each of the main model's (`count`)."""

    count: Count
    passes: list[Phase]
    n_mtp: int  # MTP layers: tokens drafted a pass

    @property
    def macs(self) -> int:
        return totals_of(self.passes).macs

    def per_drafted_token(self) -> int:
        """MACs a drafted token costs in a decode step's MTP pass (the last counted): the pass over its MTP layers and
        its batch's rows, one token a layer and row."""
        return self.passes[-1].macs // (self.n_mtp * self.count.batch)


def count_drafts(count: Count) -> DraftCount:
    """The MTP pass beside each pass of a count's generation (with the cache, as drafting runs), on shape-only
    stand-ins: its T and context the main pass's, the tokens each expert gets the count's routing."""
    if not isinstance(count, Count):
        raise UserError(f"count_drafts takes a count (count_generation(config, ...)), not {count!r:.60}")
    c = count.config
    decoder, mtp = mtp_of(c)
    if not count.cached:
        raise UserError("the draft runs beside cached decoding: count --mtp without --no-cache")
    main = Model.without_weights(c.prefix(1))  # the embedding and the head the MTP layers read
    stand_ins = {name: ShapeOnly(t.shape) for name, t in mtp.tensors(c).items()}
    layers = mtp_tree(stand_ins, mtp.layers, c.n_layer)
    batch = (count.batch,) if count.batch > 1 else ()
    cache = mtp.new_cache(c, batch, count.n_prompt + count.n_new, True, np.float32)
    passes = []
    for step in range(count.n_new):
        T, past = (count.n_prompt, 0) if step == 0 else (1, count.n_prompt + step - 1)
        phase = Phase("mtp", step, T, past + T, batch=count.batch)
        tape = Tape(Dims.of(c, T, past, R=1, batch=batch), phase, routing=count.running.routing)
        h, ids = ShapeOnly((*batch, T, c.n_embd)), np.zeros((*batch, T), dtype=np.int64)
        mtp(h, ids, layers, main.params, c, cache, tape, decoder)
        passes.append(phase)
    return DraftCount(count, passes, mtp.n_layers(c))


@dataclass
class Drafted:
    """A greedy generation that drafted with the MTP layers and verified each draft with the main model (speculative
    decoding): its tokens, the main model's greedy tokens exactly; the drafts made and those the main model accepted;
    the main passes' ledger (a prefill, then each verifying pass: what every ledger view reads), and the MTP passes
    beside them, each its own phase ("mtp", step k beside the main pass of step k)."""

    tokens: list[int]
    drafted: int
    accepted: int
    book: Ledger
    drafts: list[Phase]


def check_drafted_fits(c, T: int, n_new: int) -> None:
    """Refuse n_new drafted tokens after T that the context cannot hold, saying how many fit. The positions written: the
    n_new - 1 fed back, and a verifying pass's draft one past the last of them (one new token has no verifying pass:
    the prefill's alone, as generate's)."""
    if not is_whole(n_new, 1):  # -1 gave no token and no word, 2.5 a TypeError
        raise OptionError("n_new", f"must be a whole number of at least 1, not {n_new!r}")
    needed = T + n_new if n_new > 1 else T
    if needed > c.n_positions:
        room = c.n_positions - T if T < c.n_positions else int(T == c.n_positions)
        raise UserError(
            f"a {T:,}-token prompt plus {n_new:,} drafted tokens need {needed:,} positions (a verifying pass "
            f"writes its draft one past the last token fed) of {c.name}'s {c.n_positions:,}; at most "
            f"{plural(room, 'new token', f'{room:,}')} {'fits' if room == 1 else 'fit'}"
        )


def generate_drafted(model: Model, ids, n_new: int) -> Drafted:
    """Greedy tokens of one prompt, drafted and verified: after the prefill, each main pass reads the last token and
    the MTP layer's draft of the one after it (T = 2); where the main model's own choice at the last token is the draft,
    the draft is kept and the second row's choice comes with it (two tokens for a pass), else the draft's position is
    forgotten (KVCache.rewind) and the main model's choice is the token. The MTP pass beside it reads the rows kept,
    each beside the token after it, and drafts the next. One MTP layer (DeepSeek-V3's); the tokens are those of the main
    model alone, whatever the drafts (the tests hold them to it). The prefill's logits are its last position's, as a
    generation's; a verifying pass's, both rows'."""
    decoder, mtp = mtp_of(model.config)
    layers = getattr(model.params, "mtp", None)
    if layers is None:
        raise UserError(f"{model.source}: the checkpoint holds no multi-token-prediction layers")
    if len(layers) != 1:
        raise UserError(f"drafting here runs one MTP layer; {model.config.name} has {len(layers)}")
    prompt = model.check_ids(ids)
    if prompt.ndim != 1:
        raise UserError("drafting reads one prompt, not a batch")
    c, T = model.config, prompt.shape[0]
    check_drafted_fits(c, T, n_new)
    book = Ledger(c.to_dict())
    cache = model.new_cache((), capacity=T + n_new + 1)
    drafts = mtp.new_cache(c, (), T + n_new + 1, False, model.dtype)
    tokens: list[int] = []
    made: list[Phase] = []
    fed, step, drafted, accepted = prompt, 0, 0, 0
    draft = None
    while len(tokens) < n_new:
        main = Phase("prefill" if step == 0 else "decode", step, len(fed), cache.length + len(fed))
        book.phases.append(main)
        logits, kept = model.run_with_cache(fed, "ln_f", all_positions=step > 0, kv_cache=cache, phase=main)
        chosen = logits.argmax(-1)
        if draft is None:  # the prefill: the last position's choice
            rows, new = kept["ln_f"], [int(chosen[-1])]
        elif int(chosen[0]) == draft:  # the draft kept, and the choice after it
            rows, new = kept["ln_f"], [draft, int(chosen[1])]
            accepted += 1
        else:  # the draft's position forgotten
            cache.rewind(1)
            rows, new = kept["ln_f"][:1], [int(chosen[0])]
        tokens += new
        if len(tokens) >= n_new:
            break
        beside = Phase("mtp", step, len(rows), drafts.length + len(rows))
        made.append(beside)
        next_ids = np.concatenate([prompt[1:], new]) if step == 0 else np.array(new)
        tape = Tape(Dims.of(c, len(rows), drafts.length, R=1), beside, precision=model.precision)
        (logits,) = mtp(rows, next_ids, layers, model.params, c, drafts, tape, decoder)
        draft, drafted = int(logits[-1].argmax()), drafted + 1
        fed, step = np.array([tokens[-1], draft]), step + 1
    return Drafted(tokens[:n_new], drafted, accepted, book, made)
