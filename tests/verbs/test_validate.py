"""validate on every fixture model: the built-in prompts cut to fit each context, and --steps checked."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

from conftest import hf_fixture_dirs, hf_llama_fixture_dirs

pytest.importorskip("torch", reason="validate compares with torch and transformers (the [hf] extra)")
pytest.importorskip("transformers", reason="validate compares with torch and transformers (the [hf] extra)")

from minitransformer import UserError, load_model, load_tokenizer  # noqa: E402
from minitransformer.cli import main  # noqa: E402
from minitransformer.verbs.validate import PROMPTS, check_validated, validate  # noqa: E402

# tokens, max |dlogit|, allowed, greedy agree, then each float32 pass against the float64 truth, whose is closer
ROW = re.compile(r"(\d+(?: of \d+)?)\s+\S+\s+\S+\s+(\d+/\d+)\s+\S+\s+\S+\s+(?:ours|theirs|tie)\s+(OK|NOT OK)$")


@pytest.mark.parametrize("directory", hf_fixture_dirs(), ids=lambda d: d.name)
def test_validate_fits_the_prompts_to_every_fixture_context(directory):
    """7 of the 8 fixtures have a context shorter than the longest built-in prompt (30 tokens): each
    prompt is cut to leave room for the greedy steps, and the table says so."""
    model = load_model(directory)
    steps, n = 8, model.config.n_positions
    out = io.StringIO()
    assert validate(model, steps=steps, out=out) is True, out.getvalue()
    lines = out.getvalue().splitlines()
    rows = [ROW.search(line) for line in lines if ROW.search(line)]
    room = n - steps + 1  # the prompt and its steps take room + steps - 1 positions: the last token is never fed
    lengths = [len(load_tokenizer().encode(p)) for p in PROMPTS]
    expected = [str(k) if k <= room else f"{room} of {k}" for k in lengths]
    assert [r.group(1) for r in rows] == expected
    assert [r.group(2) for r in rows] == [f"{steps}/{steps}"] * len(PROMPTS)
    assert lines[-1] == "all OK"
    note = f"{room} of N tokens: the prompt was cut to its first {room} so that it and 8 greedy steps fit " \
           f"{model.name}'s context of {n} positions"  # fmt: skip
    assert (note in lines) == (max(lengths) > room)


def test_the_cut_leaves_exactly_the_room_the_steps_need():
    model = load_model(min(hf_fixture_dirs(), key=lambda d: load_model(d).config.n_positions))
    n = model.config.n_positions
    out = io.StringIO()
    assert validate(model, steps=n, out=out)  # a 1-token prompt and n steps take n positions
    assert [ROW.search(line).group(1) for line in out.getvalue().splitlines() if ROW.search(line)] == [
        f"1 of {len(load_tokenizer().encode(p))}" for p in PROMPTS
    ]
    assert f"so that it and {n} greedy steps fit" in out.getvalue()


@pytest.mark.parametrize("steps, needle", [("0", "at least 1, not 0"), ("-1", "at least 1, not -1"),
                                           ("13", "13 greedy steps leave no room for a prompt in one_head_silu's "
                                                  "context of 12 positions; use at most 12 steps")])  # fmt: skip
def test_steps_that_compare_nothing_or_leave_no_prompt_are_refused(steps, needle, capsys):
    """--steps 0 and -1 used to report "all OK" over nothing compared."""
    directory = next(d for d in hf_fixture_dirs() if d.name == "one_head_silu")  # context 12
    assert main(["validate", "--model", str(directory), "--steps", steps]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured
    assert lines[0].startswith("minitransformer: error: ") and needle in lines[0]
    with pytest.raises(UserError, match="steps"):
        validate(load_model(directory), steps=int(steps), out=io.StringIO())


def test_validate_on_the_command_line_prints_nothing_on_stderr(capsys):
    """transformers' "Loading weights" progress bar is silenced: stderr is for notices and errors."""
    directory = next(d for d in hf_fixture_dirs() if d.name == "tanh_sharded")
    assert main(["validate", "--model", str(directory), "--steps", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.rstrip().endswith("all OK")
    assert "15 of 30" in captured.out and "15 of N tokens" in captured.out  # context 16: 15 + 2 - 1 positions


def test_an_empty_prompt_is_refused():
    model = load_model(hf_fixture_dirs()[0])
    with pytest.raises(UserError, match="empty"):
        validate(model, prompts=[""], out=io.StringIO())


@pytest.mark.parametrize("kwargs, says", [
    (dict(model=None), "validate checks a Model (load_model(...)), not None"),
    (dict(prompts=None), "prompts must be a non-empty list of texts ([text] for one), not None"),  # a TypeError
    (dict(prompts="Hello"), "not 'Hello'"),  # read letter by letter: five prompts of one letter each
    (dict(prompts=[]), "not []"),  # compared nothing and said "all OK"
    (dict(prompts=["Hi", [464, 3139]]), "prompts must be texts (validate encodes each), not [464, 3139]"),
    (dict(prompts=[None]), "not None"),  # each an AttributeError after the header was printed
    (dict(out=5), "out must be something to write to"), (dict(out="log.txt"), "not 'log.txt'"),  # AttributeErrors
    (dict(tolerance="1e-4"), "tolerance must be a number >= 0 (relative to max |logit|) or None, not '1e-4'"),
    (dict(tolerance=-1.0), "not -1.0"), (dict(tolerance=float("nan")), "not nan"), (dict(tolerance=True), "not True"),
])  # fmt: skip
def test_what_validate_cannot_compare_with_is_refused_before_any_work(kwargs, says):
    out = io.StringIO()
    call = {"model": load_model("demo"), "steps": 1, "prompts": ["Hi"], "out": out, **kwargs}
    with pytest.raises(UserError) as refused:
        validate(**call)
    print(refused.value)
    assert says in str(refused.value) and out.getvalue() == ""


@pytest.mark.parametrize("tolerance", [0, 1e-4, np.int64(1), np.float32(1e-3), None])
def test_a_tolerance_that_is_a_number_is_taken_whatever_its_type(tolerance):
    """NumPy's whole numbers are numbers too: np.int64(1) (a tolerance read from an array) was refused as "no number
    >= 0" where np.float32 and int were taken."""
    check_validated(load_model("demo"), ["Hi"], tolerance)


@pytest.mark.parametrize("name, reason", [
    ("llama_mha", "llama_mha has no tokenizer (no tokenizer.json in {})"),
    ("tiny", "its tokenizer's ids pass tiny's vocabulary of 512"),
])  # fmt: skip
def test_a_model_fed_random_ids_for_the_prompts_says_so_with_the_ids(name, reason):
    """The table shows English prompts; a model without a tokenizer of its own (or whose tokenizer's ids pass its
    vocabulary) reads seeded random ids instead, which the output says, with the ids, before the table."""
    from minitransformer.text import short_path

    directory = next(d for d in [*hf_fixture_dirs(), *hf_llama_fixture_dirs()] if d.name == name)
    model = load_model(directory)
    reason = reason.format(short_path(str(directory)))
    out = io.StringIO()
    prompts = PROMPTS[:2]
    assert validate(model, steps=1, prompts=prompts, out=out), out.getvalue()
    lines = out.getvalue().splitlines()
    room = model.config.n_positions  # beside 1 step: the compared token is never fed
    # prompt i: as many ids as GPT-2's tokenizer makes of its text, drawn by a generator seeded with i
    fed = [np.random.default_rng(i).integers(0, model.config.vocab_size, len(load_tokenizer().encode(text)))[:room]
           for i, text in enumerate(prompts)]  # fmt: skip
    assert lines[1:4] == [
        f"random ids: {reason}, so these prompts are fed as seeded random ids, as many as GPT-2's tokenizer makes of "
        f"the text, not as their words:",
        *[f"  {ids.tolist()} for {text!r}" for text, ids in zip(prompts, fed)],
    ], lines[:4]


def test_a_model_with_its_own_tokenizer_is_fed_the_prompts_tokens():
    from minitransformer.verbs.validate import prompt_ids, random_ids_reason

    model = load_model("demo")
    assert [random_ids_reason(model, text) for text in PROMPTS] == [None] * len(PROMPTS)
    assert prompt_ids(model, PROMPTS[0], seed=0) == load_tokenizer().encode(PROMPTS[0]) == [464, 3139, 286, 4881, 318]


@pytest.mark.parametrize("width, dtype", [(10, "float32"), (7, "float64")])
def test_validate_runs_experts_torch_s_grouped_mm_refuses(width, dtype, tmp_path, capsys):
    """transformers' default experts path, torch's grouped_mm, refuses rows not a multiple of 16 bytes (experts 10 or
    7 wide); validate asks for its eager path (validate.EXPERTS_PATH), which computes the same at every width."""
    import torch
    import transformers
    from family_checks import save_random

    config = transformers.MixtralConfig(vocab_size=90, hidden_size=16, intermediate_size=width, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_local_experts=3,
                                        num_experts_per_tok=2, max_position_embeddings=64)  # fmt: skip
    save_random(tmp_path, config, spread=0.3)
    with pytest.raises(RuntimeError, match="16 bytes"), torch.no_grad():  # the default path, as it stands
        theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
        theirs(torch.tensor([[1, 2, 3]]))
    assert main(["validate", "--model", str(tmp_path), "--steps", "2", "--dtype", dtype]) == 0
    captured = capsys.readouterr()
    assert captured.out.rstrip().endswith("all OK"), captured


@pytest.mark.parametrize(
    "generation_config, said",
    [([1], "TypeError: 'list' object is not a mapping"), ({"max_new_tokens": -1}, "must be greater than 0")],
)
def test_a_directory_transformers_cannot_load_is_refused_in_a_line_with_its_reason(
    generation_config, said, tmp_path, capsys
):
    """generate reads the directory (it never reads generation_config.json); transformers' from_pretrained refuses
    it, and validate and crosscheck ended in its traceback."""
    from conftest import write_llama

    directory = write_llama(tmp_path / "m", vocab_size=64)
    (directory / "generation_config.json").write_text(json.dumps(generation_config))
    for argv in (["validate", "--model", str(directory), "--steps", "1"], ["crosscheck", "--model", str(directory)]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (argv, out, err)
        assert f"transformers could not load {directory} as LlamaForCausalLM" in err and said in err, err


def test_the_prompt_room_beside_the_steps_is_the_generations(tmp_path):
    """A prompt and s greedy steps take prompt + s - 1 positions, as any generation's (the last token is compared,
    never fed): a context of one position holds a 1-token prompt and its one step; more steps are refused in words."""
    from conftest import write_llama
    from minitransformer.verbs.validate import prompt_room

    one = load_model(write_llama(tmp_path / "m", vocab_size=64, n_positions=1))
    assert prompt_room(one, 1) == 1
    with pytest.raises(
        UserError, match="2 greedy steps leave no room for a prompt in .* context of 1 position; use at most 1 step$"
    ):
        prompt_room(one, 2)
    sixteen = load_model(write_llama(tmp_path / "sixteen", vocab_size=64, n_positions=16))
    assert [prompt_room(sixteen, s) for s in (1, 4, 16)] == [16, 13, 1]
    assert main(["validate", "--model", str(tmp_path / "sixteen"), "--steps", "16"]) == 0  # a 1-token prompt, 16 steps
