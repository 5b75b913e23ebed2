"""The passes a trace follows: generate's own loop (generate.py's `Continuation`), greedy, with the KV cache.

`trace(model, prompt, new_tokens=N)` (views/trace.py) shows the N passes that generate N greedy tokens, the
prefill and N - 1 cached decode steps, stage by stage: it runs them through this loop with a watcher on each
pass, and never stops at end-of-text, so that it shows the passes it was asked for. Nothing here prints.
"""

from __future__ import annotations

from ..errors import UserError
from ..models.model import Model
from .choices import is_whole
from .generate import Continuation
from .options import GenerationOptions


def trace_passes(model: Model, prompt: str | list[int], new_tokens: int) -> Continuation:
    """The loop of a trace, checked and ready to run (`Continuation.run` with a watcher; its `generations` after)."""
    if model.shape_only:
        raise UserError("a shape-only model has no values to trace; use a model with weights")
    if not is_whole(new_tokens, 1):
        raise UserError(f"new tokens must be a whole number >= 1 (1 traces the prefill only), not {new_tokens!r}")
    rows = model.prompt_rows([prompt], new_tokens, verb="trace")
    options = GenerationOptions(max_new_tokens=new_tokens, candidates=0, stop_at_eos=False)
    return Continuation(model, [prompt], rows, options)
