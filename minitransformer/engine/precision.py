"""Narrower number formats than float32, emulated: how a product and a stage round when a model is served in
bfloat16, float16 or fp8, and where values leave a format's range.

A product is computed as accelerators compute it: both operands rounded to the format (round to nearest,
ties to even), multiplied and accumulated in float32, and the output, bias added, rounded to the format the
model keeps its values in. Element-wise stages (norms, softmax, activations, residual adds) compute in float32
from those values and their outputs are rounded to the same format, which is what a model cast to bfloat16
does in PyTorch (each op computes in float32 and rounds its result): the residual stream, the KV cache and
every tensor a stage hands on hold numbers of the format.

| precision  | product operands                 | product outputs and stage values |
|------------|----------------------------------|----------------------------------|
| bfloat16   | bfloat16                         | bfloat16                         |
| float16    | float16 (overflow: inf)          | float16 (overflow: inf)          |
| fp8_e4m3   | float8_e4m3fn (saturates at 448) | bfloat16                         |
| fp8_e5m2   | float8_e5m2 (overflow: inf)      | bfloat16                         |

fp8's outputs are bfloat16 because that is what fp8 matrix units write (an H100's FP8 GEMM accumulates in
float32 and writes bfloat16 or float32), and because a product's fp8 output would change only what element-wise
stages read: every product rounds its operands to fp8 anyway. e4m3fn has no infinity (its one NaN pattern took
its place), so a value beyond its range saturates to +-448, as NVIDIA's conversions with .satfinite and the
fp8 recipes that clamp before casting do; e5m2 keeps IEEE's infinities, so its overflow is inf. No scale
factors: real fp8 stacks scale each tensor (or block) into range before rounding, which this does not.

The formats are ml_dtypes' (the NumPy dtypes JAX uses): its casts round to nearest even and keep subnormals.
A precision's `log`, where one is kept (the drift ledger's), records every rounding that overflowed or flushed
values that matter to zero, with the stage that did it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import frexp

import numpy as np

from ..errors import UserError

PRECISIONS = ("float32", "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2")
# The largest float32 copy of a narrow weight made for one product (Precision.column_blocks): 64 MiB, a Llama 3
# 8B's largest layer matrix (14,336 x 4,096 x 4 bytes = 235 MB) in four blocks, its logits' (128,256 x 4,096) in 32.
WIDEN_BLOCK = 64 * 2**20


@dataclass(frozen=True)
class Format:
    """A number format narrower than float32, as ml_dtypes (or NumPy, for float16) holds it."""

    name: str  # "bfloat16", "float8_e4m3fn", ...
    dtype: np.dtype
    saturates: bool  # out of range rounds to the largest finite number (e4m3fn), not to inf
    max: float  # the largest finite number
    mantissa_bits: int  # stored fraction bits: a relative rounding error of at most 2^-(bits+1)

    @property
    def overflow_at(self) -> float:
        """max plus half its unit in the last place: the tie between max and the next power of two. IEEE formats'
        max ends in an odd digit, so the tie and all above it round to inf; e4m3fn's 448 ends in an even one, so
        the tie rounds to 448 and only what lies beyond is clamped (Format.overflows)."""
        exponent = frexp(self.max)[1] - 1  # max = 1.f x 2^exponent
        return self.max + 2.0 ** (exponent - self.mantissa_bits - 1)

    def overflows(self, magnitude: np.ndarray) -> np.ndarray:
        """Which magnitudes leave the range: round to inf, or (saturating) are clamped to max by more than half
        a unit in the last place, more than rounding would move them."""
        return magnitude > self.overflow_at if self.saturates else magnitude >= self.overflow_at

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -(self.mantissa_bits + 1)

    @property
    def epsilon(self) -> float:
        """The gap between 1 and the next number of the format: 2^-mantissa_bits (bfloat16 2^-7, float16 2^-10)."""
        return 2.0**-self.mantissa_bits

    def round(self, x: np.ndarray) -> np.ndarray:
        """x (float32) in this format: round to nearest even, subnormals kept; NaN stays NaN."""
        if self.saturates:
            x = np.clip(x, -self.max, self.max)  # +-inf too: saturation knows no infinity
        with np.errstate(over="ignore"):  # past the range is inf, as the format defines: the log says where
            return x.astype(self.dtype)


def _format(name: str) -> Format:
    import ml_dtypes

    dtype = {
        "bfloat16": ml_dtypes.bfloat16,
        "float16": np.float16,
        "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
    }[name]
    info = ml_dtypes.finfo(dtype)
    return Format(name, np.dtype(dtype), name == "float8_e4m3fn", float(info.max), int(info.nmant))


@dataclass
class RangeEvent:
    """A rounding at one stage that left the format's range: values that overflowed (to inf, or clamped to the
    largest finite number where the format saturates), or values that matter flushed to zero."""

    name: str  # the stage's full name, "blocks.2.resid_mid"
    role: str  # "out": the stage's values; "A" or "B": a product's operand; "weight": a weight rounded at load
    format: str
    max_abs: float  # the largest finite magnitude before rounding
    overflowed: int = 0  # values that left the range at the top
    flushed: int = 0  # nonzero values rounded to zero
    flushed_share: float = 0.0  # their root sum of squares over the tensor's: see Precision.underflow_matters
    size: int = 0
    format_max: float = 0.0  # the format's largest finite number


@dataclass
class Precision:
    """The rounding policy a tape carries (Tape.precision): what a product's operands and outputs, and a stage's
    values, are rounded to. float32 rounds nothing and only widens weights kept in their 2-byte format."""

    name: str
    operands: Format | None  # None: float32
    values: Format | None  # product outputs and stage values
    log: list[RangeEvent] | None = field(default=None, repr=False)  # kept by the drift ledger

    def logged(self) -> Precision:
        """The same policy, recording its range events (a fresh log)."""
        return Precision(self.name, self.operands, self.values, [])

    def operand(self, x, name: str, role: str) -> np.ndarray:
        """A product's operand as float32 holding numbers of the operand format (a weight kept in that format is
        only widened; one kept in another, rounded)."""
        if isinstance(x, np.ndarray) and x.dtype == np.float32:
            return x if self.operands is None else self._round(self.operands, x, name, role)
        wide = widened(np.asarray(x))  # a narrow weight: exact in float32
        if self.operands is None or x.dtype == self.operands.dtype:
            return wide
        return self._round(self.operands, wide, name, role)

    def only_widens(self, b) -> bool:
        """Whether b is a weight (a matrix) held narrower than float32 in the operands' format (any, at float32), so
        that its operand is its float32 copy, exact: a product may widen it a block at a time as it reads it."""
        return (
            isinstance(b, np.ndarray)
            and b.ndim == 2
            and b.dtype.kind in "fV"
            and b.dtype not in (np.float32, np.float64)
            and (self.operands is None or b.dtype == self.operands.dtype)
        )

    def column_blocks(self, b) -> list[slice] | None:
        """Where a product's weight is kept narrow and its float32 copy would pass WIDEN_BLOCK bytes (a large
        vocabulary's logits: 1 GB for Llama 3's 128,256 x 2,048), the blocks of its columns to widen one at a time,
        so that a model kept in its file's bytes needs little more memory than the file; None: widened whole.
        The products are the same; the BLAS may order a block's float32 sums otherwise than the whole's."""
        if not isinstance(b, np.ndarray) or b.dtype in (np.float32, np.float64) or b.ndim != 2:
            return None
        if 4 * b.size <= WIDEN_BLOCK:
            return None
        step = max(1, WIDEN_BLOCK // (4 * b.shape[0]))
        return [slice(j, j + step) for j in range(0, b.shape[1], step)]

    def value(self, x, name: str):
        """A stage's output (or a product's, after its bias) as float32 holding numbers of the values' format; an
        array that is not floating (ids, an expert's chosen rows) passes as it is."""
        if not isinstance(x, np.ndarray) or x.dtype.kind not in "fV" or x.dtype == np.float64:
            return x
        wide = x if x.dtype == np.float32 else widened(x)
        return wide if self.values is None else self._round(self.values, wide, name, "out")

    def _round(self, fmt: Format, x: np.ndarray, name: str, role: str) -> np.ndarray:
        rounded = fmt.round(x)
        wide = widened(rounded)
        if self.log is not None:
            self._check_range(fmt, x, wide, name, role)
        return wide

    def _check_range(self, fmt: Format, x: np.ndarray, rounded: np.ndarray, name: str, role: str) -> None:
        self.log.extend(self.range_events(fmt, x, rounded, name, role))  # type: ignore[union-attr]  # _round checked

    @classmethod
    def range_events(cls, fmt: Format, x: np.ndarray, rounded: np.ndarray, name: str, role: str) -> list[RangeEvent]:
        """The rounding of x (float32) to `rounded` as an event, if it overflowed or flushed values that matter."""
        magnitude = np.abs(x)
        finite = np.isfinite(magnitude)
        max_abs = float(magnitude.max(initial=0.0, where=finite))
        overflowed = int(np.count_nonzero(finite & fmt.overflows(magnitude)))
        flushed_mask = (rounded == 0) & (x != 0) & finite
        flushed = int(np.count_nonzero(flushed_mask))
        share = 0.0
        if flushed:
            lost = float(np.sqrt(np.sum(np.square(x[flushed_mask], dtype=np.float64))))
            whole = float(np.sqrt(np.sum(np.square(x[finite], dtype=np.float64))))
            share = lost / whole if whole else 0.0
        if overflowed or (flushed and cls.underflow_matters(fmt, share)):
            return [RangeEvent(name, role, fmt.name, max_abs, overflowed, flushed, share, x.size, fmt.max)]
        return []

    @staticmethod
    def underflow_matters(fmt: Format, share: float) -> bool:
        """Values flushed to zero matter when what they held is more than the format loses to rounding anyway:
        the root sum of squares of the flushed values above the format's unit roundoff times the tensor's own.
        (A softmax's far tail flushed to zero next to probabilities near 1 does not; a tensor of small values
        mostly flushed does.)"""
        return share > fmt.unit_roundoff


def precision_of(name) -> Precision | None:
    """The policy of a precision's name; None for float32 (nothing to round: the tape takes its default path)."""
    if name is None or name == "float32":
        return None
    if not isinstance(name, str) or name not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    require_ml_dtypes()
    bf16 = _format("bfloat16")
    if name == "bfloat16":
        return Precision(name, bf16, bf16)
    if name == "float16":
        f16 = _format("float16")
        return Precision(name, f16, f16)
    return Precision(name, _format("float8_e4m3fn" if name == "fp8_e4m3" else "float8_e5m2"), bf16)


def widening() -> Precision:
    """float32 products over weights kept in their stored 2-byte format: each is widened as a product reads it."""
    return Precision("float32", None, None)


# float16 has 5 bits of exponent biased by 15, float32 8 biased by 127: a float16's bits moved to their float32 places
# (its 10 bits of mantissa at the top of float32's 23, its exponent at the foot of float32's) read as a float32 2^112
# times too small, its subnormals too (as float32 subnormals), and a product by 2^112 is exact where the CPU reads
# subnormals as NumPy leaves it to. A thread told to read them as zero (torch.set_flush_denormal(True) tells its own,
# and so does loading a library built with -ffast-math) would zero float16's subnormals: SUBNORMAL_PROBE, a float32
# subnormal, scaled first, tells which the calling thread does.
FLOAT16_SCALE = np.float32(2.0**112)
SUBNORMAL_PROBE = np.array([2.0**-140], np.float32)
FLOAT16_SPECIALS = 2.0**16  # where inf and NaN (exponent 31) land once scaled; float16's largest finite is 65,504
WIDEN_CHUNK = 1 << 18  # numbers widened at a time: float16's passes over them stay in cache, in few calls (see widened)
# Fewer float16s than this NumPy's cast widens sooner than six calls would (768 of them 1.1 us against 6.9; from
# 8,192 alike, 16,384 16.3 us against 10.3): a decode step's vectors at --precision float16
FLOAT16_BITS_MIN = 1 << 13
# A float16 array that holds no infinity or NaN and is read-only, as a view of this dtype (NumPy keeps a dtype, its
# metadata too, on every view): widened need not look for them. A checkpoint's float16 weights are looked at once,
# as they are loaded (`checked_finite`), where every decode step's widening looked at each of their blocks again
# (the 1.24B float16 Llama's step on the Zen 5 here, the two ways in turn: 0.381 s looked at each step, 0.323 once).
# Only a read-only array is trusted: NumPy gives an element-wise result of a marked array its dtype too, but a result
# is writable.
FINITE_FLOAT16 = np.dtype(np.float16, metadata={"holds": "no infinity or NaN (precision.checked_finite)"})


def widened(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x (float16, bfloat16 or fp8) as float32, exact, written into `out` (x's shape) where one is given.

    bfloat16 and fp8 by ml_dtypes' casts; float16 (of FLOAT16_BITS_MIN numbers or more) by moving its bits,
    WIDEN_CHUNK numbers at a time, in three of NumPy's vector loops, a scale and a look for infinities (0.27 ns a
    number on the Zen 5 here; 0.20 without the look, which an array marked FINITE_FLOAT16 skips): NumPy's own cast
    converts one number at a time (1.2 to 1.5 ns), which made a float16 checkpoint kept in its bytes spend six times
    a bfloat16 one's time widening. Infinities and NaNs (no weight holds
    one) are NumPy's cast's, and so is all of x in a thread that reads subnormals as zero (see SUBNORMAL_PROBE), so
    every float16 widens to NumPy's float32. `out`, where given, is float32."""
    if out is None:
        out = np.empty_like(x, dtype=np.float32)  # x's layout, as astype gives: a product's call is the same kind
    if x.dtype != np.float16 or x.size < FLOAT16_BITS_MIN or not _reads_subnormals():
        np.copyto(out, x)
        return out
    axis = int(np.argmax(np.abs(x.strides)))  # the chunks cut where x's memory is farthest apart
    step = max(1, WIDEN_CHUNK * x.shape[axis] // x.size)
    for start in range(0, x.shape[axis], step):
        cut = (slice(None),) * axis + (slice(start, start + step),)
        _widen_float16(x[cut], out[cut])
    return out


def _reads_subnormals() -> bool:
    """Whether the calling thread's float arithmetic reads a subnormal as itself, not as zero (a product, 1 us)."""
    return bool(np.multiply(SUBNORMAL_PROBE, FLOAT16_SCALE)[0] != 0)


def _widen_float16(x: np.ndarray, out: np.ndarray) -> None:
    bits = out.view(np.int32)
    np.copyto(bits, x.view(np.int16))  # sign-extended: a negative's sign in every bit above its 15
    np.left_shift(bits, 13, out=bits)  # exponent and mantissa at float32's places, the sign at bits 28 to 31
    np.bitwise_and(bits, np.int32(-0x70000001), out=bits)  # & 0x8FFFFFFF: the sign at 31 alone
    np.multiply(out, FLOAT16_SCALE, out=out)
    if x.dtype is FINITE_FLOAT16 and not _owner(x).flags.writeable:
        return  # looked at once, when it was loaded: no infinity or NaN
    if out.size and (out.max() >= FLOAT16_SPECIALS or out.min() <= -FLOAT16_SPECIALS):
        np.copyto(out, x, where=np.abs(out) >= FLOAT16_SPECIALS)


def _owner(x: np.ndarray) -> np.ndarray:
    """The array whose memory x views (x itself where it owns it): a read-only view of a writable array (broadcast_to
    makes one) is no promise that its numbers stay as they were looked at."""
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def checked_finite(x: np.ndarray) -> np.ndarray:
    """x, a read-only float16 array without infinities and NaNs, as a view of dtype FINITE_FLOAT16 (widened then
    skips its look for them); any other x as it is. One pass over x, WIDEN_CHUNK numbers at a time."""
    if x.dtype != np.float16 or _owner(x).flags.writeable or x.dtype is FINITE_FLOAT16:
        return x
    bits = x.reshape(-1).view(np.int16)  # a copy only where x is not contiguous
    probe = np.empty(min(bits.size, WIDEN_CHUNK), np.int16)
    for start in range(0, bits.size, WIDEN_CHUNK):
        part = probe[: min(WIDEN_CHUNK, bits.size - start)]
        # every bit set but the exponent's (0x83FF): -1 exactly where the exponent's five bits are all ones, an
        # infinity's or a NaN's; any finite number's int16 is below -1
        np.bitwise_or(bits[start : start + WIDEN_CHUNK], np.int16(-0x7C01), out=part)
        if part.max() == -1:
            return x
    return x.view(FINITE_FLOAT16)


def require_ml_dtypes() -> None:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        raise UserError("bfloat16, float16 and fp8 need ml_dtypes: pip install ml_dtypes") from None
