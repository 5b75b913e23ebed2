"""Narrower precisions without torch: the product rule bit for bit on hand-made numbers, weights held in their
format (or kept in a checkpoint's own 2 bytes, bit for bit the float32 pass), the drift ledger (zero for float64
against itself), and bad combinations refused in one line.

tests/verbs/test_precision_hf.py holds the products to torch.matmul, the forward passes to transformers' bfloat16 and
float16, and finds a Gemma model's float16 overflow where it happens.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from shared_checks import two_byte_copy

from conftest import run_cli, write_llama
from minitransformer import UserError, load_model
from minitransformer.engine import precision as precision_module
from minitransformer.engine.precision import FINITE_FLOAT16, Precision, checked_finite, precision_of, widened
from minitransformer.engine.tape import Dims, Tape
from minitransformer.models.weights import _read_header
from minitransformer.verbs.drift import drift
from minitransformer.views.report import describe_model

PROMPT = "The capital of France is"


def product(precision: str, a, b, bias=None, logged: bool = False):
    """a @ b through the one door, at `precision`: (the output, the policy, with its log if asked for)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    policy = precision_of(precision)
    assert policy is not None
    policy = policy.logged() if logged else policy
    tape = Tape(Dims(T=a.shape[0], t=1, D=a.shape[1], H=1, F=1, V=b.shape[1], R=1), precision=policy)
    return tape.matmul("logits", a, b, "T D, D V -> T V", bias=bias), policy


def one(precision: str, a: float, b: float = 1.0) -> float:
    out, _ = product(precision, [[a]], [[b]])
    assert out.dtype == np.float32
    return float(out[0, 0])


# --- the rule, number by number ------------------------------------------------------------------------------
def test_operands_round_to_nearest_even_before_the_product():
    # bfloat16 keeps 7 fraction bits: 1 + 2^-8 is the tie between 1 and 1 + 2^-7, and goes to 1, the even one;
    # 1 + 3 x 2^-8 is the tie between 1 + 2^-7 and 1 + 2^-6, and goes to 1 + 2^-6 (even last bit).
    assert one("bfloat16", 1 + 2**-8) == 1.0
    assert one("bfloat16", 1 + 3 * 2**-8) == 1 + 2**-6
    assert one("bfloat16", 1 + 2**-8 + 2**-20) == 1 + 2**-7  # past the tie: up
    # The operand is rounded first: [1 + 2^-8, 2^-9] . [1, 1] has the exact value 1 + 3 x 2^-9, which bfloat16
    # rounds to 1 + 2^-7; with the operands rounded it is 1 + 2^-9, which rounds to 1.
    out, _ = product("bfloat16", [[1 + 2**-8, 2**-9]], [[1.0], [1.0]])
    assert out[0, 0] == 1.0
    # float16 keeps 10: 1 + 2^-11 is a tie, to 1; e4m3 keeps 3: 1 + 2^-4 to 1, 1 + 3 x 2^-4 to 1.25; e5m2 keeps 2.
    assert one("float16", 1 + 2**-11) == 1.0 and one("float16", 1 + 3 * 2**-11) == 1 + 2**-9
    assert one("fp8_e4m3", 1 + 2**-4) == 1.0 and one("fp8_e4m3", 1 + 3 * 2**-4) == 1.25
    assert one("fp8_e5m2", 1 + 2**-3) == 1.0 and one("fp8_e5m2", 1 + 3 * 2**-3) == 1.5


def test_products_accumulate_in_float32_and_round_their_output_once():
    # 1 + four times 2^-9: each 2^-9 alone is lost next to 1 in bfloat16 (below half a unit), but float32 sums
    # them to 1 + 2^-7 exactly, which bfloat16 holds; a bfloat16 accumulator would stay at 1.
    out, _ = product("bfloat16", [[1.0, 2**-9, 2**-9, 2**-9, 2**-9]], np.ones((5, 1)))
    assert out[0, 0] == 1 + 2**-7
    # The output is rounded: 1 + 2^-9 (exact in float32) leaves the door as 1.
    out, _ = product("bfloat16", [[1.0, 2**-9]], np.ones((2, 1)))
    assert out[0, 0] == 1.0
    # The bias is added in float32, before the output's rounding: 1 + (2^-8 + 2^-20) rounds up, not to 1.
    out, _ = product("bfloat16", [[1.0]], [[1.0]], bias=np.array([2**-8 + 2**-20], np.float32))
    assert out[0, 0] == 1 + 2**-7
    # fp8's products write bfloat16: 1.125 x 1.125 = 1.265625 in float32, 1.265625 in bfloat16 (8 bits hold it),
    # where an e4m3 output would have been 1.25.
    assert one("fp8_e4m3", 1.125, 1.125) == 1.265625


def test_subnormals_are_kept_and_round_to_even():
    # float16's smallest subnormal is 2^-24: 2^-12 x 2^-12 is kept; 2^-12 x 2^-13 = 2^-25 is the tie between 0 and
    # 2^-24 and goes to 0 (even); 3 x 2^-26 lies past the middle and goes to 2^-24.
    assert one("float16", 2**-12, 2**-12) == 2**-24
    assert one("float16", 2**-12, 2**-13) == 0.0
    assert one("float16", 3 * 2**-14, 2**-12) == 2**-24
    # As an operand: 5 x 2^-26 (1.25 units of 2^-24) becomes 2^-24 before the product; 3 x 2^-25 (1.5 units) is the
    # tie between 1 and 2 units and goes to 2 (even).
    assert one("float16", 5 * 2**-26, 1.0) == 2**-24
    assert one("float16", 3 * 2**-25, 1.0) == 2**-23
    # e4m3's smallest subnormal is 2^-9: 2^-10 (the tie) to 0, 3 x 2^-11 to 2^-9, 3 x 2^-9 kept (subnormal 0.011),
    # 3 x 2^-10 (the tie between 1 and 2 units) to 2 units.
    assert one("fp8_e4m3", 2**-10) == 0.0 and one("fp8_e4m3", 3 * 2**-11) == 2**-9
    assert one("fp8_e4m3", 3 * 2**-9) == 3 * 2**-9 and one("fp8_e4m3", 3 * 2**-10) == 2**-8
    # bfloat16's: 2^-133.
    assert one("bfloat16", 2.0**-133) == 2.0**-133 and one("bfloat16", 2.0**-134) == 0.0


def test_float16_overflows_to_inf_e4m3_saturates_e5m2_overflows():
    # float16's largest is 65,504; the tie with 65,536 is 65,520, which rounds to inf (65,504's last bit is odd).
    assert one("float16", 256.0, 256.0) == np.inf
    assert one("float16", -256.0, 256.0) == -np.inf
    assert one("float16", 65519.0) == 65504.0
    assert one("float16", 65520.0) == np.inf
    # e4m3fn has no inf: an operand past 448 saturates to 448 (and -448); inf too. NaN stays NaN.
    assert one("fp8_e4m3", 500.0) == 448.0 and one("fp8_e4m3", -1e9) == -448.0 and one("fp8_e4m3", np.inf) == 448.0
    assert np.isnan(one("fp8_e4m3", np.nan))
    assert one("fp8_e4m3", 464.0) == 448.0  # the tie with 480 (not a number of the format) rounds to 448, even
    # e5m2 keeps IEEE's infinities: 57,344 is its largest, 61,440 the tie, to inf.
    assert one("fp8_e5m2", 61439.0) == 57344.0 and one("fp8_e5m2", 61440.0) == np.inf


def test_the_log_names_overflow_and_underflow_that_matters():
    _, policy = product("float16", [[256.0, 1.0]], [[256.0, 1.0], [0.0, 1.0]], logged=True)
    (event,) = policy.log
    assert (event.name, event.role, event.format, event.overflowed, event.max_abs) == ("logits", "out", "float16", 1,
                                                                                       65536.0)  # fmt: skip
    # Values flushed to zero: 1e-9 beside 1 is less than float16 loses to rounding anyway; a tensor of 1e-9 alone
    # loses everything it held.
    _, policy = product("float16", [[1.0, 1e-9]], [[1.0, 0.0], [0.0, 1.0]], logged=True)
    assert policy.log == []
    _, policy = product("float16", [[1e-9, 2e-9]], [[1.0, 0.0], [0.0, 1.0]], logged=True)
    assert [(e.role, e.flushed, e.size, round(e.flushed_share, 6)) for e in policy.log] == [("A", 2, 2, 1.0)]
    # e4m3 saturation is an overflow too, where it moves a value by more than rounding would.
    _, policy = product("fp8_e4m3", [[460.0, 1.0]], [[1.0], [1.0]], logged=True)
    assert policy.log == []
    _, policy = product("fp8_e4m3", [[470.0, 1.0]], [[1.0], [1.0]], logged=True)
    assert [(e.role, e.overflowed, e.max_abs) for e in policy.log] == [("A", 1, 470.0)]


def test_a_stage_keeps_its_values_in_the_format_and_leaves_ids_alone():
    policy = precision_of("bfloat16")
    tape = Tape(Dims(T=1, t=1, D=2, H=1, F=1, V=1, R=1), precision=policy)
    x = tape.stage("embed", np.array([[1 + 2**-8, 3.0]], np.float32), "T D")
    assert x.dtype == np.float32 and x.tolist() == [[1.0, 3.0]]
    ids = np.array([[3, 1]])
    assert policy.value(ids, "router.top_k") is ids
    assert precision_of("float32") is None  # float32 rounds nothing: the tape's default path


# --- weights -------------------------------------------------------------------------------------------------
def test_default_load_and_float32_precision_are_todays_pass_bit_for_bit():
    model = load_model("demo")
    assert model.precision is None and model.held_formats == {}
    assert {"precision", "weights"}.isdisjoint(model.describe())
    assert model.params.wte.weight.dtype == np.float32  # the demo's float16 file fits: upcast at load, as before
    same = load_model("demo", precision="float32", weights="float32")
    ids = model.prompt_ids(PROMPT)
    assert np.array_equal(model.logits(ids), same.logits(ids))


def test_weights_at_a_precision_are_held_in_its_formats():
    model = load_model("demo", precision="fp8_e4m3")
    block = model.params.h[0]
    assert block.attn.c_attn.weight.dtype == ml_dtypes.float8_e4m3fn  # what products read
    assert model.params.wte.weight.dtype == ml_dtypes.bfloat16  # looked up: a stage's values; the logits round it
    assert block.ln_1.weight.dtype == np.float32  # element-wise stages compute in float32, from bfloat16 numbers
    assert np.array_equal(block.ln_1.weight, block.ln_1.weight.astype(ml_dtypes.bfloat16).astype(np.float32))
    reference = load_model("demo")
    w = reference.params.h[0].attn.c_attn.weight
    assert np.array_equal(block.attn.c_attn.weight.astype(np.float32),
                          np.clip(w, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))  # fmt: skip
    assert model.describe()["precision"] == "fp8_e4m3" and model.describe()["weights"] == "float8_e4m3fn"


# precision: the format the products' matrices are held in, and the token embedding's where it differs (fp8's
# embedding is a stage's values once looked up: bfloat16); docs/precision.md's table
HELD = {
    "bfloat16": ("bfloat16", None),
    "float16": ("float16", None),
    "fp8_e4m3": ("float8_e4m3fn", "bfloat16"),
    "fp8_e5m2": ("float8_e5m2", "bfloat16"),
}
ROUNDING = {
    "bfloat16": "products and stages rounded to bfloat16",
    "float16": "products and stages rounded to float16",
    "fp8_e4m3": "fp8_e4m3: products read float8_e4m3fn, their outputs and the stages rounded to bfloat16",
    "fp8_e5m2": "fp8_e5m2: products read float8_e5m2, their outputs and the stages rounded to bfloat16",
}


@pytest.mark.parametrize("precision", HELD)
def test_the_labels_name_the_formats_the_weights_are_really_held_in(precision):
    model = load_model("demo", precision=precision)
    matrices, embedding = HELD[precision]
    held = (model.params.h[0].mlp.c_fc.weight.dtype.name, model.params.wte.weight.dtype.name)
    assert held == (matrices, embedding or matrices), held
    described = model.describe()  # the JSON's "model" (and the ledger's, which the page's header reads)
    labels = {key: described.get(key) for key in ("precision", "weights", "embedding")}
    assert labels == {"precision": precision, "weights": matrices, "embedding": embedding}, labels
    line = describe_model(described, model.source)  # the terminal's and the page's header
    also = f", the token embedding in {embedding}" if embedding else ""
    assert f"; {ROUNDING[precision]}; matrices held in {matrices}{also})" in line, line


@pytest.fixture(scope="module")
def bfloat16_llama(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bf16")
    source = write_llama(root / "f32", n_layer=2, n_embd=32, n_inner=64, vocab_size=300, tie_word_embeddings=False)
    return two_byte_copy(source, root / "bf16")


def _memory_mapped(array: np.ndarray) -> bool:
    base = array
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    return isinstance(base, np.memmap)


def test_a_bfloat16_checkpoint_kept_in_its_bytes_computes_what_its_upcast_computes(bfloat16_llama):
    stored = load_model(bfloat16_llama, weights="stored")
    upcast = load_model(bfloat16_llama, weights="float32")
    q = stored.params.layers[0].self_attn.q_proj.weight
    assert q.dtype == ml_dtypes.bfloat16 and _memory_mapped(q) and not q.flags.writeable  # the file's own bytes
    assert stored.params.embed_tokens.weight.dtype == ml_dtypes.bfloat16
    assert stored.params.layers[0].input_layernorm.weight.dtype == np.float32  # small: widened at load
    assert upcast.params.layers[0].self_attn.q_proj.weight.dtype == np.float32 and upcast.precision is None
    assert stored.dtype == np.float32 and stored.describe()["weights"] == "bfloat16"
    assert "embedding" not in stored.describe()  # held in the file's bfloat16 too
    assert "; matrices held in bfloat16)" in describe_model(stored.describe(), stored.source)
    ids = [5, 17, 200, 3, 99, 42]
    assert np.array_equal(stored.logits(ids), upcast.logits(ids))  # every number is the same float32: bit for bit
    a = stored.generate(ids, max_new_tokens=6, stop_at_eos=False)
    b = upcast.generate(ids, max_new_tokens=6, stop_at_eos=False)
    assert a.new_tokens == b.new_tokens
    assert a.ledger.to_dict()["phases"] == b.ledger.to_dict()["phases"]
    # auto: the float32 copy of this small model fits in memory, so it is upcast
    assert load_model(bfloat16_llama).params.layers[0].self_attn.q_proj.weight.dtype == np.float32


def test_a_float16_checkpoint_kept_in_its_bytes_computes_what_its_upcast_computes(tmp_path, monkeypatch):
    """float16 is widened by moving its bits (precision.widened), not by NumPy's cast: the same float32 numbers."""
    monkeypatch.setattr(precision_module, "FLOAT16_BITS_MIN", 2)  # this small model's matrices by their bits too
    source = write_llama(tmp_path / "f32", n_layer=2, n_embd=32, n_inner=64, vocab_size=300)
    directory = two_byte_copy(source, tmp_path / "f16", stored="F16")
    stored, upcast = load_model(directory, weights="stored"), load_model(directory, weights="float32")
    q = stored.params.layers[0].self_attn.q_proj.weight
    assert q.dtype == np.float16 and _memory_mapped(q), q.dtype
    file_q = load_model(source).params.layers[0].self_attn.q_proj.weight
    widened_q = upcast.params.layers[0].self_attn.q_proj.weight
    assert np.array_equal(widened_q, file_q.astype(np.float16).astype(np.float32))  # upcast at load: NumPy's numbers
    ids = [5, 17, 200, 3, 99, 42]
    assert np.array_equal(stored.logits(ids), upcast.logits(ids))
    a = stored.generate(ids, max_new_tokens=6, stop_at_eos=False)
    b = upcast.generate(ids, max_new_tokens=6, stop_at_eos=False)
    assert a.new_tokens == b.new_tokens, (a.new_tokens, b.new_tokens)


EVERY_FLOAT16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # NaNs, infs, subnormals, -0


@pytest.mark.parametrize("bits_from", [2, precision_module.FLOAT16_BITS_MIN], ids=["by its bits", "as it comes"])
@pytest.mark.parametrize(
    "layout",
    ["flat", "[out, in] read as W^T", "a block of W^T's columns", "every other row", "one number", "empty"],
)
def test_widened_float16_is_numpys_float32_bit_for_bit_in_any_layout(layout, bits_from, monkeypatch):
    monkeypatch.setattr(precision_module, "WIDEN_CHUNK", 1000)  # chunks that end mid-row, and a short last one
    monkeypatch.setattr(precision_module, "FLOAT16_BITS_MIN", bits_from)  # 2: all but one number by their bits
    grid = EVERY_FLOAT16.reshape(256, 256)
    x = {
        "flat": EVERY_FLOAT16,
        "[out, in] read as W^T": grid.T,
        "a block of W^T's columns": grid.T[:, 37:203],
        "every other row": grid[::2, 3:],
        "one number": EVERY_FLOAT16[31744:31745].reshape(()),  # +inf, 0-d
        "empty": grid[:0],
    }[layout]
    expected = x.astype(np.float32)
    got = widened(x)
    assert got.shape == expected.shape and got.strides == expected.strides, (got.strides, expected.strides)
    same = got.view(np.uint32) == expected.view(np.uint32)
    assert same.all(), (x[~same][:5], got[~same][:5], expected[~same][:5])
    into = np.full(x.shape, 7.0, np.float32).T.copy().T  # a buffer of another layout, filled with something else
    assert widened(x, out=into) is into and np.array_equal(into.view(np.uint32), expected.view(np.uint32))


SPECIALS = EVERY_FLOAT16[np.isinf(EVERY_FLOAT16) | np.isnan(EVERY_FLOAT16)]  # +-inf and 2,046 NaNs


def _read_only(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


def test_checked_finite_marks_a_read_only_float16_array_that_holds_no_infinity_or_nan(monkeypatch):
    monkeypatch.setattr(precision_module, "WIDEN_CHUNK", 1000)  # looked at in chunks, a short last one
    monkeypatch.setattr(precision_module, "FLOAT16_BITS_MIN", 2)  # widened by the bits
    finite = _read_only(EVERY_FLOAT16[np.isfinite(EVERY_FLOAT16)])  # 63,488 numbers: subnormals, -0, the largest
    marked = checked_finite(finite)
    assert marked.dtype is FINITE_FLOAT16 and np.shares_memory(marked, finite) and not marked.flags.writeable
    grid = marked[: 248 * 256].reshape(248, 256)
    for x in (marked, grid.T, grid.T[:, 37:203], grid[::2, 3:]):  # views keep the mark; widened is NumPy's cast
        assert x.dtype is FINITE_FLOAT16
        assert np.array_equal(widened(x).view(np.uint32), x.astype(np.float32).view(np.uint32))
    for special in (SPECIALS[0], SPECIALS[1], SPECIALS[5], SPECIALS[-1]):  # +inf, -inf, NaNs of either sign
        for where in (0, 999, 1000, 61_999, finite.size - 1):  # first, chunks' ends and starts, the last
            x = finite.copy()
            x[where] = special
            x.flags.writeable = False
            assert checked_finite(x) is x, (special, where)
    assert checked_finite(finite.copy()).dtype is not FINITE_FLOAT16  # writable: it could change
    bf16 = _read_only(EVERY_FLOAT16[:100].view(np.uint16).view(ml_dtypes.bfloat16))
    assert checked_finite(bf16) is bf16
    # an element-wise result of a marked array keeps its dtype but is writable, and is looked at: its infinities
    # (1,000 times the largest numbers) widen to infinities
    with np.errstate(over="ignore"):
        scaled = marked * np.float16(1000)
    assert scaled.dtype is FINITE_FLOAT16 and scaled.flags.writeable and np.isinf(scaled).any()
    assert np.array_equal(widened(scaled).view(np.uint32), scaled.astype(np.float32).view(np.uint32))
    seen = np.broadcast_to(scaled, (2, scaled.size))  # read-only and marked, but a view of a writable array
    assert not seen.flags.writeable and seen.dtype is FINITE_FLOAT16
    assert np.array_equal(widened(seen).view(np.uint32), seen.astype(np.float32).view(np.uint32))


def test_a_float16_checkpoint_is_looked_at_for_infinities_and_nans_once_as_it_is_loaded(tmp_path, monkeypatch):
    """Kept in its bytes, each float16 weight free of infinities and NaNs is marked so (precision.checked_finite)
    and widened without looking again; a weight holding a NaN is not marked, and computes what its upcast does."""
    monkeypatch.setattr(precision_module, "FLOAT16_BITS_MIN", 2)  # this small model's matrices by their bits
    source = write_llama(tmp_path / "f32", n_layer=2, n_embd=32, n_inner=64, vocab_size=300)
    directory = two_byte_copy(source, tmp_path / "f16", stored="F16")
    info = _read_header(directory / "model.safetensors")["model.layers.1.mlp.down_proj.weight"]
    with open(info.file, "r+b") as f:  # one number of layer 1's down projection a NaN: every logit is NaN after it
        f.seek(info.start + 2 * 100)
        f.write(struct.pack("<H", 0x7E00))
    stored, upcast = load_model(directory, weights="stored"), load_model(directory, weights="float32")
    layers = stored.params.layers
    assert layers[0].mlp.down_proj.weight.dtype is FINITE_FLOAT16
    assert layers[0].self_attn.q_proj.weight.dtype is FINITE_FLOAT16
    assert layers[1].mlp.down_proj.weight.dtype == np.float16
    assert layers[1].mlp.down_proj.weight.dtype is not FINITE_FLOAT16
    ids = [5, 17, 200, 3, 99, 42]
    expected = upcast.logits(ids)
    assert np.isnan(expected).all()
    np.testing.assert_array_equal(stored.logits(ids), expected)  # NaN where NaN: not a finite number in its place
    kv = stored.new_cache()  # a decode step's row, its weights widened block by block
    stored.run(ids[:-1], cache=kv)
    assert np.isnan(stored.run(ids[-1:], cache=kv)).all()


def test_widened_float16_keeps_subnormals_in_a_thread_that_reads_them_as_zero():
    """torch.set_flush_denormal(True) sets the calling thread's float arithmetic to read subnormals as zero, which the
    bit path's scaling by 2^112 would turn into zeros: widened sees it and takes NumPy's cast (integer work) there."""
    torch = pytest.importorskip("torch")
    x = EVERY_FLOAT16[: 1 << 15]  # the positive half: zero, 1,023 subnormals, the normals, inf and the NaNs
    expected = x.astype(np.float32)
    assert precision_module._reads_subnormals()
    try:
        if not torch.set_flush_denormal(True):
            pytest.skip("this CPU cannot read subnormals as zero")
        assert np.multiply(precision_module.SUBNORMAL_PROBE, np.float32(1.0))[0] == 0  # the mode is on
        assert not precision_module._reads_subnormals()
        got = widened(x)
    finally:
        torch.set_flush_denormal(False)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), got[1:5]


def test_widened_bfloat16_and_fp8_are_ml_dtypes_casts():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for x in (bits.view(ml_dtypes.bfloat16), bits[:256].astype(np.uint8).view(ml_dtypes.float8_e4m3fn)):
        assert np.array_equal(widened(x).view(np.uint32), x.astype(np.float32).view(np.uint32)), x.dtype


def test_at_bfloat16_a_bfloat16_checkpoint_is_read_in_place(bfloat16_llama):
    model = load_model(bfloat16_llama, precision="bfloat16")
    q = model.params.layers[0].self_attn.q_proj.weight
    assert q.dtype == ml_dtypes.bfloat16 and _memory_mapped(q)


# --- the drift ledger ----------------------------------------------------------------------------------------
def test_the_drift_of_float64_against_itself_is_zero_everywhere():
    model = load_model("demo", dtype="float64")
    d = drift(model, PROMPT, truth=model)
    assert len(d.stages) > 4 * 15 and d.kl == 0.0 and d.kl_max == 0.0 and d.top1_agreement == 1.0
    assert all(s.max_rel == 0.0 and s.rms_rel == 0.0 and not s.overflow for s in d.stages)
    assert d.events == [] and d.to_dict()["overflow"] == []


def test_the_drift_of_bfloat16_is_its_rounding_and_fp8_more():
    drifts = {p: drift(load_model("demo", precision=p), PROMPT) for p in ("bfloat16", "fp8_e4m3")}
    bf16, fp8 = drifts["bfloat16"], drifts["fp8_e4m3"]
    embed = next(s for s in bf16.stages if s.name == "embed")
    # The embedding adds two tables, each rounded to bfloat16 at load, and its sum is rounded: three roundings of at
    # most half a unit (2^-9) of a value each, so at most 3 x 2^-9 of the largest.
    assert 0 < embed.max_rel <= 3 * 2**-9
    assert all(0 < s.max_rel < 0.05 for s in bf16.stages)
    assert max(s.max_rel for s in fp8.stages) > 4 * max(s.max_rel for s in bf16.stages)
    assert 0 < bf16.kl < fp8.kl and bf16.top1_agreement == 1.0
    d = bf16.to_dict()
    assert d["precision"] == "bfloat16" and [layer["layer"] for layer in d["layers"]] == [0, 1, 2, 3]
    assert {"stage", "max_rel", "rms_rel", "max_abs"} <= set(d["layers"][0]["stages"][0]) and d["overflow"] == []


# --- the command line ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["bfloat16", "fp8_e4m3"])
def test_generate_at_a_precision_prints_and_writes_the_drift_and_what_is_held(tmp_path, precision):
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    result = run_cli("generate", PROMPT, "--model", "demo", "--precision", precision, "--json", str(out),
                     "--html", str(page))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"Drift of {precision} against float64" in result.stdout and "Worst stages" in result.stdout
    matrices, embedding = HELD[precision]
    also = f", the token embedding in {embedding}" if embedding else ""
    label = f"{ROUNDING[precision]}; matrices held in {matrices}{also}"
    assert label in result.stdout.splitlines()[0], result.stdout.splitlines()[0]
    assert label in page.read_text()  # the page's header
    document = json.loads(out.read_text())
    drift_json = document["drift"]
    held = {key: document["model"].get(key) for key in ("precision", "weights", "embedding")}
    assert held == {"precision": precision, "weights": matrices, "embedding": embedding}, held
    assert {"precision", "kl", "top1_agreement", "layers", "overflow"} <= set(drift_json)
    assert drift_json["overflow"] == [] and len(drift_json["layers"]) == 4


@pytest.mark.parametrize("args, message", [
    (["generate", PROMPT, "--precision", "bfloat8"], "invalid choice: 'bfloat8'"),
    (["generate", PROMPT, "--precision", "bfloat16", "--dtype", "float64"], "leave out --dtype float64"),
    (["generate", PROMPT, "--precision", "fp8_e4m3", "--weights", "float32"], "leave out --weights"),
    (["trace", PROMPT, "--weights", "stored", "--dtype", "float64"], "--weights is for float32 passes"),
    (["validate", "--precision", "fp8_e5m2"], "invalid choice: 'fp8_e5m2' (choose from 'float32', 'bfloat16', 'float16')"),
])  # fmt: skip
def test_bad_precisions_are_one_line_and_exit_2_with_nothing_written(tmp_path, args, message):
    out = tmp_path / "never.json"
    extra = ["--json", str(out)] if args[0] == "generate" else []
    result = run_cli(*args, "--model", "demo", *extra)
    assert result.returncode == 2 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


def test_the_api_refuses_what_does_not_go_together():
    with pytest.raises(UserError, match="precision must be one of float32, bfloat16, float16, fp8_e4m3, fp8_e5m2"):
        load_model("demo", precision="int8")
    with pytest.raises(UserError, match="measured against float64 itself: leave out dtype float64"):
        load_model("demo", dtype="float64", precision="float16")
    with pytest.raises(UserError, match="weights must be 'auto'"):
        load_model("demo", weights="float16")
    assert isinstance(load_model("demo", precision="bfloat16").precision, Precision)


def test_a_weight_too_large_to_widen_whole_is_widened_a_block_of_columns_at_a_time(bfloat16_llama, monkeypatch):
    from minitransformer.engine import precision

    stored = load_model(bfloat16_llama, weights="stored")
    ids = [5, 17, 200, 3, 99, 42]
    whole = stored.logits(ids)
    monkeypatch.setattr(precision, "WIDEN_BLOCK", 4 * 32 * 50)  # 50 columns of a [32, n] weight a block
    assert len(stored.precision.column_blocks(stored.params.lm_head.weight.T)) == 6  # 300 columns
    blocked = stored.logits(ids)
    # The same products; the BLAS may order a block's float32 sums otherwise than the whole's.
    assert np.abs(blocked - whole).max() <= 1e-6 * np.abs(whole).max()


def test_rows_of_nan_have_no_likeliest_token_to_agree_on():
    """validate --precision float16 on a model that overflowed said "top-1 agree 100%": argmax of a row of NaN is its
    first NaN's index, 0 in both. A row with a NaN has no likeliest token; the others agree as before."""
    from minitransformer.verbs.drift import next_token_drift, top_agreement

    truth = np.array([[1.0, 3.0, 2.0], [0.5, 0.1, 0.2]])
    nan = np.full_like(truth, np.nan)
    assert top_agreement(nan, nan) == 0.0 and top_agreement(truth, truth) == 1.0
    partly = np.array([[2.0, 5.0, 1.0], [np.nan, 0.1, 0.2]])  # row 0 agrees; row 1 has a NaN
    assert top_agreement(partly, truth) == 0.5 and next_token_drift(partly, truth)[2] == 0.5


def test_a_layer_s_range_cell_counts_its_stages_not_a_set_of_their_numbers():
    """The per-layer table's range merged its stages' counts into a sorted set of unnamed numbers ("132 inf/nan, 196
    inf/nan, ..., 96 inf/nan", equal counts of two stages one): now how many stages, and the most values of one."""
    from minitransformer.verbs.drift import StageDrift
    from minitransformer.views.drift_report import _layer_range

    stage = lambda name, **range_: StageDrift(f"blocks.1.{name}", 1, name, 0.0, 0.0, 1.0, **range_)  # noqa: E731
    stages = [stage("ln_1", nonfinite=96), stage("attn.q", nonfinite=96), stage("mlp.up", nonfinite=224),
              stage("mlp.mul", overflow=True, nonfinite=300), stage("mlp.act", underflow=True)]  # fmt: skip
    assert _layer_range(stages) == "overflow, underflow, inf/nan in 3 stages (up to 224 values)"
    assert _layer_range([stage("ln_1")]) == ""


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_a_hook_s_replacement_is_stored_in_the_format_as_the_stage_it_replaces(fmt):
    """The tape rounds a stage to the format before the hooks see it; a hook's replacement went on in float32,
    numbers no stage of the emulated pass could hold. It is rounded as the pass rounds its own (and what the cache
    keeps, and the logits, follow from it)."""
    model = load_model("demo", precision=fmt)
    ids = model.prompt_ids("The capital of France is")
    nudge = np.float32(1e-3)
    names = ["blocks.0.ln_1", "blocks.0.attn.q"]
    with model.add_hook("blocks.0.ln_1", lambda x, name: x + nudge):
        _, cache = model.run_with_cache(ids, names)
    kind = ml_dtypes.bfloat16 if fmt == "bfloat16" else np.float16
    for name in names:
        held = cache[name]
        assert np.array_equal(held.astype(kind).astype(np.float32), held), name  # numbers of the format
    plain = load_model("demo", precision=fmt).run_with_cache(ids, ["blocks.0.ln_1"])[1]["blocks.0.ln_1"]
    expected = (plain + nudge).astype(kind).astype(np.float32)
    assert np.array_equal(cache["blocks.0.ln_1"], expected), np.abs(cache["blocks.0.ln_1"] - expected).max()
