"""The shape-only stand-ins answer as NumPy's arrays would: a slice's shape, an elementwise result's shape and dtype.

A count runs the model's own forward code on ShapeOnly stand-ins, so every shape they give must be NumPy's. Their
slicing and elementwise results are worked out without NumPy where the index or operands are plain (a long prompt's
count slices and combines them by the hundreds of thousands); these tests hold both ways to NumPy's arrays.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from minitransformer.engine.ledger import _broadcast
from minitransformer.engine.shapes import ShapeOnly, _basic_index_shape


def _random_index_item(rng: random.Random, n: int):
    """One item of an index for an axis of n: None, an Ellipsis, a whole number (in or out of range, Python's or
    NumPy's), a boolean, or a slice of any bounds and step (NumPy's integers among them, a step of 0 too)."""
    r = rng.random()
    if r < 0.15:
        return None
    if r < 0.2:
        return Ellipsis
    if r < 0.45:
        return rng.randint(-n - 2, n + 1)
    if r < 0.5:
        return np.int64(rng.randint(-n - 1, n))
    if r < 0.53:
        return rng.choice([True, False, np.bool_(True), np.timedelta64(1)])  # a mask, or no index at all
    if r < 0.56:  # NumPy's other integers, Python's beyond int64, a list or an array inside a tuple
        return rng.choice([np.uint8(1), np.uint64(2**64 - 1), np.int8(-1), 2**70, -(2**70), [0], np.array([0])])

    def bound():
        c = rng.random()
        return None if c < 0.3 else rng.randint(-n - 3, n + 3) if c < 0.9 else np.int32(rng.randint(-n, n + 1))

    return slice(bound(), bound(), rng.choice([None, None, 1, 2, 3, -1, -2, 0, np.int64(2), -(2**63), np.uint8(3)]))


def _sliced_shape(x, index):
    """x[index]'s shape, or "error" where it raises (IndexError, ValueError, OverflowError: NumPy's for a bad index)."""
    try:
        return x[index].shape
    except (IndexError, ValueError, TypeError, OverflowError):
        return "error"


def test_a_stand_in_sliced_has_numpy_s_shape_for_every_kind_of_index():
    rng = random.Random(0)
    by_fast_path = 0
    for case in range(20_000):
        shape = tuple(rng.randint(0, 6) for _ in range(rng.randint(0, 4)))
        items = tuple(_random_index_item(rng, rng.choice(shape) if shape else 1) for _ in range(rng.randint(0, 5)))
        bare = len(items) == 1 and not isinstance(items[0], np.ndarray)  # (a bare array of ids is a lookup: below)
        index = items[0] if bare and rng.random() < 0.3 else items
        want, got = _sliced_shape(np.zeros(shape, np.int8), index), _sliced_shape(ShapeOnly(shape), index)
        assert got == want, f"case {case}: ShapeOnly({shape})[{index!r}] gives {got}, NumPy {want}"
        fast = _basic_index_shape(shape, index)
        if fast is not None:
            by_fast_path += 1
            assert fast == want, f"case {case}: {shape}[{index!r}]: the plain way gives {fast}, NumPy {want}"
    assert by_fast_path > 5_000, f"only {by_fast_path} of 20,000 indices took the plain way"


@pytest.mark.parametrize(
    "shape, index, want",
    [
        ((2, 16, 64, 128), (Ellipsis, 5, slice(None), slice(None)), (2, 64, 128)),  # a scan's chunk n: [..., N, C, d]
        ((2, 8, 4096, 64), (Ellipsis, slice(128, 256), slice(None)), (2, 8, 128, 64)),  # a chunk of query rows
        ((3, 4), (None, slice(None, None, -2), None), (1, 2, 1, 4)),
        ((5,), np.int64(-5), ()),
    ],
)
def test_plain_indices_are_worked_out_without_numpy(shape, index, want):
    """The indices a count's chunks use take the plain way (None would leave them to NumPy's strided dummy)."""
    assert _basic_index_shape(shape, index) == want == np.zeros(shape)[index].shape


@pytest.mark.parametrize(
    "index", [np.array([0, 1]), [0, 1], True, (0, 0, 0), 7, slice(0.5, 2), np.timedelta64(1), (None,) * 70]
)
def test_other_indices_are_left_to_numpy(index):
    """Arrays, lists, booleans, too many indices, a number out of range, a slice of fractions, a timedelta (a NumPy
    integer indexing refuses), more axes than an array may have: NumPy decides, and raises where it refuses."""
    assert _basic_index_shape((3, 4), index) is None
    assert _sliced_shape(ShapeOnly((3, 4)), index) == _sliced_shape(np.zeros((3, 4)), index)


@pytest.mark.parametrize(
    "a, b",
    [
        (ShapeOnly((4, 5)), ShapeOnly((4, 5))),
        (ShapeOnly((4, 5)), ShapeOnly((5,))),
        (ShapeOnly((4, 1)), ShapeOnly((1, 5), np.float64)),
        (ShapeOnly((4, 5), np.float16), ShapeOnly((4, 5), np.float16)),
        (ShapeOnly((4, 5)), 2.0),
        (3, ShapeOnly((2, 3), np.int64)),
        (ShapeOnly((2, 3)), np.ones((2, 3), np.float64)),
        (ShapeOnly((2,), ">f4"), ShapeOnly((2,), ">f4")),  # another byte order: result_type gives the native one
        (ShapeOnly((2,), np.dtype("f4", metadata={"k": 1})),) * 2,  # metadata: result_type drops it
    ],
)
def test_an_elementwise_result_has_the_broadcast_shape_and_the_operands_common_dtype(a, b):
    """The shape NumPy broadcasts to, and the dtype np.result_type gives the operands' dtypes (a Python number
    counted as NumPy's default array of it, as the stand-ins always have)."""
    out = np.add(a, b)
    shapes = [x.shape if isinstance(x, ShapeOnly) else np.shape(x) for x in (a, b)]
    dtypes = [x.dtype if isinstance(x, ShapeOnly) else np.asarray(x).dtype for x in (a, b)]
    want = np.result_type(*dtypes)
    assert (out.shape, out.dtype, out.dtype.metadata) == (np.broadcast_shapes(*shapes), want, want.metadata), out


@pytest.mark.parametrize("a, b", [((4, 5), (4, 6)), ((1,) * 65, (1,) * 65)])
def test_operands_that_do_not_broadcast_raise_as_numpy_does(a, b):
    """Shapes that do not broadcast, and shapes of more axes than NumPy's arrays may have (even alike)."""
    with pytest.raises(ValueError):
        np.broadcast_shapes(a, b)
    with pytest.raises(ValueError):
        np.add(ShapeOnly(a), ShapeOnly(b))


@pytest.mark.parametrize(
    "a, b, want", [((0,), (1,), (0,)), ((1,), (0,), (0,)), ((3, 1), (1, 4), (3, 4)), ((2,), (), (2,))]
)
def test_a_product_s_batch_axes_broadcast_as_numpy_s(a, b, want):
    """A size of 1 gives way to the other's, 0 included (the ledger's shapes of a product's batch)."""
    assert _broadcast(a, b) == want == np.broadcast_shapes(a, b)


def test_a_lookup_by_an_array_of_ids_has_their_shape_and_the_table_s_rows():
    """table[ids] (an embedding's lookup): the ids' shape, then each row's; the ids' values are not read (a count's
    placeholder ids), so none is refused for its value as NumPy would."""
    ids = np.array([[0, 2, 1]])
    assert ShapeOnly((5, 8))[ids].shape == (1, 3, 8) == np.zeros((5, 8))[ids].shape
