"""The float64 reference mode without transformers: every stage, the KV cache and the logits in the model's dtype,
no float32 number inside a float64 pass, the same ledger, and bad dtypes refused.

tests/families/test_float64_fixtures.py holds the float64 pass to transformers' float64 at 1e-9 and checks validate's columns.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import hf_fixture_dirs, hf_llama_fixture_dirs, run_cli, with_weights_viewed_as
from minitransformer import UserError, load_model
from minitransformer.families.table import PRESETS
from minitransformer.models.model import Model

FIXTURES = {d.name: d for d in [*hf_fixture_dirs(), *hf_llama_fixture_dirs()]}  # every activation, rope type, window


class Float32Alarm(np.ndarray):
    """An array that raises when a float32 (or float16) number takes part in any NumPy operation with it, or comes
    out of one: in a float64 pass, such a number is a table, mask or constant made in float32 that silently rounds
    the pass (NumPy promotes the result to float64, so the stages' dtypes alone would not show it)."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        narrow = [np.asarray(x).dtype for x in inputs if isinstance(x, (np.ndarray, np.generic))]
        if any(dtype in (np.float16, np.float32) for dtype in narrow):
            raise AssertionError(f"a {ufunc.__name__} of {narrow} in a float64 pass")
        plain = [x.view(np.ndarray) if isinstance(x, Float32Alarm) else x for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Float32Alarm) else o for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        results = result if isinstance(result, tuple) else (result,)
        if any(isinstance(r, np.ndarray) and r.dtype in (np.float16, np.float32) for r in results):
            raise AssertionError(f"{ufunc.__name__} made a float32 array in a float64 pass")
        wrapped = tuple(r.view(Float32Alarm) if isinstance(r, np.ndarray) and r.dtype == np.float64 else r
                        for r in results)  # fmt: skip
        return wrapped if isinstance(result, tuple) else wrapped[0]


def test_the_alarm_rings_on_a_float32_table_a_float32_constant_and_a_float32_result():
    x = np.ones(3).view(Float32Alarm)
    for make in (lambda: x * np.ones(3, np.float32), lambda: x * np.float32(2), lambda: np.add(x, 1, dtype=np.float32)):
        with pytest.raises(AssertionError, match="float32|float64 pass"):
            make()
    assert isinstance(x * 2.0 + np.ones(3), Float32Alarm) and isinstance(np.add.reduce(x, axis=-1), np.float64)


@pytest.mark.parametrize("name", FIXTURES)
def test_a_float64_pass_holds_no_float32_number_and_every_stage_is_float64(name):
    model = with_weights_viewed_as(load_model(FIXTURES[name], dtype="float64"), Float32Alarm)
    c = model.config
    assert model.dtype == np.float64
    n = c.n_positions
    ids = np.arange(n) * 7 % c.vocab_size
    logits, captured = model.run_with_cache(ids)
    assert logits.dtype == np.float64 and isinstance(logits, Float32Alarm)
    assert len(captured) == len(model.stage_table.stage_names(c.n_layer)) - 1  # all but `last`
    assert {name: t.dtype for name, t in captured.items() if t.dtype != np.float64} == {}
    cache = model.new_cache()
    assert {k.dtype for k in cache.keys + cache.values} == {np.dtype(np.float64)}
    model.run(ids[: n // 2], cache=cache)
    for token in ids[n // 2 :]:  # decode steps, past a sliding window where there is one
        step, captured = model.run_with_cache([int(token)], kv_cache=cache, all_positions=False)
        assert step.dtype == np.float64 and {t.dtype for t in captured.values()} == {np.dtype(np.float64)}
    sampled = model.generate([1, 2, 3], max_new_tokens=3, stop_at_eos=False, temperature=0.8, top_k=5, seed=1)
    assert len(sampled.new_tokens) == 3


@pytest.mark.parametrize("name", ["tiny", "exact_gelu_layer_scaled", "llama3_mqa_tied", "mistral_window"])
def test_a_float32_pass_stays_float32_stage_by_stage(name):
    """The other half of the rule (test_engine_rules and test_llama_engine_rules ring on any float64 in a float32
    pass): float32 is the default, and so are its cache and every captured stage."""
    model = load_model(FIXTURES[name])
    assert model.dtype == np.float32 and load_model(FIXTURES[name], dtype="float32").dtype == np.float32
    ids = np.arange(model.config.n_positions) % model.config.vocab_size
    logits, captured = model.run_with_cache(ids)
    assert logits.dtype == np.float32 and {t.dtype for t in captured.values()} == {np.dtype(np.float32)}
    assert {k.dtype for k in model.new_cache().keys} == {np.dtype(np.float32)}


@pytest.mark.parametrize("name", ["odd_heads", "llama_gqa_bias", "mistral_window"])
def test_float64_computes_the_same_model_and_is_closer_to_itself_than_float32(name):
    """Same weights (the upcast is exact), same equations: float32 lands within float32 rounding of float64."""
    ours32, ours64 = load_model(FIXTURES[name]), load_model(FIXTURES[name], dtype="float64")
    for a, b in zip(vars(ours32.params).values(), vars(ours64.params).values()):
        if isinstance(a, np.ndarray):
            assert b.dtype == np.float64 and np.array_equal(a, b)
    batch = np.random.default_rng(0).integers(0, ours32.config.vocab_size, (2, ours32.config.n_positions))
    far = np.abs(ours32.logits(batch) - ours64.logits(batch)).max()
    assert 0 < far <= 1e-5 * max(1.0, np.abs(ours64.logits(batch)).max())
    # A row alone and in a batch: one [B*T, n] product against [T, n] may block the sums differently
    assert np.allclose(ours64.logits(batch[1]), ours64.logits(batch)[1], rtol=0, atol=1e-12)


def test_float64_ledger_equals_the_float32_one_but_for_the_dtype_it_names():
    directory = FIXTURES["llama_gqa_bias"]
    one = load_model(directory).generate([5, 6, 7], max_new_tokens=4, stop_at_eos=False)
    other = load_model(directory, dtype="float64").generate([5, 6, 7], max_new_tokens=4, stop_at_eos=False)
    a, b = one.ledger.to_dict(), other.ledger.to_dict()
    assert (a["model"].pop("dtype"), b["model"].pop("dtype")) == ("float32", "float64")
    assert a == b


def test_counting_from_shapes_is_float32_as_before():
    model = Model.without_weights(PRESETS["gpt2"])
    assert model.shape_only and model.dtype == np.float32


@pytest.mark.parametrize("dtype", ["half", "float16", "bfloat16", "float", "Float64", "", None, np.float16, np.int64])
def test_a_dtype_other_than_float32_or_float64_is_refused_naming_both(dtype):
    with pytest.raises(
        UserError, match=r"^dtype must be 'float32' \(the default\) or 'float64' \(the reference\), not"
    ):
        load_model("demo", dtype=dtype)


@pytest.mark.parametrize("dtype", ["float64", np.float64, np.dtype("float64")])
def test_numpy_names_of_float64_are_taken(dtype):
    assert load_model("demo", dtype=dtype).dtype == np.float64


@pytest.mark.parametrize("command", [["generate", "Hi"], ["trace", "Hi"], ["validate"]])
def test_the_commands_refuse_other_dtypes_in_one_line(command):
    result = run_cli(*command, "--model", "demo", "--dtype", "float16")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"minitransformer: error: argument --dtype: invalid choice: 'float16' "
                                          f"(choose from 'float32', 'float64') (see minitransformer {command[0]} "
                                          f"--help)"]  # fmt: skip
    assert "or float64, the reference: every stage" in " ".join(run_cli(command[0], "--help").stdout.split())


def test_count_keeps_its_own_dtype_the_bytes_a_number():
    assert run_cli("count", "--preset", "gpt2", "--tokens", "4", "--dtype", "bfloat16").returncode == 0
    refused = run_cli("count", "--preset", "gpt2", "--tokens", "4", "--dtype", "float64")
    assert refused.returncode == 2 and "invalid choice: 'float64'" in refused.stderr


def test_generate_and_trace_in_float64_on_the_command_line():
    import json

    expected = load_model("demo-llama", dtype="float64").generate("The capital of France is", max_new_tokens=3)
    result = run_cli("generate", "The capital of France is", "--model", "demo-llama", "--max-new-tokens", "3",
                     "--dtype", "float64", "--json", "-")  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["model"]["dtype"] == "float64" and doc["new_tokens"] == expected.new_tokens
    assert "(weights: minitransformer/data/demo-llama; computed in float64)" in result.stderr.splitlines()[0]
    assert doc["candidates"][0]["probability"] == expected.candidates[0].probability

    traced = run_cli("trace", "The capital of France is", "--model", "demo-llama", "--dtype", "float64",
                     "--new-tokens", "3")  # fmt: skip
    assert traced.returncode == 0, traced.stderr
    assert "computed in float64" in traced.stdout.splitlines()[0]
    assert traced.stdout.rstrip().endswith(f"greedy continuation {expected.text!r}")
    plain = run_cli("trace", "The capital of France is", "--model", "demo-llama", "--new-tokens", "1")
    assert "computed in" not in plain.stdout  # float32, the default, goes unsaid
