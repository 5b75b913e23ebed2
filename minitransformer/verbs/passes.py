"""The forward passes of a generation: a prefill over the prompt, then one decode step per further token.

N new tokens take N passes. With the KV cache, the prefill computes K and V for every prompt
position and logits for the last one, which give the first new token; each decode step feeds the
token chosen last (T = 1, attending to all t earlier positions) and gives the next. Without the
cache, every pass recomputes the whole sequence so far. `generate` (real tokens), `count` (placeholder
tokens, usually on shape-only stand-ins) and `trace` (every stage printed) all run this one loop.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..engine.ledger import Ledger, Phase
from ..engine.tape import Watcher
from ..models.model import Model


def forward_passes(model: Model, prompt_tokens: list[int], new_tokens: list[int], n_new: int, use_cache: bool = True,
           book: Ledger | None = None, batch: tuple[int, ...] = (),
           watch: Callable[[Phase], Watcher | None] | None = None, dense_attention: bool = False):  # fmt: skip
    """Yield the next-token logits [V] of each of the n_new forward passes: the prefill, then the decode steps.

    `new_tokens` is the caller's list, which it extends with the chosen token between passes. With a
    `book`, each pass's ledger is appended to it as a Phase. `watch(phase)`, if given, is called just
    before each pass and returns the watcher of that pass (tape.py). With a `batch` shape, every row
    repeats the same tokens (counting only) and the logits are [*batch, V].
    """
    cache = model.new_cache(batch, capacity=len(prompt_tokens) + n_new) if use_cache else None
    for step in range(n_new):
        if use_cache:
            ids = prompt_tokens if step == 0 else new_tokens[-1:]
        else:
            ids = prompt_tokens + new_tokens  # recompute everything: what the cache saves
        phase = Phase("prefill" if step == 0 else "decode", step, len(ids), len(prompt_tokens) + step,
                      batch=batch[0] if batch else 1, cached=use_cache)  # fmt: skip
        if book is not None:
            book.phases.append(phase)
        watcher = watch(phase) if watch is not None else None
        rows = np.broadcast_to(np.asarray(ids), (*batch, len(ids)))
        yield model.run(
            rows,
            cache=cache,
            phase=phase if book is not None else None,
            watcher=watcher,
            dense_attention=dense_attention,
        )[..., -1, :]


def batch_forward_passes(model: Model, rows: np.ndarray, pads: np.ndarray, fed: list[np.ndarray], finished: list[bool],
                         n_new: int, use_cache: bool = True, book: Ledger | None = None,
                         dense_attention: bool = False):  # fmt: skip
    """forward_passes for B prompts at once: yield the next-token logits [B, V] of each of the n_new passes.

    `rows` [B, T] are the prompts left-padded to one length: the first pads[b] slots of row b hold no
    token (model.run masks them). `fed` is the caller's list of the tokens fed after the prompt, one
    [B] array per pass, which it extends between passes; `finished` its flags of the rows that ended
    (at end-of-text). A finished row stays in the batch and keeps computing on the tokens fed to it:
    each Phase notes which rows had finished before it, and the ledger counts their products as padding.
    """
    B, T = rows.shape
    cache = model.new_cache((B,), capacity=T + n_new) if use_cache else None
    for step in range(n_new):
        after = np.stack(fed, axis=-1) if fed else rows[:, :0]  # [B, step]
        if use_cache:
            ids = rows if step == 0 else after[:, -1:]
        else:
            ids = np.concatenate([rows, after], axis=-1)  # recompute everything: what the cache saves
        phase = Phase("prefill" if step == 0 else "decode", step, ids.shape[-1], T + step, batch=B, cached=use_cache,
                      pads=tuple(int(p) for p in pads), finished=tuple(finished))  # fmt: skip
        if book is not None:
            book.phases.append(phase)
        yield model.run(
            ids, cache=cache, phase=phase if book is not None else None, pads=pads, dense_attention=dense_attention
        )[:, -1, :]
