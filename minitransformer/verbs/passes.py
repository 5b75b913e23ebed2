"""The forward passes of a generation: a prefill over the prompt, then one decode step per further token.

N new tokens take N passes. With the KV cache, the prefill computes K and V for every prompt
position and logits for the last one, which give the first new token; each decode step feeds the
token chosen last (T = 1, attending to all t earlier positions) and gives the next. Without the
cache, every pass recomputes the whole sequence so far. One prompt ([T] ids) and a batch of rows
([B, T]) run the same passes: `generate` (real tokens, generate.py's loop, which `trace` also drives)
and `count` (placeholder tokens, usually on shape-only stand-ins) all run this one generator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..engine.ledger import Ledger, Phase
from ..engine.tape import Watcher
from ..models.model import Model
from .options import GenerationOptions


def forward_passes(
    model: Model,
    prompts: np.ndarray,
    fed: list[np.ndarray],
    options: GenerationOptions,
    *,
    pads: np.ndarray | None = None,
    finished: list[bool] | None = None,
    repeat: tuple[int, ...] = (),
    book: Ledger | None = None,
    watch: Callable[[Phase], Watcher | None] | None = None,
) -> Iterator[np.ndarray]:
    """Yield the next-token logits [*batch, V] of each of the options.max_new_tokens passes: the prefill, then the
    decode steps.

    `prompts` are ids [T] (one prompt) or [B, T] (B rows). `fed` is the caller's list of the tokens fed after
    the prompt, one [*batch] array per pass, which it extends between passes. In a batch of prompts of
    different lengths, left-padded to one, the first pads[b] slots of row b hold no token (model.run masks
    them), and `finished` is the caller's flags of the rows that ended (at end-of-text): a finished row stays
    in the batch and keeps computing on the tokens fed to it, each Phase notes which rows had finished before
    it, and the ledger counts their products as padding. `repeat` is the shape of a batch whose rows all repeat
    `prompts` [T] (a count's placeholders): one row of ids, seen as B rows without a copy. With a `book`, each
    pass's ledger is appended to it as a Phase. `watch(phase)`, if given, is called just before each pass and
    returns its watcher (tape.py).
    """
    *rows, T = prompts.shape
    batch = (*repeat, *rows)
    cached = options.use_cache
    cache = model.new_cache(tuple(batch), capacity=T + options.max_new_tokens) if cached else None
    sequence = None if cached else np.empty((*rows, T + options.max_new_tokens), dtype=prompts.dtype)
    for step in range(options.max_new_tokens):
        ids = ids_of_pass(step, prompts, fed, sequence)
        ids = np.broadcast_to(ids, (*repeat, *ids.shape)) if repeat else ids
        phase = Phase(
            "prefill" if step == 0 else "decode",
            step,
            ids.shape[-1],
            T + step,
            batch=batch[0] if batch else 1,
            cached=cached,
            pads=() if pads is None else tuple(int(p) for p in pads),
            finished=() if finished is None else tuple(finished),
        )
        if book is not None:
            book.phases.append(phase)
        watcher = watch(phase) if watch is not None else None
        logits = model.run(
            ids,
            cache=cache,
            phase=phase if book is not None else None,
            watcher=watcher,
            pads=pads,
            options=options.running,
        )
        yield logits[..., -1, :]


def ids_of_pass(step: int, prompts: np.ndarray, fed: list[np.ndarray], sequence: np.ndarray | None) -> np.ndarray:
    """The ids pass `step` feeds: with the cache (no `sequence`), the prompts, then the token chosen last; without it,
    the whole sequence so far, which recomputing is what the cache saves, filled into `sequence` [*rows, T + N] in
    place (a stack of every token fed, each pass, made a long count quadratic)."""
    if sequence is None:
        return prompts if step == 0 else fed[-1][..., None]
    T = prompts.shape[-1]
    if step == 0:
        sequence[..., :T] = prompts
    else:
        sequence[..., T + step - 1] = fed[-1]
    return sequence[..., : T + step]
