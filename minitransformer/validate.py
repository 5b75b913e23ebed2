"""Check a model against Hugging Face transformers on the same weights, tensor by tensor, with a verdict.

Needs torch and transformers (`pip install 'minitransformer[hf]'`); the rest of the package never
imports them. For each prompt: the largest |logit difference| over every position, and the greedy
tokens compared step by step (ours with the KV cache, theirs recomputing the sequence).
"""

from __future__ import annotations

import sys

import numpy as np

from .errors import UserError
from .model import Model

PROMPTS = (
    "The capital of France is",
    "Hello, my dog is cute and",
    "In 1905, Albert Einstein published four papers that",
    "def fibonacci(n):\n    if n < 2:\n        return n\n   ",
    "Les mots «café» et 日本語 and emoji 🤖  with   spaces",
)
# Relative to the logits' scale: float32 rounding grows with the magnitude of what is summed, and real
# GPT-2 logits reach the hundreds while those of random test models stay near 1.
TOLERANCE = 1e-4


def prompt_ids(model: Model, text: str, seed: int) -> list[int]:
    """The prompt's tokens by the model's own tokenizer (GPT-2's for a GPT-2), or, for a model without one or
    with a smaller vocabulary, seeded random ids it can take, as many as GPT-2's tokenizer makes of the text."""
    from .tokenizer import NoTokenizer, load_tokenizer

    if not isinstance(model.tokenizer, NoTokenizer):
        ids = model.tokenizer.encode(text, what="the prompt")
        if not ids:
            raise UserError("a prompt to validate with is empty; give at least one character of text")
        if max(ids) < model.config.vocab_size:
            return ids
    n = len(load_tokenizer().encode(text, what="the prompt"))
    if not n:
        raise UserError("a prompt to validate with is empty; give at least one character of text")
    return np.random.default_rng(seed).integers(0, model.config.vocab_size, n).tolist()


# The transformers class that computes each model_type, as AutoModelForCausalLM would pick it. Chosen from our
# own config rather than by AutoConfig, which needs "model_type" (old GPT-2 checkpoints leave it out).
REFERENCE_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                     "qwen2": "Qwen2ForCausalLM"}  # fmt: skip


def reference_class(model: Model) -> str:
    return REFERENCE_CLASSES[getattr(model.config, "model_type", model.config.family)]


def prompt_room(model: Model, steps: int) -> int:
    """How many prompt tokens fit in the context beside `steps` greedy tokens (refused if none do)."""
    n = model.config.n_positions
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise UserError(f"steps (greedy tokens compared) must be a whole number of at least 1, not {steps!r}")
    if steps >= n:
        raise UserError(f"{steps} greedy steps leave no room for a prompt in {model.name}'s context of {n} "
                        f"positions; use at most {n - 1} steps")  # fmt: skip
    return n - steps


def load_reference(model: Model):
    try:
        import torch
        import transformers
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise UserError("validate compares with Hugging Face: pip install 'minitransformer[hf]' (torch, transformers)") from None
    if model.shape_only:
        raise UserError("a shape-only model has no weights to validate")
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # its "Loading weights" bar would be the only thing on stderr
    try:
        return torch, getattr(transformers, reference_class(model)).from_pretrained(model.source,
                                                                                  dtype=torch.float32).eval()
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def compare(model: Model, reference, torch, ids: list[int], steps: int, tolerance: float) -> dict:
    """max |dlogit| over all positions, and the greedy continuation compared token by token."""
    with torch.no_grad():
        theirs = reference(torch.tensor([ids])).logits[0].numpy()
    ours = model.logits(ids)
    our_tokens = model.generate(ids, max_new_tokens=steps, stop_at_eos=False, ledger=False, candidates=0).new_tokens
    agree, context = 0, list(ids)
    for ours_next in our_tokens:
        with torch.no_grad():
            last = reference(torch.tensor([context])).logits[0, -1].numpy()
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
    }


def validate(model: Model, steps: int = 8, prompts=PROMPTS, tolerance: float = TOLERANCE, out=None) -> bool:
    """Compare each prompt, cut where needed so that it and `steps` greedy tokens fit the context; print the
    table to `out` (default: sys.stdout as it is when called)."""
    out = sys.stdout if out is None else out
    room = prompt_room(model, steps)
    torch, reference = load_reference(model)
    import transformers

    from .report import short_path, table

    print(f"Validating {model.name} ({short_path(model.source)}) against transformers {transformers.__version__} "
          f"{type(reference).__name__}, float32; OK when max |dlogit| <= {tolerance:g} x max(1, max |logit|) and "
          f"greedy tokens agree", file=out)  # fmt: skip
    all_ok, any_cut = True, False
    rows = []
    for i, text in enumerate(prompts):
        ids = prompt_ids(model, text, seed=i)
        r = compare(model, reference, torch, ids[:room], steps, tolerance)
        ok = r["max_abs_diff"] <= r["allowed"] and r["greedy_agree"] == r["greedy_steps"]
        all_ok &= ok
        any_cut |= len(ids) > room
        tokens = str(len(ids)) if len(ids) <= room else f"{room} of {len(ids)}"
        rows.append([repr(text if len(text) <= 32 else text[:29] + "..."), tokens, f"{r['max_abs_diff']:.2e}",
                     f"{r['allowed']:.1e}", f"{r['greedy_agree']}/{r['greedy_steps']}", "OK" if ok else "NOT OK"])  # fmt: skip
    print(table(["prompt", "tokens", "max |dlogit|", "allowed", "greedy agree", "verdict"], rows, right={1, 2, 3, 4}),
          file=out)  # fmt: skip
    if any_cut:
        print(f"{room} of N tokens: the prompt was cut to its first {room} so that it and {steps} greedy "
              f"step{'s' if steps != 1 else ''} fit {model.name}'s context of {model.config.n_positions} positions",
              file=out)  # fmt: skip
    print("all OK" if all_ok else "NOT OK: the logits differ beyond the tolerance", file=out)
    return all_ok
