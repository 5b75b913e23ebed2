"""The options of loading a model and of running its passes, each group one frozen value checked once when it is made.

`LoadOptions` (dtype, precision, weights): what the weights are held in and what a pass computes in, which a model
keeps for its life. `RunOptions` (routing, dense attention): how a pass computes what neither the weights nor the
prompt decide, which a count or a generation hands every pass it runs. `load_model(name, dtype=..., ...)` and
`model.generate(..., dense_attention=...)` make them from their keywords; the CLI makes them from its flags; whoever
holds one holds options already checked, so nothing below checks them again.

A refusal is an `OptionError` (errors.py) that names each option by its keyword; the CLI renames them all to its flags
in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.precision import PRECISIONS, require_ml_dtypes
from ..errors import OptionError
from ..families.parts.moe import ROUTINGS

# What a forward pass computes in: float32 (the default), or float64, the reference that tells how far a
# float32 pass is from the exact answer (load_model(..., dtype="float64"); --dtype on generate, trace, validate).
DTYPES = ("float32", "float64")
# A float16 or bfloat16 checkpoint's matrices: upcast at load where the copy fits in half the memory available, else
# kept in their bytes ("auto"); always kept; always upcast (models/weights.py)
WEIGHTS = ("auto", "stored", "float32")


def dtype_name(dtype) -> str | None:
    """ "float32" or "float64" from either name or NumPy's own for either (np.float64, np.dtype("float64")); None for
    anything else."""
    if dtype is None or (isinstance(dtype, str) and dtype not in DTYPES):
        return None
    try:
        name = np.dtype(dtype).name
    except TypeError:
        return None
    return name if name in DTYPES else None


@dataclass(frozen=True)
class LoadOptions:
    """How a model is loaded: `dtype`, what every pass computes in (float32, or float64 the reference, the weights
    upcast at load); `precision`, a narrower format emulated over float32 passes (engine/precision.py; the weights
    held in it); `weights`, a 2-byte checkpoint's matrices kept as stored or upcast (None: "auto", as memory allows).
    """

    dtype: str = "float32"
    precision: str = "float32"
    weights: str | None = None

    def __post_init__(self) -> None:
        name = dtype_name(self.dtype)
        if name is None:
            raise OptionError(
                "dtype", f"must be 'float32' (the default) or 'float64' (the reference), not {self.dtype!r}"
            )
        object.__setattr__(self, "dtype", name)  # NumPy's names for it read as the one name
        precision, weights = self.precision, self.weights
        if not isinstance(precision, str) or precision not in PRECISIONS:
            raise OptionError("precision", f"must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        if weights is not None and weights not in WEIGHTS:
            raise OptionError(
                "weights",
                f"must be 'auto' (the default), 'stored' (a 2-byte checkpoint kept in its bytes) or 'float32' "
                f"(upcast at load), not {weights!r}",
            )
        if precision != "float32" and name != "float32":
            raise OptionError(
                "precision",
                f"{precision} is emulated over float32 passes and measured against float64 itself: leave out "
                f"{{dtype}} {name}",
                ("dtype",),
            )
        if weights is not None and name != "float32":
            raise OptionError(
                "weights",
                f"is for float32 passes; {{dtype}} {name} upcasts every weight at load: leave out {{weights}}",
                ("dtype", "weights"),
            )
        if weights == "float32" and precision != "float32":
            raise OptionError(
                "weights",
                f"float32 upcasts at load for float32 products; at {{precision}} {precision} the weights are held "
                f"in its format: leave out {{weights}}",
                ("precision", "weights"),
            )
        if precision != "float32":
            require_ml_dtypes()  # before any work: one line saying what to install

    @property
    def compute_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def held(self) -> str:
        """What a 2-byte checkpoint's matrices are: "auto" unless the weights option says."""
        return self.weights or "auto"


@dataclass(frozen=True)
class RunOptions:
    """How a forward pass computes what neither the weights nor the prompt decide.

    `routing`: counting without weights, the tokens a mixture of experts' router is assumed to send each expert,
    "balanced" (T k / E each) or "worst" (every token to the same k experts) (families/parts/moe.py); a model with weights
    has its router decide. `dense_attention`: every T x t score computed, as transformers' eager attention does, where
    a long pass would compute only what each chunk of query rows can see (engine/row_chunks.py): the same logits, and
    the ledger of the textbook dense form.
    """

    routing: str = "balanced"
    dense_attention: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.routing, str) or self.routing not in ROUTINGS:
            raise OptionError("routing", f"{self.routing!r} is not known (known: {', '.join(ROUTINGS)})")
        switch("dense_attention", self.dense_attention)


def switch(option: str, value) -> bool:
    """An option that is on or off, refused unless True or False: "no", 0 or None would be read as what they seem
    not to say ("no" as on)."""
    if not isinstance(value, (bool, np.bool_)):
        raise OptionError(option, f"must be True or False, not {value!r}")
    return bool(value)
