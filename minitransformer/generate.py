"""Generation: a prefill over the prompt, then one decode step per new token, each pass in the ledger.

With the KV cache (the default) the prefill computes K and V for every prompt position and logits
for the last one; each decode step then computes one new row. Without it, every step recomputes
the whole sequence. Either way, a shape-only run of the other way is counted beside it, so the
ledger says what the cache saved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import UserError
from .ledger import Ledger, Phase, Totals
from .model import Model


@dataclass
class Candidate:
    token_id: int
    token: str
    probability: float


@dataclass
class Generation:
    model: str
    prompt: str
    prompt_tokens: list[int]
    new_tokens: list[int]
    text: str  # the continuation (decoded new tokens)
    candidates: list[Candidate] = field(default_factory=list)  # at the first generated position
    ledger: Ledger | None = None

    @property
    def full_text(self) -> str:
        return self.prompt + self.text

    def to_dict(self) -> dict:
        d = {
            "model": self.ledger.model if self.ledger else {"name": self.model},
            "prompt": self.prompt,
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "text": self.text,
            "candidates": [vars(c) for c in self.candidates],
        }
        if self.ledger is not None:
            d |= {k: v for k, v in self.ledger.to_dict().items() if k != "model"}
        return d


def check_options(max_new_tokens, temperature, top_k, seed) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise UserError(f"max_new_tokens must be a whole number of at least 1, not {max_new_tokens!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
        math.isfinite(temperature) and temperature >= 0
    ):
        raise UserError(f"temperature must be a finite number >= 0 (0 means greedy), not {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise UserError(f"top_k must be a whole number of at least 1, not {top_k!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise UserError(f"seed must be a whole number >= 0, not {seed!r}")


def next_token(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """Greedy at temperature 0; otherwise sample from softmax(logits / temperature) over the top k."""
    if temperature == 0:
        return int(np.argmax(logits))
    with np.errstate(over="ignore", divide="ignore"):
        scaled = logits / np.float32(temperature)
    if not np.isfinite(scaled).all():  # a temperature so small that float32 overflows: the limit is greedy
        return int(np.argmax(logits))
    if top_k is not None and top_k < scaled.size:
        cutoff = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= cutoff, scaled, np.float32(-np.inf))
    weights = np.exp(scaled - scaled.max())
    cumulative = np.cumsum(weights)
    return int(min(np.searchsorted(cumulative, rng.random(dtype=np.float32) * cumulative[-1], side="right"),
                   logits.size - 1))  # fmt: skip


def top_candidates(logits: np.ndarray, n: int, tokenizer) -> list[Candidate]:
    """The n most likely next tokens with their probabilities (softmax at temperature 1)."""
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    order = np.argsort(-probabilities, kind="stable")[:n]
    return [Candidate(int(i), tokenizer.token_str(int(i)), float(probabilities[i])) for i in order]


def generate(
    model: Model,
    prompt: str | list[int],
    max_new_tokens: int = 8,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    ledger: bool = True,
    candidates: int = 10,
    stop_at_eos: bool = True,
    on_token: Callable[[int, str], None] | None = None,
) -> Generation:
    """Continue a prompt token by token.

    `on_token(token_id, text)` is called as each token is chosen (text may be "" while a UTF-8
    character is incomplete). Generation stops early at the end-of-text token if `stop_at_eos`.
    """
    check_options(max_new_tokens, temperature, top_k, seed)
    tokenizer = model.tokenizer
    prompt_tokens = model.prompt_ids(prompt)
    prompt_text = prompt if isinstance(prompt, str) else tokenizer.decode(prompt_tokens)
    if not prompt_tokens:
        raise UserError("the prompt is empty; give at least one character of text")
    model.config.check_fits(len(prompt_tokens), max_new_tokens)
    model.check_ids(prompt_tokens)
    rng = np.random.default_rng(seed)
    book = Ledger({**model.config.to_dict(), "source": model.source}) if ledger else None  # which model ran
    stream = tokenizer.stream_decoder()
    new_tokens: list[int] = []
    found: list[Candidate] = []
    for step, logits in enumerate(_passes(model, prompt_tokens, new_tokens, max_new_tokens, use_cache, book)):
        if step == 0 and candidates:
            found = top_candidates(logits, candidates, tokenizer)
        token = next_token(logits, temperature, top_k, rng)
        new_tokens.append(token)
        if on_token is not None:
            on_token(token, stream.push(token))
        if stop_at_eos and token == model.config.eos_token_id:
            break
    if on_token is not None and (tail := stream.flush()):
        on_token(-1, tail)
    if book is not None:
        book.other_way = _count_other_way(model, len(prompt_tokens), len(new_tokens), use_cache)
    return Generation(model.name, prompt_text, prompt_tokens, new_tokens, tokenizer.decode(new_tokens), found, book)


def _passes(model: Model, prompt_tokens, new_tokens, max_new_tokens: int, use_cache: bool, book: Ledger | None,
            batch: tuple[int, ...] = ()):  # fmt: skip
    """Yield the next-token logits [V] of each forward pass: the prefill, then one decode step per token.

    `new_tokens` is the caller's list, which it extends between passes. With a `batch` shape, every
    row repeats the same tokens (counting only).
    """
    cache = model.new_cache(batch, capacity=len(prompt_tokens) + max_new_tokens) if use_cache else None
    for step in range(max_new_tokens):
        if use_cache:
            ids = prompt_tokens if step == 0 else new_tokens[-1:]
        else:
            ids = prompt_tokens + new_tokens  # recompute everything: what the cache saves
        phase = None
        if book is not None:
            context = len(prompt_tokens) + step
            phase = Phase("prefill" if step == 0 else "decode", step, len(ids), context,
                          batch=batch[0] if batch else 1, cached=use_cache)  # fmt: skip
            book.phases.append(phase)
        ids = np.broadcast_to(np.asarray(ids), (*batch, len(ids)))
        yield model.run(ids, cache=cache, phase=phase)[..., -1, :]


def count_passes(model: Model, n_prompt: int, n_new: int, use_cache: bool = True, batch: int = 1) -> Ledger:
    """The ledger of generating n_new tokens after an n_prompt-token prompt, whatever the tokens are.

    The counts depend on shapes only, so placeholder token ids do; on a shape-only model
    (Model.without_weights) this costs no arithmetic at all.
    """
    book = Ledger(model.config.to_dict())
    lead = (batch,) if batch > 1 else ()
    placeholder_new: list[int] = []
    for _ in _passes(model, [0] * n_prompt, placeholder_new, n_new, use_cache, book, lead):
        placeholder_new.append(0)
    return book


def _count_other_way(model: Model, n_prompt: int, n_new: int, used_cache: bool) -> Totals:
    """Totals of the same generation done the other way (cache on/off), counted from shapes alone.

    count.py folds the identical blocks into one, which keeps this a fraction of a second even after
    a long generation on a deep model.
    """
    from .count import count_folded

    passes = count_folded(model.config, n_prompt, n_new, not used_cache)
    return Totals(sum(p.dot_products for p in passes), sum(p.macs for p in passes))
