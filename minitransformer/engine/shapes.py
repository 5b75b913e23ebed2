"""Shape-only stand-ins: arrays with a shape and no values, so the real forward pass can run without weights.

A `ShapeOnly` answers to the NumPy vocabulary the model uses (ufuncs, reductions, reshapes, slicing,
assignment) by computing only the shape of the result. Running the same forward code on them
yields the same ledger as a real run, at no arithmetic and no memory, for models far larger than
this machine (GPT-3 175B over a 2,048-token prompt counts in well under a second).
"""

from __future__ import annotations

from math import prod

import numpy as np

# The most axes an array may have (NumPy 2: 64, NumPy 1: 32); a stand-in's result beyond is NumPy's to refuse
MAX_DIMS = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32


class ShapeOnly:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype=np.float32) -> None:
        self.shape = tuple(map(int, shape))
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)

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
        shapes = [x.shape if isinstance(x, ShapeOnly) else np.shape(x) for x in inputs]
        # a long prompt's count runs a chunk's few stages tens of thousands of times: its common case, stand-ins of
        # one shape, answered without NumPy's broadcast_shapes and result_type (a fifth of such a count's time)
        alike = len(shapes[0]) <= MAX_DIMS and all(s == shapes[0] for s in shapes)
        shape = shapes[0] if alike else np.broadcast_shapes(*shapes)
        if out is not None:
            return out[0] if len(out) == 1 else out
        dtypes = [x.dtype if isinstance(x, ShapeOnly) else np.asarray(x).dtype for x in inputs]
        # (a built-in dtype: one in another byte order or with metadata is result_type's to normalize)
        dtype = dtypes[0] if dtypes[0].isbuiltin and all(d == dtypes[0] for d in dtypes) else np.result_type(*dtypes)
        result = ShapeOnly(shape, dtype)
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
        shape = _basic_index_shape(self.shape, index)
        if shape is None:  # Index a zero-strided dummy of the same shape: NumPy works out the result's shape.
            dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), self.shape, (0,) * self.ndim)
            shape = dummy[index].shape
        return ShapeOnly(shape, self.dtype)

    def __setitem__(self, index, value) -> None:
        pass


def _basic_index_shape(shape: tuple[int, ...], index) -> tuple[int, ...] | None:
    """The shape of x[index] for x of `shape` where index is NumPy's basic indexing (whole numbers within range,
    slices, an Ellipsis, None), as NumPy gives it; None for anything else (arrays, booleans, a number out of range),
    which the caller leaves to NumPy. A chunked scan's count slices its stand-ins tens of thousands of times: NumPy's
    way, a strided dummy indexed, cost 7 us a slice, a fifth of a long prompt's count."""
    items = index if type(index) is tuple else (index,)
    ellipses = taken = 0
    for item in items:
        if item is Ellipsis:
            ellipses += 1
        elif item is not None:
            taken += 1
    if ellipses > 1 or taken > len(shape):
        return None
    out: list[int] = []
    axis = 0
    for item in items:
        if item is None:
            out.append(1)
        elif item is Ellipsis:  # the axes the indices after it do not take
            rest = len(shape) - taken
            out.extend(shape[axis : axis + rest])
            axis += rest
        elif type(item) is slice:
            if not (_bound(item.start) and _bound(item.stop) and _bound(item.step)) or item.step == 0:
                return None
            out.append(len(range(*item.indices(shape[axis]))))
            axis += 1
        elif _whole(item) and -shape[axis] <= item < shape[axis]:
            axis += 1
        else:
            return None
    out.extend(shape[axis:])
    return tuple(out) if len(out) <= MAX_DIMS else None


def _bound(n) -> bool:
    return n is None or _whole(n)


def _whole(n) -> bool:
    """A Python or NumPy whole number, not a boolean (NumPy reads a boolean index as a mask) nor a timedelta64 (a
    subclass of NumPy's integers that indexing refuses)."""
    return type(n) is int or (isinstance(n, np.integer) and not isinstance(n, np.timedelta64))
