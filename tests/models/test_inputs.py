"""What the Python API takes as token ids and prompts, and the one-line UserError for everything else."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from conftest import run_cli
from minitransformer import UserError, load_tokenizer
from minitransformer.cli import main
from minitransformer.views.trace import trace

tok = load_tokenizer()

# Each wrong way to give token ids, and the words the refusal must contain.
BAD_IDS = {
    "ragged rows": ([[1, 2], [3]], "same length, not 1 and 2"),
    "ids mixed with a row": ([[1, 2], 3], "mix numbers and lists"),
    "nested three deep": ([[[1, 2]]], "nest at most two deep"),
    "whole floats": ([1.0, 2.0], "integers, not float (1.0)"),
    "fractional floats": ([1.5], "integers, not float (1.5)"),
    "float array": (np.array([1, 2], np.float32), "not an array of float32"),
    "object array": (np.array([1, 2], object), "not an array of object"),
    "strings": (["a", "b"], "integers, not str ('a')"),
    "text": ("abc", "not str; encode text"),
    "bytes": (b"abc", "not bytes"),
    "None": (None, "not NoneType"),
    "a bare int": (5, "not int"),
    "a set": ({1, 2}, "not set"),
    "bools": ([True, False], "integers, not bool (True)"),
    "an id and a bool": ([1, True], "integers, not bool (True)"),
    "bool array": (np.array([1, 0], bool), "not an array of bool"),
    "complex": ([1j], "integers, not complex"),
    "beyond int64": ([2**70], f"token id {2**70} is outside"),
    "below int64": ([-(2**70)], f"token id {-(2**70)} is outside"),
    "uint64 beyond the vocabulary": (np.array([2**63 + 5], np.uint64), f"token id {2**63 + 5} is outside"),
    "negative": ([3, -1], "token id -1 is outside"),
    "3-d array": (np.zeros((1, 1, 2), int), "not 3-dimensional"),
    "0-d array": (np.array(3), "not 0-dimensional"),
}
EMPTY_IDS = {"empty list": [], "empty row": [[]], "zero rows": np.zeros((0, 3), int)}


def _entry_points(model):
    return {
        "logits": model.logits,
        "run": model.run,
        "run_with_cache": lambda ids: model.run_with_cache(ids, names="logits"),
        "check_ids": model.check_ids,
    }


@pytest.mark.parametrize("case", BAD_IDS, ids=str)
def test_every_forward_entry_point_refuses_bad_ids_with_a_user_error(case, small_gpt2):
    ids, needle = BAD_IDS[case]
    for name, entry in _entry_points(small_gpt2).items():
        with pytest.raises(UserError) as refused:
            entry(ids)
        assert needle in str(refused.value), (name, str(refused.value))
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("case", EMPTY_IDS, ids=str)
def test_no_ids_at_all_is_refused(case, small_gpt2):
    for entry in _entry_points(small_gpt2).values():
        with pytest.raises(UserError, match="non-empty"):
            entry(EMPTY_IDS[case])


# The prompt of generate and trace is one sequence: text, or ids in any of the forms above.
BAD_PROMPTS = {**{k: v for k, v in BAD_IDS.items() if k not in ("text", "bytes", "None", "ragged rows",
                                                                  "ids mixed with a row", "nested three deep")},
               "bytes": (b"abc", "text (a str) or a list of token ids, not bytes"),
               "None": (None, "text (a str) or a list of token ids, not NoneType"),
               "a batch": ([[1, 2]], "not 2-dimensional")}  # fmt: skip


BATCHES = ("strings", "a batch")  # several prompts: generate runs them as a batch (test_batch.py); trace refuses


@pytest.mark.parametrize("case", BAD_PROMPTS, ids=str)
def test_generate_and_trace_refuse_a_bad_prompt_with_a_user_error(case, small_gpt2):
    prompt, needle = BAD_PROMPTS[case]
    out = io.StringIO()
    entries = {"generate": lambda: small_gpt2.generate(prompt, max_new_tokens=1),
               "trace": lambda: trace(small_gpt2, prompt, out=out)}  # fmt: skip
    if case in BATCHES:
        assert len(entries.pop("generate")()) == len(prompt)
    for name, entry in entries.items():
        with pytest.raises(UserError) as refused:
            entry()
        assert needle in str(refused.value), (name, str(refused.value))
    assert out.getvalue() == ""  # refused before the first line of the trace


def _ids_once(values):
    yield from values


def test_ids_in_every_accepted_form_give_the_same_logits(small_gpt2):
    ids = [464, 3139, 286]
    expected = small_gpt2.logits(ids)
    same = [tuple(ids), _ids_once(ids), [np.int32(464), np.uint16(3139), np.int64(286)], np.array(ids, np.uint16),
            np.array(ids, np.int32)]  # fmt: skip
    for form in same:
        assert np.array_equal(small_gpt2.logits(form), expected), type(form)
    assert np.array_equal(small_gpt2.logits(range(5)), small_gpt2.logits([0, 1, 2, 3, 4]))
    batch = small_gpt2.logits([ids, ids[::-1]])
    # A batch's row is the prompt alone up to float32's rounding: the BLAS may sum a product of 6 rows in another
    # order than one of 3 (this AMD EPYC's OpenBLAS does, by a unit or two in the last place).
    assert batch.shape == (2, 3, 50257) and np.abs(batch[0] - expected).max() <= 1e-6 * np.abs(expected).max()
    assert np.array_equal(small_gpt2.logits(np.array([ids, ids[::-1]])), batch)


def test_a_generator_prompt_is_read_once_and_continued(small_gpt2):
    """It used to be consumed by the decode of the prompt text, leaving an 'empty' prompt."""
    ids = [464, 3139, 286, 4881, 318]
    expected = small_gpt2.generate(ids, max_new_tokens=3)
    result = small_gpt2.generate(_ids_once(ids), max_new_tokens=3)
    assert result.prompt_tokens == ids and result.new_tokens == expected.new_tokens
    assert result.prompt == "The capital of France is"
    traced = trace(small_gpt2, _ids_once(ids), new_tokens=2, out=io.StringIO())
    assert traced.prompt_tokens == ids and traced.new_tokens == expected.new_tokens[:2]


@pytest.mark.parametrize("case", [c for c in BAD_IDS if c not in ("ragged rows", "ids mixed with a row",
                                                                    "nested three deep", "3-d array")], ids=str)  # fmt: skip
def test_decode_refuses_what_is_not_a_list_of_ids(case):
    ids, needle = BAD_IDS[case]
    with pytest.raises(UserError) as refused:
        tok.decode(ids)
    assert needle in str(refused.value), str(refused.value)


def test_a_tokenizer_file_s_decode_refuses_what_is_not_an_id():
    """A model's own tokenizer.json (the Llama demo's) read 1.5 as 1 and -1 as an OverflowError; an id past its
    vocabulary (a model's padded rows) is empty text, as the tokenizers library gives it."""
    from minitransformer import load_model

    llama = load_model("demo-llama").tokenizer
    for ids, needle in (([1.5], "integers, not float (1.5)"), ([-1], "token id -1 is negative: token ids are 0 or more"),
                        ("12", "not str"), ([2**70], "larger than token ids can be"),
                        (np.array([-3]), "token id -3 is negative")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(needle)):
            llama.decode(ids)  # the range was said as 0..9223372036854775806
    assert llama.decode([llama.vocab_size + 3]) == "" and llama.decode(np.array([5], np.int16)) == llama.decode([5])


def test_decode_of_a_negative_id_is_refused_not_read_from_the_end_of_the_table():
    """table[-1] is <|endoftext|>: a negative id used to decode as the last token."""
    with pytest.raises(UserError, match=r"token id -1 is outside the GPT-2 vocabulary \(0..50256\)"):
        tok.decode([-1])
    with pytest.raises(UserError, match="token id -50257 is outside"):
        tok.token_str(-50257)
    assert tok.decode([]) == "" and tok.decode(np.array([464, 3290], np.int16)) == "The dog"
    assert tok.decode(_ids_once([464, 3290])) == "The dog"


# --- text that is not text ------------------------------------------------------------------------------
NOT_UTF8 = {
    # what Python makes of the bytes b"caf\xe9" in a command-line argument or os.fsdecode
    "a Latin-1 byte": ("caf\udce9", "has a byte that is not UTF-8 (0xe9 at byte 3)"),
    "after wide characters": ("日本🤖\udcff!", "(0xff at byte 10)"),
    "a lone high surrogate": ("ab\ud800", "has a lone surrogate (U+D800 at character 2)"),
    "a low one that no byte makes": ("\udc41", "lone surrogate (U+DC41 at character 0)"),
    "a UTF-16 pair": ("\ud83e\udd16", "lone surrogate (U+D83E at character 0)"),
}


@pytest.mark.parametrize("case", NOT_UTF8, ids=str)
def test_encode_refuses_text_with_no_utf8_bytes_naming_the_byte_or_code_point(case, small_gpt2):
    text, needle = NOT_UTF8[case]
    with pytest.raises(UserError) as refused:
        tok.encode(text)
    assert str(refused.value).startswith("the text ") and needle in str(refused.value)
    for entry in (
        lambda: small_gpt2.generate(text, max_new_tokens=1),
        lambda: trace(small_gpt2, text, out=io.StringIO()),
    ):
        with pytest.raises(UserError) as refused:
            entry()
        assert str(refused.value).startswith("the prompt ") and needle in str(refused.value)


@pytest.mark.parametrize("not_text", [b"caf\xc3\xa9", None, 42, ["a"]], ids=repr)
def test_encode_takes_only_a_str(not_text):
    with pytest.raises(UserError, match=f"the text must be a str, not {type(not_text).__name__}"):
        tok.encode(not_text)


@pytest.mark.parametrize("command", ["generate", "trace"])
def test_a_command_line_prompt_that_is_not_utf8_gets_a_one_line_answer(command, small_gpt2_dir):
    result = run_cli(command, b"caf\xe9 au lait", "--model", str(small_gpt2_dir))
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == ("minitransformer: error: the prompt has a byte that is not UTF-8 (0xe9 at byte 3); give "
                             "it as UTF-8 text (from Latin-1, for example: iconv -f latin1 -t utf-8)\n")  # fmt: skip


# --- numbers and words the command line takes -------------------------------------------------------------
def test_a_broadcast_batch_is_checked_once_not_row_by_row(small_gpt2):
    """count --batch 1000000000 spent minutes scanning a billion identical rows of ids for each pass."""
    import time

    from minitransformer import Model

    ids = np.broadcast_to(np.array([5, 7, 9]), (10**9, 3))
    start = time.perf_counter()
    assert Model.without_weights(small_gpt2.config).check_ids(ids).shape == (10**9, 3)
    assert time.perf_counter() - start < 0.1
    with pytest.raises(UserError, match="token id 50257 is outside"):
        small_gpt2.check_ids(np.broadcast_to(np.array([5, 50257]), (10**9, 2)))
    assert main(["count", "--layers", "2", "--d-model", "16", "--heads", "2", "--tokens", "3", "--new-tokens", "20",
                 "--batch", str(10**9)]) == 0  # fmt: skip
    assert time.perf_counter() - start < 5


BEYOND = "is more than a tensor of NumPy's can hold (2**62)"  # one size past 2**62, refused as it is read


@pytest.mark.parametrize("sizes, needle", [
    # one size past 2**62 (a head's width of 10**21 ended in an OverflowError in the rotary tables)
    (["--d-model", str(10**20), "--heads", "1"], f"config n_embd={10**20} {BEYOND}"),
    (["--d-model", "4", "--heads", "1", "--vocab", str(10**20)], f"config vocab_size={10**20} {BEYOND}"),
    (["--d-model", "4", "--heads", "1", "--ctx", str(10**20)], f"config n_positions={10**20} {BEYOND}"),
    (["--d-model", "64", "--heads", "4", "--head-dim", str(10**21)], f"config head_dim={10**21} {BEYOND}"),
    # each size within it, the largest tensor past it: W_te [V, D] and the MLP [D, F = 4D], or the logits [batch, t, V]
    (["--d-model", str(2**40), "--heads", "1"], f"a tensor of {2**40 * 4 * 2**40:,} elements, more than NumPy"),
    (["--d-model", "4", "--heads", "1", "--vocab", str(2**61)], f"a tensor of {4 * 2**61:,} elements"),
    (["--d-model", "4", "--heads", "1", "--batch", str(2**62)], f"a tensor of {2**62 * 4 * 50257:,} elements"),
])  # fmt: skip
def test_count_refuses_sizes_whose_tensors_numpy_cannot_describe(sizes, needle, capsys):
    """These ended in NumPy's OverflowError or "iterator is too large", even though nothing is computed."""
    assert main(["count", "--layers", "1", "--tokens", "3", *sizes]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and needle in captured.err


def test_count_just_inside_the_limit_still_counts(capsys):
    batch = 2**62 // (4 * 50257)  # [batch, t = 4, V = 50257] logits: the largest tensor, just under 2**62
    assert (
        main(["count", "--layers", "1", "--d-model", "4", "--heads", "1", "--tokens", "3", "--batch", str(batch)]) == 0
    )
    assert "Total:" in capsys.readouterr().out


def test_an_error_that_quotes_a_line_break_stays_one_line(capsys):
    """argparse quotes unrecognised arguments as they are; a newline in one split the message in two."""
    assert main(["trace", "Hi", "one\nmore\rline\x1b[31m"]) == 2  # (generate takes several prompts)
    err = capsys.readouterr().err
    assert (
        err
        == "minitransformer: error: unrecognized arguments: one\\nmore\\rline\\x1b[31m (see minitransformer trace --help)\n"
    )


BAD_CHOICES = {
    "candidates below 0": (dict(candidates=-1), "candidates (next tokens listed) must be a whole number >= 0"),
    "fractional candidates": (dict(candidates=1.5), "not 1.5"),
    "candidates as text": (dict(candidates="3"), "not '3'"),
    "attention as text": (dict(attention="x"), "attention layers must be a block number or a list"),
    "attention as a bool": (dict(attention=True), "not True"),
    "attention past the last block": (dict(attention=99), "attention layers must be block numbers among 0..1"),
    "attention with a float": (dict(attention=[0, 1.0]), "not [0, 1.0]"),
    "top_k of 0": (dict(top_k=0), "top_k must be a whole number of at least 1"),
    "seed below 0": (dict(seed=-1), "seed must be a whole number of 0 or more"),
    "on_token not a function": (dict(on_token=5), "on_token must be a function of (token_id, text), not 5"),
}


@pytest.mark.parametrize("case", BAD_CHOICES)
def test_generate_refuses_each_bad_choice_with_a_user_error(case, small_gpt2):
    options, needle = BAD_CHOICES[case]
    with pytest.raises(UserError, match=re.escape(needle)):
        small_gpt2.generate([1, 2], max_new_tokens=1, **options)


def test_generate_takes_zero_candidates_and_attention_of_no_layers(small_gpt2):
    result = small_gpt2.generate([1, 2], max_new_tokens=1, candidates=0, attention=[])
    assert result.candidates == [] and result.attention.weights == {}
    listed = small_gpt2.generate([1, 2], max_new_tokens=1, candidates=3, attention=np.int64(1))
    assert len(listed.candidates) == 3 and list(listed.attention.weights) == [1]


@pytest.mark.parametrize("layers, needle", [(["a"], "not ['a']"), ([2], "among 0..1"), ("all", "not 'all'"),
                                            ([1.0], "not [1.0]"), (True, "not True")])  # fmt: skip
def test_trace_refuses_layers_that_are_not_block_numbers(layers, needle, small_gpt2):
    with pytest.raises(UserError, match=re.escape(needle)):
        trace(small_gpt2, [1, 2], layers=layers, out=io.StringIO())


# --- generation options: one frozen value, checked once when it is made ----------------------------------------------
BAD_OPTIONS = {
    "max_new_tokens": (0, "max_new_tokens must be a whole number of at least 1, not 0"),
    "temperature": (float("nan"), "temperature must be a finite number >= 0 (0 is greedy), not nan"),
    "top_k": (2.0, "top_k must be a whole number of at least 1, not 2.0; leave it out to sample from every token"),
    "seed": (True, "seed must be a whole number of 0 or more, not True"),
    "candidates": (-1, "candidates (next tokens listed) must be a whole number >= 0, not -1"),
    "use_cache": ("no", "use_cache must be True or False, not 'no'"),  # ran with the cache, "cached": "no" written
    "stop_at_eos": (1, "stop_at_eos must be True or False, not 1"),
    "ledger": (None, "ledger must be True or False, not None"),
}


@pytest.mark.parametrize("option", BAD_OPTIONS)
def test_an_option_is_refused_once_by_name_and_a_caller_can_rename_it(option):
    from minitransformer.verbs.options import GenerationOptions, OptionError

    value, message = BAD_OPTIONS[option]
    with pytest.raises(OptionError) as refused:
        GenerationOptions(**{option: value})
    assert str(refused.value) == message and refused.value.option == option
    flag = "--" + option.replace("_", "-")
    renamed = refused.value.named({option: flag})
    assert isinstance(renamed, UserError) and str(renamed) == flag + message.removeprefix(option)
    assert str(refused.value.named({})) == message  # an option the caller does not rename keeps its API name


def test_numpy_s_numbers_are_numbers_to_every_option(small_gpt2):
    """np.float32(0.5) was refused as "not np.float32(0.5)", a temperature's, and np.int64 a count's tokens."""
    from minitransformer.verbs.count import count_generation
    from minitransformer.verbs.options import GenerationOptions

    options = GenerationOptions(temperature=np.float32(0.5), use_cache=np.bool_(False))
    assert type(options.temperature) is float and options.temperature == 0.5, options
    sampled = [
        small_gpt2.generate([1, 2], max_new_tokens=3, temperature=t, seed=7).new_tokens for t in (0.5, np.float32(0.5))
    ]
    assert sampled[0] == sampled[1], sampled
    sizes = ((5, 3, 2), (np.int64(5), np.int32(3), np.int8(2)))
    counts = [count_generation(small_gpt2.config, T, n, batch=B) for T, n, B in sizes]
    assert counts[0].ledger().to_dict() == counts[1].ledger().to_dict() and type(counts[1].n_prompt) is int


def test_the_options_are_frozen_and_a_count_makes_the_same_ones():
    from dataclasses import FrozenInstanceError, replace

    from minitransformer.verbs.options import GenerationOptions

    options = GenerationOptions(max_new_tokens=3)
    with pytest.raises(FrozenInstanceError):
        options.max_new_tokens = 0  # type: ignore[misc]
    with pytest.raises(UserError, match="max_new_tokens"):
        replace(options, max_new_tokens=0)  # a changed copy is checked again


def test_the_command_checks_the_prompts_and_the_options_once(small_gpt2_dir, monkeypatch, capsys):
    """generate's command reads and checks its prompts and options before its first line of output, and hands them to
    the generation loop as they are: nothing is checked a second time on the way."""
    from minitransformer.models.model import Model
    from minitransformer.verbs import options as options_module

    rows_checked, options_checked = [], []
    prompt_rows, check = Model.prompt_rows, options_module.GenerationOptions.__post_init__

    def counted_rows(self, prompts, *args, **kwargs):
        rows_checked.append(prompts)
        return prompt_rows(self, prompts, *args, **kwargs)

    def counted_check(self):
        options_checked.append(self)
        check(self)

    monkeypatch.setattr(Model, "prompt_rows", counted_rows)
    monkeypatch.setattr(options_module.GenerationOptions, "__post_init__", counted_check)
    for prompts in (["Hello"], ["Hello", "The capital"]):
        rows_checked.clear(), options_checked.clear()
        assert main(["generate", *prompts, "--model", str(small_gpt2_dir), "--max-new-tokens", "2"]) == 0
        assert rows_checked == [prompts]
        # the command's options once; the other options checked are the count's of the same run without the cache
        assert [o.use_cache for o in options_checked].count(True) == 1 and options_checked[0].use_cache
        assert all(o.max_new_tokens == 2 for o in options_checked)
    capsys.readouterr()


# --- loading and running: one frozen value each; a rule about options that go together names each of them ---------
LOAD_REFUSALS = {
    "a precision over float64": (
        dict(dtype="float64", precision="bfloat16"),
        "precision bfloat16 is emulated over float32 passes and measured against float64 itself: leave out dtype "
        "float64",
        "--precision bfloat16 is emulated over float32 passes and measured against float64 itself: leave out --dtype "
        "float64",
    ),
    "weights kept over float64": (
        dict(dtype=np.float64, weights="stored"),
        "weights is for float32 passes; dtype float64 upcasts every weight at load: leave out weights",
        "--weights is for float32 passes; --dtype float64 upcasts every weight at load: leave out --weights",
    ),
    "weights upcast at a precision": (
        dict(precision="fp8_e4m3", weights="float32"),
        "weights float32 upcasts at load for float32 products; at precision fp8_e4m3 the weights are held in its "
        "format: leave out weights",
        "--weights float32 upcasts at load for float32 products; at --precision fp8_e4m3 the weights are held in its "
        "format: leave out --weights",
    ),
}


@pytest.mark.parametrize("case", LOAD_REFUSALS)
def test_a_refusal_of_options_that_go_together_names_each_as_its_caller_knows_it(case):
    from minitransformer.cli import FLAGS
    from minitransformer.errors import OptionError
    from minitransformer.models.options import LoadOptions

    options, api, command = LOAD_REFUSALS[case]
    with pytest.raises(OptionError) as refused:
        LoadOptions(**options)
    assert (str(refused.value), str(refused.value.named(FLAGS))) == (api, command)


def test_every_option_a_command_takes_is_named_by_its_flag_and_the_run_options_are_checked():
    """The CLI's one table of flags names every option of the groups it makes from its flags (those a person can
    set there), so that no refusal reaches a person in the API's words; RunOptions refuses a routing it does not know
    when it is made, not deep in a pass."""
    from dataclasses import fields

    from minitransformer.cli import FLAGS
    from minitransformer.errors import OptionError
    from minitransformer.models.options import LoadOptions, RunOptions
    from minitransformer.verbs.options import GenerationOptions

    unset = {"use_cache", "stop_at_eos", "ledger", "running"}  # never refused, or not a flag of their own
    names = {f.name for group in (LoadOptions, RunOptions, GenerationOptions) for f in fields(group)} - unset
    assert names <= set(FLAGS), sorted(names - set(FLAGS))
    with pytest.raises(OptionError) as refused:
        RunOptions(routing="best")
    assert str(refused.value) == "routing 'best' is not known (known: balanced, worst)"
    assert LoadOptions(dtype=np.dtype("float64")) == LoadOptions(dtype="float64")  # NumPy's names read as the one name


def test_a_cache_is_checked_to_be_this_model_s_for_these_ids(small_gpt2, tmp_path):
    """Another model's cache was read as this one's: a shape-only model's gave a real one shape-only logits, a float64
    model's float64 logits; a batch's cache with one prompt's ids, a NumPy broadcasting error; a dict, an
    AttributeError."""
    from minitransformer import load_model
    from minitransformer.models.model import Model
    from minitransformer.models.options import RunOptions

    ids = [464, 3139, 286]
    wrong = {
        "a shape-only twin's": (Model.without_weights(small_gpt2.config).new_cache(), "made by another model"),
        "a float64 model's": (load_model(small_gpt2.source, dtype="float64").new_cache(), "made by another model"),
        "another model's layers": (load_model("demo").new_cache(), "made by another model"),
        "a batch's": (small_gpt2.new_cache(2), "holds a batch of shape (2,), the ids are one prompt"),
        "a dict": ({}, "cache must be one this model made (model.new_cache()), not dict"),
    }
    for name, (cache, says) in wrong.items():
        with pytest.raises(UserError, match=re.escape(says)):
            small_gpt2.run(ids, cache=cache)
            pytest.fail(f"{name} cache was taken")
    kv = small_gpt2.new_cache()
    taken, whole = small_gpt2.run(ids, cache=kv), small_gpt2.logits(ids)[-1:]  # its own is taken
    assert np.allclose(taken, whole, atol=1e-5), abs(taken - whole).max()
    assert small_gpt2.run([ids, ids], cache=small_gpt2.new_cache(np.int64(2))).shape == (
        2,
        1,
        small_gpt2.config.vocab_size,
    )
    for kwargs, says in ((dict(batch=(0,)), "batch must be a number of rows"), (dict(batch="2"), "not '2'"),
                         (dict(capacity=-1), "capacity must be a whole number of positions, 0 or more, not -1")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(says)):
            small_gpt2.new_cache(**kwargs)
    # NumPy's MemoryError (more than the machine has) and ValueError (more than any array can be) were tracebacks
    for kwargs, says in ((dict(capacity=10**12), "a cache of 1,000,000,000,000 positions does not fit in memory"),
                         (dict(batch=10**9, capacity=10**9), "positions of 1000000000 rows does not fit in memory")):  # fmt: skip
        with pytest.raises(UserError) as refused:
            small_gpt2.new_cache(**kwargs)
        assert says in str(refused.value) and "context is " in str(refused.value), str(refused.value)
    with pytest.raises(UserError, match=re.escape("pads must leave each row a token: fewer than its 2 slots")):
        small_gpt2.run([[1, 2], [3, 4]], pads=[2, 0])
    with pytest.raises(UserError, match=re.escape("options must be a RunOptions")):
        small_gpt2.run(ids, options=None)
    assert small_gpt2.run(ids, options=RunOptions(dense_attention=True)).shape == (1, small_gpt2.config.vocab_size)


def wrong_objects(model) -> dict:
    """What each entry point is given that is not what it takes, and the words it must say: each ended in an
    AttributeError, a KeyError, an IndexError or NumPy's "negative dimensions" before."""
    from minitransformer import drift
    from minitransformer.models.model import Model
    from minitransformer.verbs.count import count_generation, count_passes, decode_at
    from minitransformer.verbs.draft import count_drafts
    from minitransformer.verbs.lens import count_lens
    from minitransformer.verbs.roofline import roofline

    c, P = model.config, "The capital of France is"
    counted, stream = count_generation(c, 5, 2), np.zeros((5, c.n_embd), np.float32)
    takes_a_count = "roofline takes a count (count_generation(config, ...))"
    return {
        "decode_at(config, 0)": (lambda: decode_at(c, 0), "context must be a whole number of positions, 1 to"),
        "decode_at past the context": (lambda: decode_at(c, c.n_positions + 1), f"not {c.n_positions + 1}"),
        "decode_at(model, 3)": (lambda: decode_at(model, 3), "decode_at counts a model's config"),
        "decode_at batch 0": (lambda: decode_at(c, 3, 0), "batch must be a whole number of at least 1, not 0"),
        "count_lens(config, -3)": (lambda: count_lens(c, -3), "tokens must be a whole number of at least 1, not -3"),
        "roofline on no machine": (lambda: roofline(counted, None), "no hardware named None; choose one of h100-sxm"),
        "roofline of a ledger": (lambda: roofline(count_passes(model, 5, 2), "h200"), takes_a_count),
        "roofline of None": (lambda: roofline(None, "h200"), takes_a_count),
        "roofline in fp8": (lambda: roofline(counted, "h200", "fp8"), "dtype must be one of float32, bfloat16"),
        "count_drafts(None)": (lambda: count_drafts(None), "count_drafts takes a count"),
        "drift of a name": (lambda: drift("demo", P), "drift measures a Model (load_model(...)) against a Model"),
        "drift against another model": (lambda: drift(model, P, truth=Model.without_weights(c.prefix(1))),
                                        "the truth must be the same model (its config) in float64"),
        "without_weights({})": (lambda: Model.without_weights({}), "without_weights takes a model's config"),
        "without_weights(model)": (lambda: Model.without_weights(model), "without_weights takes a model's config"),
        "a shape-only model's generate": (lambda: Model.without_weights(c).generate(P),
                                          "a shape-only model (Model.without_weights) has no numbers"),
        "the cache's layer past the last": (lambda: model.new_cache().layer(c.n_layer), f"0 to {c.n_layer - 1} (or"),
        "the cache's layer '0'": (lambda: model.new_cache().layer("0"), "not '0'"),
        "a batch with a None": (lambda: model.generate([P, None]), "prompt 2 of the 2 is None"),
        "readout of a list": (lambda: model.readout(stream.tolist()), "the stream must be a float32 array"),
        "readout of one position": (lambda: model.readout(stream[0]), f"[..., T, {c.n_embd}]"),
        "readout of whole numbers": (lambda: model.readout(stream.astype(int)), "int64"),
    }  # fmt: skip


def test_every_entry_point_refuses_the_wrong_object_in_words(small_gpt2):
    for name, (call, says) in wrong_objects(small_gpt2).items():
        with pytest.raises(UserError, match=re.escape(says)):
            call()
            pytest.fail(f"{name} was taken")
    kv, names = small_gpt2.new_cache(), {"embed": 1, "blocks.0.attn.qkv": 2}
    assert kv.layer(-1) is kv.layer(small_gpt2.config.n_layer - 1) and kv.layer(np.int64(0)) is kv.layer(0)
    for taken in (names.keys(), frozenset(names), (n for n in names), np.array(list(names))):  # any collection
        _, captured = small_gpt2.run_with_cache([464, 3139], names=taken)
        assert set(captured) == set(names), (taken, set(captured))
        small_gpt2.add_hook(taken, lambda t, n: None).remove()
