"""Generation: a prefill over the prompt, then one decode step per new token, each pass in the ledger.

With the KV cache (the default) the prefill computes K and V for every prompt position and logits
for the last one; each decode step then computes one new row. Without it, every step recomputes
the whole sequence (the loop is passes.py's). Either way, a shape-only run of the other way is
counted beside it (count.py), so the ledger says what the cache saved.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .attention_maps import AttentionMaps, AttentionRecorder
from .choices import is_whole
from .count import count_folded
from ..errors import UserError
from ..engine.ledger import Ledger, totals_of
from ..models.model import Model, register_generate
from .passes import batch_forward_passes, forward_passes


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
    prompt_pieces: list[str] = field(default_factory=list)  # each token as text, for pictures of the tokens
    new_pieces: list[str] = field(default_factory=list)
    attention: AttentionMaps | None = None  # the layers asked for with attention=, for the report's heatmaps

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
            "prompt_pieces": self.prompt_pieces,
            "new_pieces": self.new_pieces,
            "candidates": [vars(c) for c in self.candidates],
        }
        if self.ledger is not None:
            d |= {k: v for k, v in self.ledger.to_dict().items() if k != "model"}
        return d

    # Jupyter draws a generation inline through `_repr_html_`, which views/html_report.py gives this class at its import
    # (register_notebook_display): the data does not import the views that show it, layers above.


def check_options(max_new_tokens, temperature, top_k, seed, candidates: int = 0) -> None:
    if not is_whole(max_new_tokens, 1):
        raise UserError(f"max_new_tokens must be a whole number of at least 1, not {max_new_tokens!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
        math.isfinite(temperature) and temperature >= 0
    ):
        raise UserError(f"temperature must be a finite number >= 0 (0 means greedy), not {temperature!r}")
    if top_k is not None and not is_whole(top_k, 1):
        raise UserError(f"top_k must be a whole number of at least 1, not {top_k!r}")
    if seed is not None and not is_whole(seed, 0):
        raise UserError(f"seed must be a whole number >= 0, not {seed!r}")
    if not is_whole(candidates, 0):
        raise UserError(f"candidates (next tokens listed) must be a whole number >= 0, not {candidates!r}")


def next_token(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """Greedy at temperature 0; otherwise sample from softmax(logits / temperature) over the top k."""
    if temperature == 0:
        return int(np.argmax(logits))
    number = logits.dtype.type  # float32, or float64 in the reference mode
    with np.errstate(over="ignore", divide="ignore"):
        scaled = logits / number(temperature)
    if not np.isfinite(scaled).all():  # a temperature so small that the division overflows: the limit is greedy
        return int(np.argmax(logits))
    if top_k is not None and top_k < scaled.size:
        cutoff = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= cutoff, scaled, number(-np.inf))
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
    attention: int | list[int] | None = None,
) -> Generation | list[Generation]:
    """Continue a prompt token by token: greedy at temperature 0 (top_k and seed then play no part).

    Several prompts (a list of texts, or of token-id lists; a list of ints is one prompt) run as one
    batch: see generate_batch, which returns one Generation per prompt.

    `on_token(token_id, text)` is called as each token is chosen (text may be "" while a UTF-8
    character is incomplete). Generation stops early at the end-of-text token if `stop_at_eos`.
    `attention`: a layer (or list of layers) whose attention weights, every head, are kept for the
    report (attention_maps.py); None keeps none, and the forward pass runs unwatched.
    """
    check_options(max_new_tokens, temperature, top_k, seed, candidates)
    if is_batch(prompt):
        if on_token is not None or attention is not None:
            raise UserError("on_token and attention= follow one prompt; give a batch of prompts without them")
        return generate_batch(model, prompt, max_new_tokens, temperature, top_k, seed, use_cache, ledger, candidates,
                              stop_at_eos)  # fmt: skip
    tokenizer = model.tokenizer
    prompt_tokens = model.prompt_ids(prompt)
    prompt_text = prompt if isinstance(prompt, str) else tokenizer.decode(prompt_tokens)
    if not prompt_tokens:
        raise UserError("the prompt is empty; give at least one character of text")
    model.config.check_fits(len(prompt_tokens), max_new_tokens)
    model.check_ids(prompt_tokens)
    rng = np.random.default_rng(seed)
    book = Ledger(model.describe()) if ledger else None  # which model ran
    stream = tokenizer.stream_decoder(context=prompt_tokens)  # decoded after the prompt: a first space is kept
    pieces: list[str] = []  # the continuation's text, as it streams
    new_tokens: list[int] = []
    found: list[Candidate] = []
    recorder = AttentionRecorder(model, attention, use_cache) if attention is not None else None
    with recorder or nullcontext():
        for step, logits in enumerate(forward_passes(model, prompt_tokens, new_tokens, max_new_tokens, use_cache,
                                                     book)):  # fmt: skip
            if step == 0 and candidates:
                found = top_candidates(logits, candidates, tokenizer)
            token = next_token(logits, temperature, top_k, rng)
            new_tokens.append(token)
            pieces.append(stream.push(token))
            if on_token is not None:
                on_token(token, pieces[-1])
            if stop_at_eos and token in model.config.eos_token_ids:
                break
    pieces.append(stream.flush())
    if on_token is not None and pieces[-1]:
        on_token(-1, pieces[-1])
    if book is not None:  # the same generation the other way (cache on/off), counted from shapes, blocks folded
        other_way = count_folded(model.config, len(prompt_tokens), len(new_tokens), not use_cache)
        book.other_way, book.other_way_macs = totals_of(other_way), [p.macs for p in other_way]
    return Generation(model.name, prompt_text, prompt_tokens, new_tokens, "".join(pieces), found, book,
                      [tokenizer.token_str(i) for i in prompt_tokens], [tokenizer.token_str(i) for i in new_tokens],
                      recorder.maps() if recorder else None)  # fmt: skip


register_generate(generate)  # model.generate(...) runs it (models/model.py)


def is_batch(prompt) -> bool:
    """Several prompts: a list (or tuple) of texts or of token-id lists. A list of ints is one prompt, as ids."""
    return (isinstance(prompt, (list, tuple)) and len(prompt) > 0
            and all(isinstance(p, (str, list, tuple, np.ndarray)) for p in prompt))  # fmt: skip


def left_padded(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of different lengths as one [B, T] array, each row right-aligned: (ids, pads per row)."""
    T = max(len(r) for r in rows)
    pads = np.array([T - len(r) for r in rows])
    return np.array([[pad_id] * pad + r for pad, r in zip(pads, rows)]), pads


def generate_batch(model: Model, prompts, max_new_tokens: int = 8, temperature: float = 0.0, top_k: int | None = None,
                   seed: int | None = None, use_cache: bool = True, ledger: bool = True, candidates: int = 10,
                   stop_at_eos: bool = True) -> list[Generation]:  # fmt: skip
    """Continue B prompts together, one forward pass per new token for the whole batch: one Generation per
    prompt, in order, all holding the batch's one ledger.

    The prompts are left-padded to the longest (pad slots hold end-of-text, which no real query sees)
    and each row's positions start at its first real token, as transformers' batched generate does;
    so each row's greedy continuation is the one its prompt gets alone. A row that reaches end-of-text
    stops there but stays in the batch, fed end-of-text, until every row has stopped or max_new_tokens
    are made: the ledger counts its products, with the pad slots', as padding. Sampling draws the rows'
    tokens in order from one generator: the same batch and seed give the same texts.
    """
    check_options(max_new_tokens, temperature, top_k, seed, candidates)
    tokenizer = model.tokenizer
    rows = [model.prompt_ids(p) for p in prompts]
    for i, r in enumerate(rows):
        if not r:
            raise UserError(f"prompt {i + 1} of the batch is empty; give at least one character of text")
        model.check_ids(r)
    model.config.check_fits(max(len(r) for r in rows), max_new_tokens)
    eos = model.config.eos_token_ids
    pad_id = next((i for i in eos if 0 <= i < model.config.vocab_size), 0)  # as transformers pads: end-of-text
    ids, pads = left_padded(rows, pad_id)
    rng = np.random.default_rng(seed)
    book = Ledger(model.describe()) if ledger else None  # which model ran, in which dtype
    B = len(rows)
    streams = [tokenizer.stream_decoder(context=r) for r in rows]
    pieces: list[list[str]] = [[] for _ in rows]
    new_tokens: list[list[int]] = [[] for _ in rows]
    found: list[list[Candidate]] = [[] for _ in rows]
    fed: list[np.ndarray] = []
    finished = [False] * B
    for step, logits in enumerate(batch_forward_passes(model, ids, pads, fed, finished, max_new_tokens, use_cache,
                                                       book)):  # fmt: skip
        column = np.full(B, pad_id)
        for b in range(B):
            if finished[b]:
                continue
            if step == 0 and candidates:
                found[b] = top_candidates(logits[b], candidates, tokenizer)
            token = column[b] = next_token(logits[b], temperature, top_k, rng)
            new_tokens[b].append(token)
            pieces[b].append(streams[b].push(token))
            finished[b] = stop_at_eos and token in eos
        if all(finished):
            break
        fed.append(column)
    if book is not None:  # the same batch the other way (cache on/off), counted from shapes, blocks folded
        other_way = count_folded(model.config, ids.shape[-1], len(book.phases), not use_cache, B)
        book.other_way, book.other_way_macs = totals_of(other_way), [p.macs for p in other_way]
    return [Generation(model.name, p if isinstance(p, str) else tokenizer.decode(r), r, new, "".join(piece) + s.flush(),
                       cands, book, [tokenizer.token_str(i) for i in r], [tokenizer.token_str(i) for i in new])
            for p, r, new, piece, s, cands in zip(prompts, rows, new_tokens, pieces, streams, found)]  # fmt: skip


def batch_to_dict(generations: list[Generation]) -> dict:
    """The JSON of a batch: the model, one entry per prompt (as a single generation's, without the ledger),
    then the batch's one ledger (phases with each row's pads, totals with `padding`)."""
    ledger = generations[0].ledger
    d = {"model": ledger.model if ledger else {"name": generations[0].model},
         "generations": [{k: v for k, v in g.to_dict().items() if k in _ROW_KEYS} for g in generations]}  # fmt: skip
    if ledger is not None:
        d |= {k: v for k, v in ledger.to_dict().items() if k != "model"}
    return d


_ROW_KEYS = ("prompt", "prompt_tokens", "new_tokens", "text", "prompt_pieces", "new_pieces", "candidates")
