"""Generation: a prefill over the prompt, then one decode step per new token, each pass in the ledger.

With the KV cache (the default) the prefill computes K and V for every prompt position and logits
for the last one; each decode step then computes one new row. Without it, every step recomputes
the whole sequence (the passes are passes.py's). One prompt and a batch of them run the one loop
(`Continuation`), which trace drives too. Either way, a shape-only run of the other way is counted
beside it (count.py), so the ledger says what the cache saved.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..engine import selection
from ..engine.ledger import Ledger, Phase, totals_of
from ..engine.tape import Watcher
from ..errors import UserError
from ..models.model import Model, register_generate
from .attention_maps import AttentionMaps, attention_layers_of, attention_of
from .count import count_folded
from .drift import Drift
from .options import GenerationOptions, RunOptions
from .passes import forward_passes


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


def next_token(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """Greedy at temperature 0; otherwise sample from softmax(logits / temperature) over the top k."""
    if temperature == 0:
        return int(np.argmax(logits))
    number = logits.dtype.type  # float32, or float64 in the reference mode
    with np.errstate(over="ignore", divide="ignore"):
        scaled = logits / number(temperature)
    if np.isnan(scaled).any() or not np.isfinite(scaled.max()):  # a temperature so small that the division overflows:
        # the limit is greedy (a logit of -inf, a token masked out, is sampled as never, not a reason to stop sampling)
        return int(np.argmax(logits))
    if top_k is not None and top_k < scaled.size:  # exactly k, equal ones the lower id first (engine/selection.py)
        kept = np.full_like(scaled, -np.inf)
        chosen = selection.top_k(scaled, top_k, order="index")
        kept[chosen] = scaled[chosen]
        scaled = kept
    weights = np.exp(scaled - scaled.max())
    # The running sum and the draw in float64: in float32, a weight below half a step of the sum so far (4e-8 after a
    # leading 1) never moved it, and every token after the largest could not be drawn (0 of 20,000 draws where
    # transformers' distribution gives 41); a float32 draw is as coarse, 2^-24.
    cumulative = np.cumsum(weights, dtype=np.float64)
    return int(min(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"), logits.size - 1))


def top_candidates(logits: np.ndarray, n: int, tokenizer) -> list[Candidate]:
    """The n most likely next tokens with their probabilities (softmax at temperature 1)."""
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    # the n largest, equal ones the lower id first: the one rule of engine/selection.py
    order = selection.top_k(probabilities, min(n, probabilities.size))
    return [Candidate(int(i), tokenizer.token_str(int(i)), float(probabilities[i])) for i in order]


def generate(
    model: Model,
    prompt: str | list[int] | list,
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
    """Continue a prompt token by token: the options are GenerationOptions' (options.py), checked once here.

    Several prompts (a list of texts, or of token-id lists; a list of ints is one prompt) run as one
    batch and give one Generation per prompt, all holding the batch's one ledger: see `Continuation`.

    `on_token(token_id, text)` is called as each token is chosen (text may be "" while a UTF-8
    character is incomplete). `attention`: a layer (or list of layers) whose attention weights, every
    head, are kept for the report, from one pass of their own over the sequence (attention_maps.attention_of: the
    generation runs unwatched either way, its ledger the same); None keeps none.
    """
    options = GenerationOptions(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        use_cache=use_cache,
        candidates=candidates,
        stop_at_eos=stop_at_eos,
        ledger=ledger,
        running=RunOptions(dense_attention=dense_attention),
    )
    if on_token is not None and not callable(on_token):  # before the prefill, which called it
        raise UserError(f"on_token must be a function of (token_id, text), not {on_token!r:.60}")
    if model.shape_only:
        raise UserError(
            "a shape-only model (Model.without_weights) has no numbers to choose tokens by: count its generation "
            "instead, count_generation(model.config, ...)"
        )
    batched = is_batch(prompt)
    refuse_a_stray_prompt(prompt, batched)
    if batched and (on_token is not None or attention is not None):
        raise UserError("on_token and attention= follow one prompt; give a batch of prompts without them")
    prompts = list(prompt) if batched else [prompt]
    rows = model.prompt_rows(prompts, options.max_new_tokens, verb="continue")
    generations = continue_rows(model, prompts, rows, options, batched=batched, on_token=on_token, attention=attention)
    return generations if batched else generations[0]


register_generate(generate)  # model.generate(...) runs it (models/model.py)


def is_batch(prompt) -> bool:
    """Several prompts: a list (or tuple) of texts or of token-id lists. A list of ints is one prompt, as ids."""
    return isinstance(prompt, (list, tuple)) and len(prompt) > 0 and all(isinstance(p, PROMPT_KINDS) for p in prompt)


PROMPT_KINDS = (str, list, tuple, np.ndarray)  # what each prompt of a batch is: text or token ids


def refuse_a_stray_prompt(prompt, batched: bool) -> None:
    """A list of prompts with one that is none (None, a number among texts) refused naming it: read as one prompt of
    ids, it was refused blaming the good ones."""
    if batched or not isinstance(prompt, (list, tuple)) or not any(isinstance(p, PROMPT_KINDS) for p in prompt):
        return
    i, stray = next((i, p) for i, p in enumerate(prompt) if not isinstance(p, PROMPT_KINDS))
    raise UserError(f"prompt {i + 1} of the {len(prompt)} is {stray!r:.40}: give each as text or a list of token ids")


def left_padded(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of different lengths as one [B, T] array, each row right-aligned: (ids, pads per row)."""
    T = max(len(r) for r in rows)
    pads = np.array([T - len(r) for r in rows])
    return np.array([[pad_id] * pad + r for pad, r in zip(pads, rows)]), pads


def check_padding(model: Model, rows: list[list[int]]) -> None:
    """Refuse, before any pass or line of output, a batch of prompts of different lengths where the model takes no
    left padding (its config's padding_refused says why)."""
    if model.config.padding_refused and len(set(map(len, rows))) > 1:
        raise UserError(model.config.padding_refused)


def continue_rows(
    model: Model,
    prompts: list,
    rows: list[list[int]],
    options: GenerationOptions,
    *,
    batched: bool = False,
    on_token: Callable[[int, str], None] | None = None,
    attention: int | list[int] | None = None,
) -> list[Generation]:
    """Continue prompts already read into ids (`rows`, checked by model.prompt_rows) with options already checked:
    one Generation per prompt. The CLI calls this after its own checks; generate() after its."""
    if batched:
        check_padding(model, rows)
    continuation = Continuation(model, prompts, rows, options, batched)
    layers = None if attention is None else attention_layers_of(model, attention)  # refused before the run
    continuation.run(on_token)  # unwatched: its ledger is the one the same generation counts without maps
    maps = None
    if layers is not None:  # one prompt's (generate refuses them beside a batch)
        maps = attention_of(model, rows[0] + continuation.new_tokens[0][:-1], layers)
    return continuation.generations(maps)


class Continuation:
    """The one generation loop, for B rows at once (one prompt is a batch of one): at each pass, for each row still
    going, the candidates (first pass), the next token, its text, end-of-text. `run` makes the passes, `generations`
    gives what they made; a trace (verbs/trace.py) drives the same loop with a watcher on each pass.

    One prompt (`batched` False) runs as ids [T]. A batch runs as one [B, T] array: the prompts left-padded to the
    longest (pad slots hold end-of-text, which no real query sees) and each row's positions starting at its first
    real token, as transformers' batched generate does; so each row's greedy continuation is the one its prompt
    gets alone. A row that reaches end-of-text stops there but stays in the batch, fed end-of-text, until every
    row has stopped or max_new_tokens are made: the ledger counts its products, with the pad slots', as padding.
    Sampling draws the rows' tokens in order from one generator: the same batch and seed give the same texts.
    """

    def __init__(
        self, model: Model, prompts: list, rows: list[list[int]], options: GenerationOptions, batched: bool = False
    ) -> None:
        self.model, self.prompts, self.rows, self.options, self.batched = model, prompts, rows, options, batched
        dense = options.running.dense_attention
        self.book = Ledger(model.describe(), dense_attention=dense) if options.ledger else None  # which model, dtype
        self.new_tokens: list[list[int]] = [[] for _ in rows]
        self.candidates: list[list[Candidate]] = [[] for _ in rows]  # at the first new position
        self._streams = [model.tokenizer.stream_decoder(context=r) for r in rows]  # a first space is kept
        self._pieces: list[list[str]] = [[] for _ in rows]  # each continuation's text, as it streams

    def run(
        self, on_token: Callable[[int, str], None] | None = None, watch: Callable[[Phase], Watcher | None] | None = None
    ) -> None:
        """Make the passes. `on_token(token_id, text)` as each token is chosen (and (-1, text) for the text still held
        at the end); `watch(phase)` before each pass, for its watcher. Whatever stops the loop midway (a watcher
        that raises, Ctrl-C) leaves the passes that finished, their tokens and their ledger."""
        model, options = self.model, self.options
        tokenizer, eos, B = model.tokenizer, model.config.eos_token_ids, len(self.rows)
        rng = np.random.default_rng(options.seed)
        pad_id = next((i for i in eos if 0 <= i < model.config.vocab_size), 0)  # as transformers pads: end-of-text
        finished = [False] * B
        fed: list[np.ndarray] = []
        if self.batched:
            prompts, pads = left_padded(self.rows, pad_id)
            passes = forward_passes(
                model, prompts, fed, options, pads=pads, finished=finished, book=self.book, watch=watch
            )
        else:
            passes = forward_passes(model, np.asarray(self.rows[0]), fed, options, book=self.book, watch=watch)
        try:
            for step, logits in enumerate(passes):
                warn_if_not_finite(logits, step)
                column = np.full(B, pad_id)  # the tokens fed next: a finished row is fed end-of-text
                for b, row_logits in enumerate(logits.reshape(B, -1)):
                    if finished[b]:
                        continue
                    if step == 0 and options.candidates:
                        self.candidates[b] = top_candidates(row_logits, options.candidates, tokenizer)
                    token = next_token(row_logits, options.temperature, options.top_k, rng)
                    column[b] = token
                    self.new_tokens[b].append(token)
                    self._pieces[b].append(self._streams[b].push(token))
                    if on_token is not None:
                        on_token(token, self._pieces[b][-1])
                    finished[b] = options.stop_at_eos and token in eos
                if all(finished):
                    break
                fed.append(column if self.batched else column[0])
        finally:
            if self.book is not None:  # the pass a stop interrupted chose no token
                del self.book.phases[max(map(len, self.new_tokens)) :]
        for pieces, stream in zip(self._pieces, self._streams):
            pieces.append(stream.flush())
        if on_token is not None and self._pieces[0][-1]:
            on_token(-1, self._pieces[0][-1])

    def generations(self, attention: AttentionMaps | None = None) -> list[Generation]:
        """One Generation per prompt, all holding the one ledger, which is given what the same generation costs the
        other way (cache on/off), counted from shapes with the blocks folded."""
        book, options, tokenizer = self.book, self.options, self.model.tokenizer
        if book is not None and book.phases:
            other = replace(options, max_new_tokens=len(book.phases), use_cache=not options.use_cache)
            other_way = count_folded(
                self.model.config, max(map(len, self.rows)), other, len(self.rows) if self.batched else 1
            )
            book.other_way, book.other_way_macs = totals_of(other_way), [p.macs for p in other_way]
        return [
            Generation(
                self.model.name,
                p if isinstance(p, str) else tokenizer.decode(r),
                r,
                new,
                "".join(piece),
                found,
                book,
                [tokenizer.token_str(i) for i in r],
                [tokenizer.token_str(i) for i in new],
                attention,
            )
            for p, r, new, piece, found in zip(self.prompts, self.rows, self.new_tokens, self._pieces, self.candidates)
        ]


def warn_if_not_finite(logits: np.ndarray, step: int) -> None:
    """A RuntimeWarning where a pass's logits hold nan or inf: NaN arithmetic is quiet (a NaN weight makes every logit
    nan and every probability nan, and the token chosen is id 0, not the model's), so that it is said; the CLI says it
    with NumPy's own warnings as one note at the end (cli.arithmetic_in_one_note)."""
    if not np.isfinite(logits).all():
        nan, inf = int(np.isnan(logits).sum()), int(np.isinf(logits).sum())
        warnings.warn(
            f"non-finite logits encountered in pass {step} ({nan:,} nan and {inf:,} inf of {logits.size:,}): "
            "the tokens chosen there are not the model's",
            RuntimeWarning,
            stacklevel=2,
        )


def batch_to_dict(generations: list[Generation]) -> dict:
    """The JSON of a batch: the model, one entry per prompt (as a single generation's, without the ledger),
    then the batch's one ledger (phases with each row's pads, totals with `padding`)."""
    ledger = generations[0].ledger
    d = {
        "model": ledger.model if ledger else {"name": generations[0].model},
        "generations": [{k: v for k, v in g.to_dict().items() if k in _ROW_KEYS} for g in generations],
    }
    if ledger is not None:
        d |= {k: v for k, v in ledger.to_dict().items() if k != "model"}
    if generations[0].drift is not None:
        d["drift"] = generations[0].drift.to_dict()
    return d


_ROW_KEYS = ("prompt", "prompt_tokens", "new_tokens", "text", "prompt_pieces", "new_pieces", "candidates")
