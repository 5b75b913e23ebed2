"""Shape-only stand-ins: arrays with a shape and no values, so the real forward pass can run without weights.

A `ShapeOnly` answers to the NumPy vocabulary the model uses (ufuncs, reductions, reshapes, slicing,
assignment) by computing only the shape of the result. Running the same forward code on them
yields the same ledger as a real run, at no arithmetic and no memory, for models far larger than
this machine (GPT-3 175B over a 2,048-token prompt counts in well under a second).
"""

from __future__ import annotations

from math import prod

import numpy as np


class ShapeOnly:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype=np.float32) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)

    def __repr__(self) -> str:
        return f"ShapeOnly({list(self.shape)}, {self.dtype})"

    def __array__(self, *args, **kwargs):
        raise TypeError("a ShapeOnly stand-in has no values; this code path needs real arrays")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    # --- elementwise arithmetic: the result has the broadcast shape ---------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method == "reduce":  # np.add.reduce(x, axis=-1, keepdims=True)
            return inputs[0]._reduce(kwargs.get("axis", 0), kwargs.get("keepdims", False))
        if method != "__call__":
            raise TypeError(f"ShapeOnly supports elementwise ufunc calls and reductions, not {ufunc.__name__}.{method}")
        shape = np.broadcast_shapes(*(np.shape(x) if not isinstance(x, ShapeOnly) else x.shape for x in inputs))
        dtypes = [x.dtype if isinstance(x, ShapeOnly) else np.asarray(x).dtype for x in inputs]
        if out is not None:
            return out[0] if len(out) == 1 else out
        result = ShapeOnly(shape, np.result_type(*dtypes))
        return (result,) * ufunc.nout if ufunc.nout > 1 else result

    def _binary(name: str, reflected: bool = False):  # type: ignore[misc]  # noqa: N805 - builds the operators below
        ufunc = getattr(np, name)
        if reflected:
            return lambda self, other: ufunc(other, self)
        return lambda self, other: ufunc(self, other)

    __add__, __radd__, __iadd__ = _binary("add"), _binary("add", True), _binary("add")
    __sub__, __rsub__, __isub__ = _binary("subtract"), _binary("subtract", True), _binary("subtract")
    __mul__, __rmul__, __imul__ = _binary("multiply"), _binary("multiply", True), _binary("multiply")
    __truediv__, __rtruediv__, __itruediv__ = (
        _binary("true_divide"),
        _binary("true_divide", True),
        _binary("true_divide"),
    )
    __pow__ = _binary("power")
    del _binary

    def __neg__(self):
        return ShapeOnly(self.shape, self.dtype)

    # --- reductions ---------------------------------------------------------------------------------
    def _reduce(self, axis=None, keepdims=False, **_):
        axes = range(self.ndim) if axis is None else [a % self.ndim for a in np.atleast_1d(axis)]
        if keepdims:
            shape = tuple(1 if i in axes else n for i, n in enumerate(self.shape))
        else:
            shape = tuple(n for i, n in enumerate(self.shape) if i not in axes)
        return ShapeOnly(shape, self.dtype)

    sum = mean = max = min = var = std = _reduce

    # --- shapes and views ---------------------------------------------------------------------------
    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if -1 in shape:
            known = prod(n for n in shape if n != -1)
            shape = tuple(self.size // known if n == -1 else n for n in shape)
        if prod(shape) != self.size:
            raise ValueError(f"cannot reshape {list(self.shape)} into {list(shape)}")
        return ShapeOnly(shape, self.dtype)

    def swapaxes(self, a: int, b: int):
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        return ShapeOnly(shape, self.dtype)

    def transpose(self, *axes):
        order = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        order = order or tuple(reversed(range(self.ndim)))
        return ShapeOnly([self.shape[a] for a in order], self.dtype)

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return self.transpose()

    def astype(self, dtype, **_):
        return ShapeOnly(self.shape, dtype)

    def copy(self):
        return ShapeOnly(self.shape, self.dtype)

    def __getitem__(self, index):
        if isinstance(index, np.ndarray) and index.dtype.kind in "iu":  # a lookup: table[ids]
            return ShapeOnly(index.shape + self.shape[1:], self.dtype)
        # Index a zero-strided dummy of the same shape: NumPy works out the result's shape, no values.
        dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), self.shape, (0,) * self.ndim)
        return ShapeOnly(dummy[index].shape, self.dtype)

    def __setitem__(self, index, value) -> None:
        pass
