"""Generation: a prefill over the prompt, then one decode step per new token, each pass in the ledger.

With the KV cache (the default) the prefill computes K and V for every prompt position and logits
for the last one; each decode step then computes one new row. Without it, every step recomputes
the whole sequence (the loop is passes.py's). Either way, a shape-only run of the other way is
counted beside it (count.py), so the ledger says what the cache saved.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from ..engine.ledger import Ledger, totals_of
from ..errors import UserError
from ..models.model import Model, register_generate
from .attention_maps import AttentionMaps, AttentionRecorder
from .choices import is_whole
from .count import count_folded
from .drift import Drift
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
    drift: Drift | None = None  # at a narrower precision, its drift against float64 where measured (verbs/drift.py)

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
        if self.drift is not None:
            d["drift"] = self.drift.to_dict()
        return d

    # Jupyter draws a generation inline through `_repr_html_`, which views/html_report.py gives this class at its import
    # (register_notebook_display): the data does not import the views that show it, layers above.


def check_options(max_new_tokens, temperature, top_k, seed, candidates: int = 0) -> None:
    if not is_whole(max_new_tokens, 1):
        raise UserError(f"max_new_tokens must be a whole number of at least 1, not {max_new_tokens!r}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not (math.isfinite(temperature) and temperature >= 0)
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
    dense_attention: bool = False,
) -> Generation | list[Generation]:
    """Continue a prompt token by token: greedy at temperature 0 (top_k and seed then play no part).

    Several prompts (a list of texts, or of token-id lists; a list of ints is one prompt) run as one
    batch and give one Generation per prompt, all holding the batch's one ledger: see generate_batch.

    `on_token(token_id, text)` is called as each token is chosen (text may be "" while a UTF-8
    character is incomplete). Generation stops early at the end-of-text token if `stop_at_eos`.
    `attention`: a layer (or list of layers) whose attention weights, every head, are kept for the
    report (attention_maps.py); None keeps none, and the forward pass runs unwatched.
    `dense_attention`: every T x t score computed, as transformers' eager attention does, where a prompt longer
    than a row chunk would compute only what each chunk of query rows can see (engine/row_chunks.py): the
    same logits, and the ledger of the textbook dense form.
    """
    check_options(max_new_tokens, temperature, top_k, seed, candidates)
    if is_batch(prompt):
        if on_token is not None or attention is not None:
            raise UserError("on_token and attention= follow one prompt; give a batch of prompts without them")
        return generate_batch(model, prompt, max_new_tokens, temperature, top_k, seed, use_cache, ledger, candidates,
                              stop_at_eos, dense_attention)  # fmt: skip
    rows = model.prompt_rows([prompt], max_new_tokens, verb="continue")
    return _generate_rows(model, [prompt], rows, max_new_tokens, temperature, top_k, seed, use_cache, ledger,
                          candidates, stop_at_eos, on_token, attention, dense_attention=dense_attention)[0]  # fmt: skip


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
                   stop_at_eos: bool = True, dense_attention: bool = False) -> list[Generation]:  # fmt: skip
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
    rows = model.prompt_rows(list(prompts), max_new_tokens, verb="continue")
    return _generate_rows(model, list(prompts), rows, max_new_tokens, temperature, top_k, seed, use_cache, ledger,
                          candidates, stop_at_eos, batch=True, dense_attention=dense_attention)  # fmt: skip


def _generate_rows(model: Model, prompts: list, rows: list[list[int]], max_new_tokens: int, temperature: float,
                   top_k: int | None, seed: int | None, use_cache: bool, ledger: bool, candidates: int,
                   stop_at_eos: bool, on_token=None, attention=None, batch: bool = False,
                   dense_attention: bool = False) -> list[Generation]:  # fmt: skip
    """The one generation loop, for one prompt ([T] ids, one pass per token) or a batch ([B, T], left-padded):
    at each pass, for each row still going, the candidates (first pass), the next token, its text, end-of-text."""
    tokenizer = model.tokenizer
    eos = model.config.eos_token_ids
    rng = np.random.default_rng(seed)
    book = Ledger(model.describe()) if ledger else None  # which model ran, in which dtype
    B = len(rows)
    streams = [tokenizer.stream_decoder(context=r) for r in rows]  # decoded after the prompt: a first space is kept
    pieces: list[list[str]] = [[] for _ in rows]  # each continuation's text, as it streams
    new_tokens: list[list[int]] = [[] for _ in rows]
    found: list[list[Candidate]] = [[] for _ in rows]
    finished = [False] * B
    recorder = AttentionRecorder(model, attention, use_cache) if attention is not None else None
    if batch:
        pad_id = next((i for i in eos if 0 <= i < model.config.vocab_size), 0)  # as transformers pads: end-of-text
        ids, pads = left_padded(rows, pad_id)
        fed: list[np.ndarray] = []
        passes = batch_forward_passes(model, ids, pads, fed, finished, max_new_tokens, use_cache, book,
                                      dense_attention=dense_attention)  # fmt: skip
    else:
        passes = forward_passes(model, rows[0], new_tokens[0], max_new_tokens, use_cache, book,
                                dense_attention=dense_attention)  # fmt: skip
    with recorder or nullcontext():
        for step, logits in enumerate(passes):
            logits = logits if batch else logits[None]  # [B, V]
            column = np.full(B, pad_id if batch else 0)  # the tokens fed next, in a batch
            for b in range(B):
                if finished[b]:
                    continue
                if step == 0 and candidates:
                    found[b] = top_candidates(logits[b], candidates, tokenizer)
                token = next_token(logits[b], temperature, top_k, rng)
                new_tokens[b].append(token)
                pieces[b].append(streams[b].push(token))
                if on_token is not None:
                    on_token(token, pieces[b][-1])
                finished[b] = stop_at_eos and token in eos
                if batch:
                    column[b] = token
            if all(finished):
                break
            if batch:
                fed.append(column)
    for b, stream in enumerate(streams):
        pieces[b].append(stream.flush())
    if on_token is not None and pieces[0][-1]:
        on_token(-1, pieces[0][-1])
    if book is not None:  # the same generation the other way (cache on/off), counted from shapes, blocks folded
        other_way = count_folded(model.config, max(map(len, rows)), len(book.phases), not use_cache, B if batch else 1,
                                 dense_attention)  # fmt: skip
        book.other_way, book.other_way_macs = totals_of(other_way), [p.macs for p in other_way]
    maps = recorder.maps() if recorder else None
    return [Generation(model.name, p if isinstance(p, str) else tokenizer.decode(r), r, new, "".join(piece), cands,
                       book, [tokenizer.token_str(i) for i in r], [tokenizer.token_str(i) for i in new], maps)
            for p, r, new, piece, cands in zip(prompts, rows, new_tokens, pieces, found)]  # fmt: skip


def batch_to_dict(generations: list[Generation]) -> dict:
    """The JSON of a batch: the model, one entry per prompt (as a single generation's, without the ledger),
    then the batch's one ledger (phases with each row's pads, totals with `padding`)."""
    ledger = generations[0].ledger
    d = {"model": ledger.model if ledger else {"name": generations[0].model},
         "generations": [{k: v for k, v in g.to_dict().items() if k in _ROW_KEYS} for g in generations]}  # fmt: skip
    if ledger is not None:
        d |= {k: v for k, v in ledger.to_dict().items() if k != "model"}
    if generations[0].drift is not None:
        d["drift"] = generations[0].drift.to_dict()
    return d


_ROW_KEYS = ("prompt", "prompt_tokens", "new_tokens", "text", "prompt_pieces", "new_pieces", "candidates")
