"""The options of a generation, as one frozen value checked once when it is made.

`model.generate(prompt, max_new_tokens=..., ...)` makes one from its keywords; the CLI makes one from
its flags; a count makes one for the generation it counts. Whoever holds a `GenerationOptions` holds
options already checked, so nothing below checks them again, and a new option is one field here
rather than one more parameter through every function between the caller and the tape. How each pass
runs (the routing a shape-only mixture assumes, attention dense or in row chunks) is one `RunOptions`
within it (models/options.py), which every pass is handed.

A refusal is an `OptionError` (errors.py), which keeps the option's name apart from the rule it broke: the API
names the option by its keyword (`max_new_tokens must be ...`), and a caller that knows it by another
name (the CLI by its flag) renames it in one place (`OptionError.named`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import OptionError
from ..models.options import RunOptions, switch
from .choices import is_whole

__all__ = ["GenerationOptions", "OptionError", "RunOptions"]


@dataclass(frozen=True)
class GenerationOptions:
    """How to continue a prompt: greedy at temperature 0 (top_k and seed then play no part).

    `candidates`: the next tokens listed with their probabilities at the first new position.
    `stop_at_eos`: stop a row at the end-of-text token. `ledger`: keep every pass's records.
    `running`: how each pass runs (RunOptions: attention dense or in row chunks, a shape-only mixture's routing).
    """

    max_new_tokens: int = 8
    temperature: float = 0.0
    top_k: int | None = None
    seed: int | None = None
    use_cache: bool = True
    candidates: int = 10
    stop_at_eos: bool = True
    ledger: bool = True
    running: RunOptions = RunOptions()

    def __post_init__(self) -> None:
        if not is_whole(self.max_new_tokens, 1):
            raise OptionError("max_new_tokens", f"must be a whole number of at least 1, not {self.max_new_tokens!r}")
        t = self.temperature
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) or not (math.isfinite(t) and t >= 0):
            raise OptionError("temperature", f"must be a finite number >= 0 (0 is greedy), not {t!r}")
        object.__setattr__(self, "temperature", float(t))  # a NumPy number too (np.float32(0.5)), held as Python's
        for name in ("use_cache", "stop_at_eos", "ledger"):
            switch(name, getattr(self, name))
        if self.top_k is not None and not is_whole(self.top_k, 1):
            raise OptionError(
                "top_k",
                f"must be a whole number of at least 1, not {self.top_k!r}; leave it out to sample from every token",
            )
        if self.seed is not None and not is_whole(self.seed, 0):
            raise OptionError("seed", f"must be a whole number of 0 or more, not {self.seed!r}")
        if not is_whole(self.candidates, 0):
            raise OptionError(
                "candidates", f"(next tokens listed) must be a whole number >= 0, not {self.candidates!r}"
            )
        if not isinstance(self.running, RunOptions):
            raise OptionError("running", f"must be a RunOptions, not {self.running!r}")
