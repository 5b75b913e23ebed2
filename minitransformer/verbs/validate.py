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
import types
from inspect import signature
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..families.llama import inverse_frequencies
from ..models.model import Model
from ..text import short_path, table

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


def prompt_ids(model: Model, text: str, seed: int) -> list[int]:
    """The prompt's tokens by the model's own tokenizer (GPT-2's for a GPT-2), or, for a model without one or
    with a smaller vocabulary, seeded random ids it can take, as many as GPT-2's tokenizer makes of the text."""
    from ..models.tokenizer import NoTokenizer, load_tokenizer

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


def load_reference(model: Model, dtype: str = "float32"):
    """(torch, transformers' model of the same weights in `dtype`); float64 as validate_float64 says."""
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
        reference = getattr(transformers, reference_class(model)).from_pretrained(model.source,
                                                                                dtype=getattr(torch, dtype)).eval()
        reference = reference.to(getattr(torch, dtype))  # nothing to do where `dtype=` was read; older versions ignore it
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    if dtype == "float64" and model.config.family == "llama":
        float64_throughout(reference, model, torch)
    return torch, reference


# What transformers computes in float32 even in a float64 model, and why the reference computes it in float64.
#
# GPT-2: nothing (its reorder_and_upcast_attn path, eager attention only, is not taken). The Llama family
# (modeling_llama.py and the Mistral and Qwen2 copies): two steps.
# - RMSNorm casts its input to float32 (`hidden_states.to(torch.float32)`), normalises there and casts back.
# - The rotary embedding computes its inverse frequencies in float32 (the rope init functions make them so) and
#   its angles `position_ids.float() * inv_freq.float()` and their cos and sin in float32, then casts the tables
#   to the model's dtype.
# Measured on the fixtures, these leave transformers' float64 logits 1.5e-7 to 3.8e-7 x max|logit| from a float64
# computation: about 40% of the distance of a float32 pass from it, so no truth to measure float32 against, and
# 150 to 380 times the 1e-9 of the check. Mirroring them in our float64 pass would not reach 1e-9 either: torch's float32
# rsqrt, cos and sin round differently from NumPy's (for a float32 angle, torch's cos differs from the correctly
# rounded one in 5% of cases), so the two would still differ by float32 roundings.
#
# So the float64 truth is our float64 pass with no float32 step at all, RoPE included: its frequencies are the
# config's, computed in float64 (llama.inverse_frequencies), not float32 roundings of them. And the transformers
# model it is checked against runs those two steps in float64: its RMSNorm modules without the cast, its rotary
# modules with angles position x (the float64 frequencies) in float64. transformers makes frequencies only in
# float32, so these are ours; tests/test_float64_hf.py checks them against transformers' own to float32 precision
# for every rope type. Everything else is transformers' own float64: embeddings, projections and their biases,
# how cos and sin turn q and k, grouped-query attention, the sliding window's mask, SDPA, the MLP, the head.
def float64_throughout(reference, model: Model, torch) -> None:
    """Replace, on this instance of transformers' model only, the forward of its RMSNorm and rotary modules with
    float64 ones (see above)."""
    inv_freq = torch.from_numpy(inverse_frequencies(model.config, np.dtype(np.float64)).copy())

    def rms_norm(module, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return module.weight * (hidden_states * torch.rsqrt(variance + module.variance_epsilon))

    def rotary(module, x, position_ids):
        angles = position_ids[..., None].to(torch.float64) * inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        scaling = getattr(module, "attention_scaling", 1.0)  # 1 for the rope types we take
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)

    found = {"RMSNorm": 0, "RotaryEmbedding": 0}
    for module in reference.modules():
        kind = next((k for k in found if type(module).__name__.endswith(k)), None)
        if kind == "RotaryEmbedding" and list(signature(module.forward).parameters) != ["x", "position_ids"]:
            kind = None  # an older transformers (tables cached by sequence length): counted as not found below
        if kind is not None:
            module.forward = types.MethodType(rms_norm if kind == "RMSNorm" else rotary, module)
            found[kind] += 1
    if found["RMSNorm"] != 2 * model.config.n_layer + 1 or not found["RotaryEmbedding"]:
        import transformers

        raise UserError(f"validate in float64 recomputes the RMSNorm and rotary tables of transformers' "
                        f"{type(reference).__name__} in float64, and transformers {transformers.__version__} does not "
                        f"lay them out as it expects (rotary forward(x, position_ids)); upgrade transformers")  # fmt: skip


def their_logits(reference, torch, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return reference(torch.tensor([ids])).logits[0].numpy()


def compare(model: Model, reference, torch, ids: list[int], steps: int, tolerance: float) -> dict:
    """max |dlogit| over all positions, and the greedy continuation compared token by token; with the logits."""
    theirs = their_logits(reference, torch, ids)
    ours = model.logits(ids)
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
    }


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
    from ..models.registry import from_directory

    out = sys.stdout if out is None else out
    room = prompt_room(model, steps)
    dtype = model.dtype.name
    tolerance = TOLERANCES[dtype] if tolerance is None else tolerance
    torch, reference = load_reference(model, dtype)
    other = "float64" if dtype == "float32" else "float32"
    _, other_reference = load_reference(model, other)
    ours = {dtype: model, other: from_directory(Path(model.source), name=model.name, dtype=np.dtype(other))}
    theirs = {dtype: reference, other: other_reference}
    import transformers

    print(f"Validating {model.name} ({short_path(model.source)}) against transformers {transformers.__version__} "
          f"{type(reference).__name__}, {dtype}; OK when max |dlogit| <= {tolerance:g} x max(1, max |logit|) and "
          f"greedy tokens agree", file=out)  # fmt: skip
    all_ok, any_cut, truth_worst = True, False, 0.0
    rows = []
    for i, text in enumerate(prompts):
        full = prompt_ids(model, text, seed=i)
        ids = full[:room]
        r = compare(model, reference, torch, ids, steps, tolerance)
        logits = {(dtype, "ours"): r["ours"], (dtype, "theirs"): r["theirs"],
                  (other, "ours"): ours[other].logits(ids), (other, "theirs"): their_logits(theirs[other], torch, ids)}
        truth = logits["float64", "ours"]  # our float64 pass, checked against transformers' float64 right here
        scale = max(1.0, float(np.abs(logits["float64", "theirs"]).max()))
        truth_off = float(np.abs(truth - logits["float64", "theirs"]).max()) / scale
        truth_worst = max(truth_worst, truth_off)
        errors = float32_errors(logits["float32", "ours"], logits["float32", "theirs"], truth)
        ok = r["max_abs_diff"] <= r["allowed"] and r["greedy_agree"] == r["greedy_steps"]
        ok &= truth_off <= TOLERANCES["float64"]  # else the float32 columns measure against no truth
        all_ok &= ok
        any_cut |= len(full) > room
        tokens = str(len(full)) if len(full) <= room else f"{room} of {len(full)}"
        rows.append([repr(text if len(text) <= 32 else text[:29] + "..."), tokens, f"{r['max_abs_diff']:.2e}",
                     f"{r['allowed']:.1e}", f"{r['greedy_agree']}/{r['greedy_steps']}", f"{errors[0]:.2e}",
                     f"{errors[1]:.2e}", closer(*errors), "OK" if ok else "NOT OK"])  # fmt: skip
    print(table(["prompt", "tokens", "max |dlogit|", "allowed", "greedy agree", "ours f32 err", "theirs f32 err",
                 "closer", "verdict"], rows, right={1, 2, 3, 4, 5, 6}), file=out)  # fmt: skip
    if any_cut:
        print(f"{room} of N tokens: the prompt was cut to its first {room} so that it and {steps} greedy "
              f"step{'s' if steps != 1 else ''} fit {model.name}'s context of {model.config.n_positions} positions",
              file=out)  # fmt: skip
    truth_ok = "OK" if truth_worst <= TOLERANCES["float64"] else "NOT OK"
    print(f"f32 err: max |dlogit| of each float32 pass against the float64 truth: our pass in float64, which agrees "
          f"with\n  transformers in float64 within {truth_worst:.1e} x max(1, max |logit|), allowed "
          f"{TOLERANCES['float64']:g}: {truth_ok}", file=out)  # fmt: skip
    if model.config.family == "llama":
        print("  (transformers' float64 Llama family computes RMSNorm and the rotary tables in float32; its reference "
              "here\n  has them in float64, as validate.py explains)", file=out)  # fmt: skip
    print("all OK" if all_ok else "NOT OK: the logits differ beyond the tolerance", file=out)
    return all_ok
