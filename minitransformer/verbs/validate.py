"""Check a model against Hugging Face transformers on the same weights, tensor by tensor, with a verdict.

Needs torch and transformers (`pip install 'minitransformer[hf]'`); the rest of the package never
imports them. For each prompt: the largest |logit difference| over every position, and the greedy
tokens compared step by step (ours with the KV cache, theirs recomputing the sequence), in the
model's dtype: float32, or float64 for the reference.

And, whatever the dtype, how far each float32 pass, ours and transformers', is from the float64 truth:
our pass in float64, itself checked against transformers in float64 within 1e-9 relative. So a user
sees whose float32 is closer to the exact answer, not only that the two agree to 1e-4.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.ledger import Phase
from ..engine.selection import Tie
from ..errors import UserError, writable
from ..models.model import Model
from ..models.options import LoadOptions
from ..models.registry import from_directory
from ..text import plural, short_path, table
from .drift import SelectionDrift, drift, next_token_drift, top_agreement

PROMPTS = (
    "The capital of France is",
    "Hello, my dog is cute and",
    "In 1905, Albert Einstein published four papers that",
    "def fibonacci(n):\n    if n < 2:\n        return n\n   ",
    "Les mots «café» et 日本語 and emoji 🤖  with   spaces",
)
# Relative to the logits' scale: rounding grows with the magnitude of what is summed, and real GPT-2 logits
# reach the hundreds while those of random test models stay near 1. float32: two float32 passes differ by
# about 1e-6 of the scale. float64: two float64 passes by about 1e-15; 1e-9 leaves a wide margin for that,
# while one float32 step left in either pass (~1e-7) fails it.
TOLERANCES = {"float32": 1e-4, "float64": 1e-9}
# The columns each of the tables opens with: a prompt, and how far the two logits are apart
OPENING_COLUMNS = ("prompt", "tokens", "max |dlogit|", "allowed")


def prompt_ids(model: Model, text: str, seed: int) -> list[int]:
    """The prompt's tokens by the model's own tokenizer (GPT-2's for a GPT-2), or, for a model without one or
    with a smaller vocabulary, seeded random ids it can take, as many as GPT-2's tokenizer makes of the text."""
    from ..models.tokenizer import load_tokenizer

    if random_ids_reason(model, text) is None:
        return model.tokenizer.encode(text, what="the prompt")
    n = len(load_tokenizer().encode(text, what="the prompt"))
    if not n:
        raise UserError("a prompt to validate with is empty; give at least one character of text")
    return np.random.default_rng(seed).integers(0, model.config.vocab_size, n).tolist()


def random_ids_reason(model: Model, text: str) -> str | None:
    """Why prompt_ids feeds `text` to the model as seeded random ids and not as its tokens; None where it feeds the
    tokens."""
    from ..models.tokenizer import NoTokenizer

    if isinstance(model.tokenizer, NoTokenizer):
        return f"{model.name} has no tokenizer (no tokenizer.json in {short_path(model.source)})"
    ids = model.tokenizer.encode(text, what="the prompt")
    if not ids:
        raise UserError("a prompt to validate with is empty; give at least one character of text")
    if max(ids) >= model.config.vocab_size:
        return f"its tokenizer's ids pass {model.name}'s vocabulary of {model.config.vocab_size:,}"
    return None


def say_random_ids(model: Model, prompts, room: int, out) -> None:
    """The prompts fed as seeded random ids (random_ids_reason), with the ids each was fed, so that the English in
    the table is not read as what the model saw."""
    fed = [
        (text, reason, prompt_ids(model, text, seed=i)[:room])
        for i, text in enumerate(prompts)
        if (reason := random_ids_reason(model, text))
    ]
    for n, (text, reason, ids) in enumerate(fed):
        if n == 0 or reason != fed[n - 1][1]:
            print(
                f"random ids: {reason}, so these prompts are fed as seeded random ids, as many as GPT-2's "
                f"tokenizer makes of the text, not as their words:",
                file=out,
            )
        print(f"  {ids} for {text if len(text) <= 32 else text[:29] + '...'!r}", file=out)


def reference_class(model: Model) -> str:
    """The transformers class that computes the model's model_type, as AutoModelForCausalLM would pick it (each
    family's table says). Chosen from our own config rather than by AutoConfig, which needs "model_type" (old
    GPT-2 checkpoints leave it out)."""
    architecture = model.architecture
    return architecture.reference_classes[getattr(model.config, "model_type", architecture.name)]


def check_validated(model, prompts, tolerance: float | None = None, out=None) -> None:
    """validate's model, prompts, tolerance and out, refused in words before transformers is loaded: what is no Model
    (an AttributeError), prompts that are no list of texts (None a TypeError; a str was read letter by letter as that
    many prompts; none at all compared nothing and said "all OK"; ids in place of a text an AttributeError after the
    header), a tolerance that is no number >= 0 (a str a ValueError in the header; NaN or a negative one failed every
    prompt) and an out that cannot be written to (an AttributeError)."""
    if not isinstance(model, Model):
        raise UserError(f"validate checks a Model (load_model(...)), not {model!r:.60}")
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise UserError(f"prompts must be a non-empty list of texts ([text] for one), not {prompts!r:.60}")
    not_text = [p for p in prompts if not isinstance(p, str)]
    if not_text:
        raise UserError(f"prompts must be texts (validate encodes each), not {not_text[0]!r:.60}")
    writable(out)
    t = tolerance
    if t is not None and (
        isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, float, np.integer, np.floating)) or not t >= 0
    ):
        raise UserError(f"tolerance must be a number >= 0 (relative to max |logit|) or None, not {t!r}")


def prompt_room(model: Model, steps: int) -> int:
    """How many prompt tokens fit in the context beside `steps` greedy tokens (refused if none do): they take prompt
    + steps - 1 positions, as any generation's (the last token is compared, never fed: check_fits)."""
    n = model.config.n_positions
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise UserError(f"steps (greedy tokens compared) must be a whole number of at least 1, not {steps!r}")
    if steps > n:
        raise UserError(
            f"{steps} greedy steps leave no room for a prompt in {model.name}'s context of {plural(n, 'position')}; "
            f"use at most {plural(n, 'step')}"
        )
    return n - steps + 1


def load_reference(model: Model, dtype: str = "float32"):
    """(torch, transformers' model of the same weights in `dtype`); float64 as validate_float64 says."""
    try:
        import torch
        import transformers
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise UserError(
            "validate compares with Hugging Face: pip install 'minitransformer[hf]' (torch, transformers)"
        ) from None
    if model.shape_only:
        raise UserError("a shape-only model has no weights to validate")
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # its "Loading weights" bar would be the only thing on stderr
    try:
        name = reference_class(model)
        if not hasattr(transformers, name):  # a family newer than the transformers installed
            raise UserError(
                f"transformers {transformers.__version__} has no {name}, which validate compares "
                f"with; upgrade transformers (pip install -U transformers)"
            )
        reference = from_pretrained(
            getattr(transformers, name), model.source, dtype=getattr(torch, dtype), **EXPERTS_PATH
        )
        # nothing to do where `dtype=` was read; older versions ignore it
        reference = reference.to(getattr(torch, dtype))
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    if dtype == "float64" and model.architecture.float64_reference is not None:  # where transformers keeps float32
        model.architecture.float64_reference(reference, model, torch)
    return torch, reference


def from_pretrained(model_class, source: str, **options):
    """transformers' model of the directory, in eval mode; a directory it cannot load (a generation_config.json it
    refuses, a value its config class rejects, that our reader took) refused in one line with its reason."""
    try:
        return model_class.from_pretrained(source, **options).eval()
    except MemoryError:
        raise
    except Exception as err:  # transformers raises many kinds (TypeError, ValueError, its validation errors)
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        raise UserError(
            f"transformers could not load {source} as {model_class.__name__} ({type(err).__name__}: {reason}); "
            f"fix what it names to compare with it"
        ) from None


# transformers 5.24 runs a mixture's experts through torch's grouped_mm by default, which refuses float64 ("got Double")
# and rows not a multiple of 16 bytes ("strides should be multiple of 16 bytes": an expert width not a multiple of 4 in
# float32, of 8 in bfloat16); its eager path, the experts one by one through nn.functional.linear, computes the same
# at every width and dtype: validate asks for it, crosscheck where the default refuses.
EXPERTS_PATH = {"experts_implementation": "eager"}


def their_logits(reference, torch, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return reference(torch.tensor([ids])).logits[0].numpy()


def logits_and_ties(model: Model, ids: list[int]) -> tuple[np.ndarray, list[Tie]]:
    """Our logits at every position of ids (as model.logits), and the selections of that pass that tied or near-tied
    at their k-th place (Phase.ties), which may explain a difference from transformers there."""
    phase = Phase("prefill", 0, len(ids), len(ids), cached=False)
    return model.run(ids, all_positions=True, phase=phase), phase.ties


def compare(model: Model, reference, torch, ids: list[int], steps: int, tolerance: float) -> dict:
    """max |dlogit| over all positions, and the greedy continuation compared token by token; with the logits and our
    pass's ties."""
    theirs = their_logits(reference, torch, ids)
    ours, ties = logits_and_ties(model, ids)
    our_tokens = model.generate(ids, max_new_tokens=steps, stop_at_eos=False, ledger=False, candidates=0).new_tokens
    agree, context = 0, list(ids)
    for ours_next in our_tokens:
        last = their_logits(reference, torch, context)[-1]
        theirs_next = int(np.argmax(last))
        if ours_next != theirs_next and last[theirs_next] - last[ours_next] > 2 * tolerance * max(1.0, abs(last).max()):
            break  # a real disagreement, not a near-tie within the tolerance
        agree += 1
        context.append(ours_next)
    return {
        "tokens": len(ids),
        "allowed": tolerance * max(1.0, float(np.abs(theirs).max())),
        "max_abs_diff": float(np.abs(ours - theirs).max()),
        "greedy_agree": agree,
        "greedy_steps": len(our_tokens),
        "ours": ours,
        "theirs": theirs,
        "ties": ties,
    }


def beyond(ours: np.ndarray, theirs: np.ndarray, allowed: float) -> list[int]:
    """The positions whose logits differ by more than `allowed` (logits [T, V])."""
    return np.nonzero(np.abs(ours - theirs).max(axis=-1) > allowed)[0].tolist()


def explained(
    positions: list[int], ties: list[Tie], flips: Sequence[SelectionDrift] | None = None
) -> list[tuple[list[int], str]]:
    """Whether a selection's tie explains each differing position, as (positions, why) runs: a tie at the position
    itself (which layers, which stages), or an earlier one, whose different choice the later positions read through
    attention; or none. Where no tie does and `flips` is given (our choices that differ from the float64 truth's: a
    narrower precision's rounding moved a score past another without a tie in our pass), the first of them at or
    before it, or that ours chose as the truth did. (Our top k takes the lowest index among equal scores,
    transformers' torch.topk its own.)"""
    runs: list[tuple[list[int], str]] = []
    for p in positions:
        here = [t for t in ties if t.position == p]
        before = [t for t in ties if t.position < p]
        flipped = [f for f in flips or () if f.position <= p]
        if here:
            why = "a tie there, at " + ", ".join(
                dict.fromkeys(f"layer {t.layer} {t.stage} ({'exact' if t.exact else 'near'})" for t in here)
            )
        elif before:
            last = max(t.position for t in before)
            at = ", ".join(dict.fromkeys(f"layer {t.layer} {t.stage}" for t in before if t.position == last))
            why = f"after the tie at position {last} ({at}), whose choice later positions read"
        elif flipped:
            f = min(flipped, key=lambda f: (f.position, f.layer or 0))
            why = (
                f"no tie, but the rounding changed a choice from the float64 truth's at position {f.position}: "
                f"layer {f.layer} {f.stage} chose {f.chosen} where float64 chose {f.truth}"
            )
        elif flips is not None:
            why = f"{NO_TIE}, and every choice of ours up to it is the float64 truth's (transformers' may differ)"
        else:
            why = NO_TIE
        if runs and runs[-1][1] == why and runs[-1][0][-1] == p - 1:
            runs[-1][0].append(p)
        else:
            runs.append(([p], why))
    return runs


def explanation_lines(label: str, runs: list[tuple[list[int], str]]) -> list[str]:
    """A prompt's runs of differing positions, one line each."""
    lines = []
    for positions, why in runs:
        at = f"position {positions[0]}" if len(positions) == 1 else f"positions {positions[0]}-{positions[-1]}"
        lines.append(f"  {label}, {at}: {why}")
    return lines


NO_TIE = "no tie or near tie at any selection at or before it"
TIES_NOTE = (
    "Where the logits differ beyond the tolerance, whether a selection's tie at its k-th place explains it (ours\n"
    "  takes the lowest index among equal scores, transformers' torch.topk its own; near: within our pass's rounding):"
)


def float32_errors(ours32: np.ndarray, theirs32: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """max |dlogit| of our float32 logits and of transformers' against the float64 truth, over every position."""
    return float(np.abs(ours32 - truth).max()), float(np.abs(theirs32 - truth).max())


def closer(ours: float, theirs: float) -> str:
    """Whose float32 pass is closer to the float64 truth."""
    return "ours" if ours < theirs else "theirs" if theirs < ours else "tie"


def validate(model: Model, steps: int = 8, prompts=PROMPTS, tolerance: float | None = None, out=None) -> bool:
    """Compare each prompt in the model's dtype, cut where needed so that it and `steps` greedy tokens fit the
    context, and measure both float32 passes against the float64 truth; print the table to `out` (default:
    sys.stdout as it is when called). `tolerance`: relative, default TOLERANCES[model's dtype]."""
    check_validated(model, prompts, tolerance, out)
    out = sys.stdout if out is None else out
    room = prompt_room(model, steps)
    dtype = model.dtype.name
    tolerance = TOLERANCES[dtype] if tolerance is None else tolerance
    passes = _Passes.of(model)
    import transformers

    print(
        f"Validating {model.name} ({short_path(model.source)}) against transformers {transformers.__version__} "
        f"{type(passes.theirs[dtype]).__name__}, {dtype}; OK when max |dlogit| <= {tolerance:g} x max(1, max |logit|) and "
        f"greedy tokens agree",
        file=out,
    )
    say_random_ids(model, prompts, room, out)
    all_ok, any_cut, truth_worst = True, False, 0.0
    rows, why = [], []
    for i, text in enumerate(prompts):
        full = prompt_ids(model, text, seed=i)
        label = repr(text if len(text) <= 32 else text[:29] + "...")
        tokens = str(len(full)) if len(full) <= room else f"{room} of {len(full)}"
        cells, said, ok, truth_off = _compare_prompt(passes, label, full[:room], steps, tolerance)
        rows.append([label, tokens, *cells, "OK" if ok else "NOT OK"])
        why += said
        all_ok &= ok
        any_cut |= len(full) > room
        truth_worst = max(truth_worst, truth_off)
    header = [*OPENING_COLUMNS, "greedy agree", "ours f32 err", "theirs f32 err", "closer", "verdict"]
    print(table(header, rows, right={1, 2, 3, 4, 5, 6}), file=out)
    if why:
        print("\n".join([TIES_NOTE, *why]), file=out)
    if any_cut:
        print(
            f"{room} of N tokens: the prompt was cut to its first {room} so that it and {steps} greedy "
            f"step{'s' if steps != 1 else ''} fit {model.name}'s context of {model.config.n_positions} positions",
            file=out,
        )
    truth_ok = "OK" if truth_worst <= TOLERANCES["float64"] else "NOT OK"
    print(
        f"f32 err: max |dlogit| of each float32 pass against the float64 truth: our pass in float64, which agrees "
        f"with\n  transformers in float64 within {truth_worst:.1e} x max(1, max |logit|), allowed "
        f"{TOLERANCES['float64']:g}: {truth_ok}",
        file=out,
    )
    if model.architecture.float64_note:
        print(model.architecture.float64_note, file=out)
    print("all OK" if all_ok else "NOT OK: the logits differ beyond the tolerance", file=out)
    return all_ok


@dataclass(frozen=True)
class _Passes:
    """The four passes validate compares a prompt through: ours and transformers' (`theirs`), each in the model's
    dtype and in the other one (float64 is the truth both float32 passes are measured against)."""

    torch: Any
    dtype: str
    other: str
    ours: dict  # dtype -> Model
    theirs: dict  # dtype -> transformers' model

    @classmethod
    def of(cls, model: Model) -> _Passes:
        """The model, the same weights read again in the other dtype, and transformers' model in each."""
        dtype = model.dtype.name
        other = "float64" if dtype == "float32" else "float32"
        torch, reference = load_reference(model, dtype)
        _, other_reference = load_reference(model, other)
        again = from_directory(Path(model.source), model.name, LoadOptions(dtype=other))
        return cls(
            torch, dtype, other, ours={dtype: model, other: again}, theirs={dtype: reference, other: other_reference}
        )


def _compare_prompt(
    passes: _Passes, label: str, ids: list[int], steps: int, tolerance: float
) -> tuple[list[str], list[str], bool, float]:
    """One prompt through the four passes: its row's cells (max |dlogit|, allowed, greedy agreement, each float32
    pass's error against the truth, which is closer), why logits differ where a tie explains it, whether it is OK,
    and how far our float64 truth is from transformers' (relative)."""
    dtype, other = passes.dtype, passes.other
    r = compare(passes.ours[dtype], passes.theirs[dtype], passes.torch, ids, steps, tolerance)
    other_ours, other_ties = logits_and_ties(passes.ours[other], ids)
    logits = {
        (dtype, "ours"): r["ours"],
        (dtype, "theirs"): r["theirs"],
        (other, "ours"): other_ours,
        (other, "theirs"): their_logits(passes.theirs[other], passes.torch, ids),
    }
    ties = {dtype: r["ties"], other: other_ties}
    truth = logits["float64", "ours"]  # our float64 pass, checked against transformers' float64 right here
    scale = max(1.0, float(np.abs(logits["float64", "theirs"]).max()))
    truth_off = float(np.abs(truth - logits["float64", "theirs"]).max()) / scale
    why = explanation_lines(label, explained(beyond(r["ours"], r["theirs"], r["allowed"]), r["ties"]))
    if dtype != "float64":  # the truth's own check, where it failed
        off = beyond(truth, logits["float64", "theirs"], TOLERANCES["float64"] * scale)
        why += explanation_lines(f"{label} in float64", explained(off, ties["float64"]))
    errors = float32_errors(logits["float32", "ours"], logits["float32", "theirs"], truth)
    ok = r["max_abs_diff"] <= r["allowed"] and r["greedy_agree"] == r["greedy_steps"]
    ok &= truth_off <= TOLERANCES["float64"]  # else the float32 columns measure against no truth
    cells = [
        f"{r['max_abs_diff']:.2e}",
        f"{r['allowed']:.1e}",
        f"{r['greedy_agree']}/{r['greedy_steps']}",
        f"{errors[0]:.2e}",
        f"{errors[1]:.2e}",
        closer(*errors),
    ]
    return cells, why, ok, truth_off


# At a narrower precision both passes round at every stage, but not at the same points inside one (transformers'
# RMSNorm rounds before its gain, its rotary tables are rounded to the format, ...): on random Llama, Qwen2 and
# Gemma models (tests/verbs/test_precision_hf.py) the two bfloat16 passes' logits differ by up to 7e-2 of the largest
# logit, about as much as each differs from the float64 truth, float16's by up to 7e-3. OK: within these, and our
# pass no further from the truth than twice transformers'.
PRECISION_TOLERANCES = {"bfloat16": 0.1, "float16": 0.01}


def check_precision_validated(precision: str) -> None:
    """Refuse a precision transformers cannot compute on a CPU, before any work."""
    if precision not in PRECISION_TOLERANCES:
        raise UserError(
            f"validate compares with transformers, which has no {precision} arithmetic on a CPU; it "
            f"validates bfloat16 and float16 (generate --precision {precision} measures its drift "
            f"against float64)"
        )


def precision_legend(precision: str, truth_worst: float) -> str:
    """What validate_precision's columns mean, and how close the float64 truth came to transformers' float64."""
    truth_ok = "OK" if truth_worst <= TOLERANCES["float64"] else "NOT OK"
    return (
        f"err: max |dlogit| of each {precision} pass against the float64 truth; KL(truth || pass) of the next-token "
        f"distributions, averaged over the positions;\n  top-1 agree: positions where ours and theirs choose the "
        f"same token. The truth agrees with transformers in float64 within {truth_worst:.1e} x max(1, max |logit|), "
        f"allowed {TOLERANCES['float64']:g}: {truth_ok}"
    )


def validate_precision(model: Model, steps: int = 8, prompts=PROMPTS, out=None) -> bool:
    """At the model's precision (bfloat16 or float16): each prompt's logits at every position against transformers
    computing in that dtype, and both against the float64 truth (our pass in float64, itself checked against
    transformers' float64 within 1e-9): max |dlogit|, KL of the next-token distributions and top-1 agreement."""
    check_validated(model, prompts, out=out)
    out = sys.stdout if out is None else out
    precision = model.precision.name if model.precision is not None else "float32"
    check_precision_validated(precision)
    tolerance = PRECISION_TOLERANCES[precision]
    room = prompt_room(model, steps)
    torch, theirs_model = load_reference(model, precision)
    _, truth_reference = load_reference(model, "float64")
    truth_model = from_directory(Path(model.source), model.name, LoadOptions(dtype="float64"))
    import transformers

    theirs_name = f"transformers {transformers.__version__} {type(theirs_model).__name__} in {precision}"
    if model.architecture.layout.routed_kinds:
        theirs_name += " (its experts one by one, its eager path: grouped_mm refuses narrow rows)"
    print(
        f"Validating {model.name} ({short_path(model.source)}) at {precision} against {theirs_name}, and both against "
        f"the float64 truth; OK when max |dlogit| <= {tolerance:g} x max(1, max |logit|) and ours is no further from "
        f"the truth than twice theirs",
        file=out,
    )
    say_random_ids(model, prompts, room, out)
    all_ok, truth_worst, rows, why = True, 0.0, [], []
    for i, text in enumerate(prompts):
        ids = prompt_ids(model, text, seed=i)[:room]
        with torch.no_grad():
            theirs = theirs_model(torch.tensor([ids])).logits[0].float().numpy().astype(np.float64)
        ours, ties = logits_and_ties(model, ids)
        ours = ours.astype(np.float64)
        truth = truth_model.logits(ids)
        checked = their_logits(truth_reference, torch, ids)
        scale = max(1.0, float(np.abs(truth).max()))
        truth_worst = max(truth_worst, float(np.abs(truth - checked).max()) / max(1.0, float(np.abs(checked).max())))
        apart = float(np.abs(ours - theirs).max())
        ours_err, theirs_err = float(np.abs(ours - truth).max()), float(np.abs(theirs - truth).max())
        kl_ours, _, top1_ours = next_token_drift(ours, truth)
        kl_theirs, _, top1_theirs = next_token_drift(theirs, truth)
        agree = top_agreement(ours, theirs)
        ok = apart <= tolerance * scale and ours_err <= 2 * theirs_err and truth_worst <= TOLERANCES["float64"]
        all_ok &= ok
        label = repr(text if len(text) <= 32 else text[:29] + "...")
        off = beyond(ours, theirs, tolerance * scale)
        runs = explained(off, ties)
        if any(reason == NO_TIE for _, reason in runs):  # where no tie explains it: did the rounding choose otherwise?
            runs = explained(off, ties, drift(model, ids, truth_model).selections)
        why += explanation_lines(label, runs)
        numbers = (f"{apart:.2e}", f"{tolerance * scale:.1e}", f"{ours_err:.2e}", f"{theirs_err:.2e}")
        rows.append([label, str(len(ids)), *numbers, f"{kl_ours:.1e}", f"{kl_theirs:.1e}", f"{100 * agree:.0f}%"])
        rows[-1].append("OK" if ok else "NOT OK")
    header = [*OPENING_COLUMNS, "ours err", "theirs err", "KL ours", "KL theirs", "top-1 agree", "verdict"]
    print(table(header, rows, right={1, 2, 3, 4, 5, 6, 7, 8}), file=out)
    if why:
        print("\n".join([TIES_NOTE, *why]), file=out)
    print(precision_legend(precision, truth_worst), file=out)
    print("all OK" if all_ok else f"NOT OK: the {precision} logits differ beyond the tolerance", file=out)
    return all_ok
