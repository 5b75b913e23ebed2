"""The CLI as a user meets it: real output, one JSON document with --json -, and one-line errors on bad input."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli, write_gpt2
from minitransformer.errors import UserError


def test_generate_streams_text_then_candidates_then_the_ledger(small_gpt2_dir, small_gpt2):
    result = run_cli("generate", "The capital of France is", "--model", str(small_gpt2_dir), "--max-new-tokens", "4")
    assert result.returncode == 0, result.stderr
    expected = small_gpt2.generate("The capital of France is", max_new_tokens=4)
    out = result.stdout
    assert f"The capital of France is{expected.text}" in out
    assert "Next-token candidates" in out and repr(expected.candidates[0].token) in out
    for needle in (
        "qkv",
        "scores",
        "mix",
        "mlp.up",
        "mlp.down",
        "logits",
        "softmax",
        "resid_mid",
        "KV cache",
        "Total:",
    ):
        assert needle in out, needle
    assert f"{expected.ledger.totals.macs:,}" in out
    assert out.index("Next-token candidates") < out.index("Where the dot products live") < out.index("Total:")


def test_json_on_stdout_is_exactly_one_document_with_the_schema(small_gpt2_dir):
    result = run_cli("generate", "Hello world", "--model", str(small_gpt2_dir), "--max-new-tokens", "3", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # fails if anything else is on stdout
    assert {"model", "prompt_tokens", "new_tokens", "text", "phases", "totals"} <= doc.keys()
    assert doc["prompt_tokens"] == [15496, 995] and len(doc["new_tokens"]) == 3
    assert [p["phase"] for p in doc["phases"]] == ["prefill", "decode", "decode"]
    assert [p["step"] for p in doc["phases"]] == [0, 1, 2]
    assert [(p["tokens"], p["context"]) for p in doc["phases"]] == [(2, 2), (1, 3), (1, 4)]
    prefill = doc["phases"][0]
    assert len(prefill["layers"]) == doc["model"]["n_layer"] == 2
    op = next(o for o in prefill["layers"][0]["ops"] if o["op"] == "qkv")
    assert {"op", "a_shape", "b_shape", "out_shape", "dot_products", "dot_length", "macs", "flops"} <= op.keys()
    assert op["a_shape"] == [2, 16] and op["b_shape"] == [16, 48] and op["out_shape"] == [2, 48]
    assert op["dot_products"] == 96 and op["dot_length"] == 16 and op["macs"] == 1536 and op["flops"] == 3072
    assert prefill["logits"]["op"] == "logits" and prefill["logits"]["dot_products"] == 50257
    assert doc["model"]["name"] == "small-gpt2" and doc["model"]["source"] == str(small_gpt2_dir)
    assert sum(p["macs"] for p in doc["phases"]) == doc["totals"]["macs"]
    assert doc["totals"]["flops"] == 2 * doc["totals"]["macs"]
    for phase in doc["phases"]:
        layer_sum = sum(layer["macs"] for layer in phase["layers"]) + phase["logits"]["macs"]
        assert layer_sum == phase["macs"]
    assert "The capital" not in result.stdout and "Where the dot products live" in result.stderr


def test_json_to_a_file(small_gpt2_dir, tmp_path):
    path = tmp_path / "ledger.json"
    result = run_cli("generate", "Hi", "--model", str(small_gpt2_dir), "--max-new-tokens", "2", "--json", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["totals"]["macs"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_no_cache_shows_what_the_cache_would_save(small_gpt2_dir):
    cached = json.loads(run_cli("generate", "One two three", "--model", str(small_gpt2_dir), "--json", "-").stdout)
    uncached = json.loads(run_cli("generate", "One two three", "--model", str(small_gpt2_dir), "--no-cache",
                                  "--json", "-").stdout)  # fmt: skip
    assert cached["new_tokens"] == uncached["new_tokens"]
    assert cached["cache"]["without_cache"] == uncached["totals"]
    assert uncached["cache"]["with_cache"] == cached["totals"]
    assert cached["cache"]["saved_macs"] == uncached["totals"]["macs"] - cached["totals"]["macs"] > 0
    assert [p["tokens"] for p in uncached["phases"]] == [3 + k for k in range(8)]


def _broken_models(tmp_path, small_gpt2_dir):
    """Directories a user might point --model at, each wrong in one way."""
    no_config = tmp_path / "no-config"
    no_config.mkdir(parents=True)
    no_weights = write_gpt2(tmp_path / "no-weights", vocab_size=50)
    (no_weights / "model.safetensors").unlink()
    pickle_only = write_gpt2(tmp_path / "pickle-only", vocab_size=50)
    (pickle_only / "model.safetensors").rename(pickle_only / "pytorch_model.bin")
    truncated = write_gpt2(tmp_path / "truncated", vocab_size=50)
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    garbage = write_gpt2(tmp_path / "garbage", vocab_size=50)
    (garbage / "model.safetensors").write_bytes(b"\x00" * 100)
    bad_json = write_gpt2(tmp_path / "bad-json", vocab_size=50)
    (bad_json / "config.json").write_text('{"n_layer": 2, ')
    wrong_shape = write_gpt2(tmp_path / "wrong-shape", vocab_size=50)
    config = json.loads((wrong_shape / "config.json").read_text())
    (wrong_shape / "config.json").write_text(json.dumps({**config, "n_inner": 30}))
    unsupported = write_gpt2(tmp_path / "unsupported", vocab_size=50)
    (unsupported / "config.json").write_text(json.dumps({**config, "activation_function": "xielu"}))
    return {
        "no-config": (no_config, "config.json"),
        "no-weights": (no_weights, "no weights"),
        "pickle-only": (pickle_only, "never unpickles"),
        "truncated": (truncated, "not a readable safetensors"),
        "garbage": (garbage, "not a readable safetensors"),
        "bad-json": (bad_json, "not valid JSON"),
        "wrong-shape": (wrong_shape, "h.0.mlp.c_fc.weight"),
        "unsupported": (unsupported, "activation_function"),
    }


BAD_ARGUMENTS = {
    "empty prompt": (["", "--model", "{small}"], "prompt is empty"),
    "beyond context": (
        ["Hello there", "--model", "{small}", "--max-new-tokens", "64"],
        "at most 63 new tokens fit; give a shorter prompt or fewer --max-new-tokens",
    ),
    "zero tokens": (
        ["Hi", "--model", "{small}", "--max-new-tokens", "0"],
        "--max-new-tokens must be a whole number of at least 1, not 0",
    ),
    "negative tokens": (
        ["Hi", "--model", "{small}", "--max-new-tokens", "-3"],
        "--max-new-tokens must be a whole number of at least 1, not -3",
    ),
    "absurd tokens": (["Hi", "--model", "{small}", "--max-new-tokens", "99999999999"], "context"),
    "not a number": (["Hi", "--model", "{small}", "--max-new-tokens", "many"], "not a whole number"),
    "negative temperature": (["Hi", "--model", "{small}", "--temperature", "-1"], "--temperature must be"),
    "nan temperature": (["Hi", "--model", "{small}", "--temperature", "nan"], "--temperature must be"),
    # read as flags by argparse ("expected one argument"), not as the numbers they are
    "-inf temperature": (
        ["Hi", "--model", "{small}", "--temperature", "-inf"],
        "--temperature must be a finite number",
    ),
    "-1e-3 temperature": (["Hi", "--model", "{small}", "--temperature", "-1e-3"], "not -0.001"),
    "negative ids": (["--ids", "-5,3", "--model", "{small}"], "token id -5 is outside this model's vocabulary"),
    "word temperature": (["Hi", "--model", "{small}", "--temperature", "hot"], "not a number"),
    "zero top-k": (["Hi", "--model", "{small}", "--top-k", "0"], "--top-k must be a whole number of at least 1, not 0"),
    "negative seed": (["Hi", "--model", "{small}", "--seed", "-1"], "--seed must be a whole number of 0 or more"),
    "no candidates": (["Hi", "--model", "{small}", "--top", "0"], "--top must be a whole number of at least 1"),
    "bad top-k": (["Hi", "--model", "{small}", "--top-k", "x"], "not a whole number"),
    "unknown model": (["Hi", "--model", "gpt5"], "known models: gpt2, gpt2-medium"),
    "missing directory": (["Hi", "--model", "./no/such/dir"], "not a directory"),
    "bad layer": (["Hi", "--model", "{small}", "--layer", "7"], "layers 0..1"),
    "unknown flag": (["Hi", "--frobnicate"], "unrecognized arguments"),
}


def assert_one_line_error(result, needle):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and lines[0].startswith("minitransformer")
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=str)
def test_bad_arguments_get_a_one_line_answer(case, small_gpt2_dir, tmp_path):
    args, needle = BAD_ARGUMENTS[case]
    out = tmp_path / "out.json"
    result = run_cli("generate", *[a.replace("{small}", str(small_gpt2_dir)) for a in args], "--json", str(out))
    assert_one_line_error(result, needle)
    assert result.stdout == ""  # refused before anything is printed, not halfway through
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_broken_model_directories_get_a_one_line_answer(tmp_path, small_gpt2_dir):
    for name, (directory, needle) in _broken_models(tmp_path / "models", small_gpt2_dir).items():
        out = tmp_path / f"{name}.json"
        result = run_cli("generate", "Hi", "--model", str(directory), "--json", str(out))
        assert_one_line_error(result, needle)
        assert not out.exists(), name


def test_an_empty_model_name_is_refused_not_read_as_the_current_directory(small_gpt2_dir, tmp_path):
    """Path("") is ".": --model "" (load_model("")) loaded whatever model the current directory held."""
    import shutil
    import subprocess
    import sys

    from minitransformer import UserError, load_model

    shutil.copytree(small_gpt2_dir, tmp_path, dirs_exist_ok=True)  # a model where the command runs
    command = [sys.executable, "-m", "minitransformer", "generate", "Hi", "--model", "", "--max-new-tokens", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_one_line_error(result, "the model's name or directory is empty")
    for empty in ("", "  "):
        with pytest.raises(UserError, match="is empty; give one"):
            load_model(empty)


LONG_IDS = ",".join(["5"] * 70)  # the demo's context is 64


@pytest.mark.parametrize("args, fits", [
    (["generate", "--ids", LONG_IDS], "give at most 57 tokens for 8 new ones"),  # 57 + 8 - 1 = 64 positions
    (["generate", "--ids", LONG_IDS, "--max-new-tokens", "1"], "give at most 64 tokens"),
    (["generate", "--ids", LONG_IDS, "--max-new-tokens", "65"], "give a shorter prompt or fewer --max-new-tokens"),
    (["trace", "--ids", LONG_IDS], "give at most 63 tokens for 2 new ones"),
    (["lens", "--ids", LONG_IDS, "--target", "5"], "give at most 64 tokens"),
    (["attribute", "--ids", LONG_IDS, "--target", "5", "--versus", "6"], "give at most 64 tokens"),
    (["patch", "--ids", LONG_IDS, "--corrupt", LONG_IDS.replace("5", "7"), "--target", "5", "--versus", "6"],
     "give at most 64 tokens"),
    (["crosscheck", "--ids", LONG_IDS], "give at most 64 tokens"),
], ids=lambda a: a[0] if isinstance(a, list) else "")  # fmt: skip
def test_a_prompt_longer_than_the_context_is_told_how_long_it_may_be(args, fits):
    """A prompt past the context said how far past it was, not what to do (generate's said fewer --max-new-tokens,
    which cannot help a prompt too long by itself). A generation's prompt shares the context with the new tokens fed
    after it: generate and trace said "at most 64 tokens", and 64 were then refused beside 8 or 2 new ones."""
    if args[0] == "crosscheck":
        pytest.importorskip("transformers")
    result = run_cli(*args, "--model", "demo")
    print(args[0], result.stderr)
    assert_one_line_error(result, f"70 positions exceed this model's context of 64; {fits}")
    assert result.stdout == ""


def test_unwritable_json_path_is_refused_before_any_work(small_gpt2_dir, tmp_path):
    result = run_cli("generate", "Hi", "--model", str(small_gpt2_dir), "--json", str(tmp_path / "nope" / "x.json"))
    assert_one_line_error(result, "does not exist")
    assert result.stdout == ""


def test_console_script_is_installed():
    """`pip install` puts a `minitransformer` script beside the environment's python."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "minitransformer"
    if not script.exists():
        pytest.skip(f"minitransformer is not pip-installed in the environment of {sys.executable}")
    result = subprocess.run([str(script), "generate", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--max-new-tokens" in result.stdout


def test_version_is_the_packages():
    import re

    from conftest import ROOT

    declared = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    result = run_cli("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"minitransformer {declared}\n", "")


def test_without_gpt2_or_the_hub_the_demo_model_answers_and_says_so(tmp_path):
    env = {"MINITRANSFORMER_WEIGHTS": str(tmp_path / "weights"), "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip
    result = run_cli("generate", "The capital of France is", "--max-new-tokens", "1", env=env)
    assert result.returncode == 0, result.stderr
    note = result.stderr.strip().splitlines()
    assert len(note) == 1 and "the demo model answers" in note[0] and "minitransformer download gpt2" in note[0]
    assert result.stdout.startswith("model demo:")
    assert "The capital of France is Paris" in result.stdout


@pytest.mark.parametrize("command, needle", [
    (["generate", "Hi", "--max-new-tokens", "100"], "exceed demo's context of 64 positions (they take 100: every token but the last new one is fed to the model); at most 64 new tokens fit"),
    (["generate", "--ids", "99999999"], "token id 99999999 is outside this model's vocabulary"),
    (["trace", "Hi", "--layers", "9"], "--layers: block 9 does not exist; this model has blocks 0..3"),
])  # fmt: skip
def test_a_command_the_demo_model_refuses_says_one_line_its_refusal(tmp_path, command, needle):
    """The note that the demo answers is said as the output begins (cli.notes_before_output): a command refused before
    it has none to explain, and says one line (it said two, the note and the refusal)."""
    env = {"MINITRANSFORMER_WEIGHTS": str(tmp_path / "weights"), "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip
    result = run_cli(*command, env=env)
    assert_one_line_error(result, needle)
    assert result.stdout == ""


def test_notes_are_said_before_the_output_they_explain_and_dropped_with_a_refusal(capsys):
    from minitransformer.cli import notes_before_output
    from minitransformer.errors import note

    with notes_before_output():
        note("minitransformer: note: first")
        print("the output")
        note("minitransformer: note: later, said at the end")
    captured = capsys.readouterr()
    assert captured.out == "the output\n"
    assert captured.err == "minitransformer: note: first\nminitransformer: note: later, said at the end\n"
    with pytest.raises(UserError), notes_before_output():
        note("minitransformer: note: dropped")
        raise UserError("refused")
    assert capsys.readouterr() == ("", "")
    note("minitransformer: note: said at once, nobody holding")
    assert capsys.readouterr().err == "minitransformer: note: said at once, nobody holding\n"


@pytest.mark.parametrize("flags, note", [
    (["--seed", "3"], "--seed ignored"),
    (["--top-k", "5", "--seed", "3"], "--top-k and --seed ignored"),
    (["--top-k", "5", "--temperature", "0"], "--top-k ignored"),
])  # fmt: skip
def test_top_k_and_seed_at_temperature_0_are_said_to_be_ignored(flags, note, small_gpt2_dir, small_gpt2):
    result = run_cli("generate", "Hello", "--model", str(small_gpt2_dir), "--max-new-tokens", "2", *flags)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"minitransformer: {note}: decoding is greedy at --temperature 0 (the default); "
                             f"sampling needs --temperature > 0\n")  # fmt: skip
    assert f"Hello{small_gpt2.generate('Hello', max_new_tokens=2).text}" in result.stdout  # greedy, as it says
    sampled = run_cli("generate", "Hello", "--model", str(small_gpt2_dir), "--max-new-tokens", "2", "--temperature",
                      "1", *(f for f in flags if f != "--temperature" and f != "0"))  # fmt: skip
    assert sampled.returncode == 0 and sampled.stderr == ""


def test_sampling_is_seeded_and_a_vanishing_temperature_is_greedy(small_gpt2):
    prompt = "The capital of France is"
    greedy = small_gpt2.generate(prompt, max_new_tokens=6, stop_at_eos=False).new_tokens
    tiny = small_gpt2.generate(prompt, max_new_tokens=6, temperature=1e-45, stop_at_eos=False).new_tokens
    assert tiny == greedy
    a = small_gpt2.generate(prompt, max_new_tokens=6, temperature=1.5, top_k=50, seed=3, stop_at_eos=False)
    b = small_gpt2.generate(prompt, max_new_tokens=6, temperature=1.5, top_k=50, seed=3, stop_at_eos=False)
    assert a.new_tokens == b.new_tokens and a.new_tokens != greedy
    one = small_gpt2.generate(prompt, max_new_tokens=6, temperature=1.0, top_k=1, seed=9, stop_at_eos=False)
    assert one.new_tokens == greedy  # top-k of 1 leaves only the most likely token


def test_the_help_names_every_family_and_model_type_in_the_table(capsys):
    """The CLI's help is read from the table of families: a family added there is named in --help, never GPT-2 alone."""
    from minitransformer.cli import main
    from minitransformer.families.table import ARCHITECTURES, model_types

    texts = []
    for command in ([], ["generate"], ["count"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        texts.append(" ".join(capsys.readouterr().out.split()))
    assert all(name in texts[0] for name in ARCHITECTURES) and "GPT-2 in NumPy" not in texts[0]
    for text in texts[1:]:
        assert f"model_type {', '.join(model_types())}" in text


def test_a_count_of_one_is_said_in_the_singular(small_gpt2_dir, tmp_path):
    """ "1 layers", "1 tokens", "1 heads": a one-layer model, a one-token prompt and one head read in the singular."""
    texts = [
        run_cli(
            "count", "--layers", "1", "--d-model", "16", "--heads", "1", "--tokens", "1", "--new-tokens", "2"
        ).stdout,
        run_cli("params", "--layers", "1", "--d-model", "16", "--heads", "1").stdout,
        run_cli("generate", "--ids", "464", "--model", str(small_gpt2_dir), "--max-new-tokens", "1").stdout,
        run_cli("trace", "--ids", "464", "--model", str(small_gpt2_dir), "--new-tokens", "1").stdout,
    ]
    run_cli(
        "count", "--layers", "1", "--d-model", "16", "--heads", "1", "--tokens", "1", "--html", str(tmp_path / "c.html")
    )
    texts.append((tmp_path / "c.html").read_text("utf-8"))
    for text in texts:
        assert text
        wrong = re.findall(r"\b1 (layers|tokens|heads|positions|blocks|steps|new positions|transformer blocks)\b", text)
        assert not wrong, wrong
    assert "1 layer," in texts[0] and "1 head of 16" in texts[0] and "prompt: 1 token [464]" in texts[2]


def test_tables_align_by_the_columns_a_terminal_shows():
    """A CJK character takes two columns and a combining accent none (validate's table quotes such prompts)."""
    from minitransformer.text import display_width, table

    rows = [["'日本語'", "1"], ["'cafe\u0301'", "22"], ["'abc'", "333"]]
    lines = table(["prompt", "n"], rows, right={1}).splitlines()
    assert [display_width(line) for line in lines] == [len(lines[-1])] * 4  # every row as wide as the ASCII one
    lines = table(["prompt", "n"], rows).splitlines()  # left-aligned: each second cell starts at the same column
    starts = [display_width(line[: line.rindex(cell)]) for line, cell in zip(lines, ["n", "1", "22", "333"])]
    assert starts == [starts[0]] * 4 and starts[0] == 2 + 8 + 2  # indent, the widest prompt ('日本語'), the gap
    assert display_width("日本語") == 6 and display_width("e\u0301") == 1


def test_errors_name_the_flags_as_typed_never_the_python_names(small_gpt2_dir):
    """A person typed --max-new-tokens, --top-k, --steps: the answer names those, not max_new_tokens or top_k."""
    for args, flag in ((["generate", "Hi", "--max-new-tokens", "-3"], "--max-new-tokens"),
                       (["generate", "Hi", "--top-k", "0", "--temperature", "1"], "--top-k"),
                       (["validate", "--steps", "0"], "--steps"),
                       (["count", "--new-tokens", "0"], "--new-tokens"),
                       (["count", "--batch", "0"], "--batch")):  # fmt: skip
        result = run_cli(*args, "--model", str(small_gpt2_dir))
        assert_one_line_error(result, f"{flag} must be a whole number of")
        assert flag.lstrip("-").replace("-", "_") not in result.stderr.replace(flag, ""), result.stderr


COMMANDS = ("generate", "download", "validate", "trace", "count", "crosscheck", "config", "params")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_misused_command_points_to_its_own_help(command, capsys):
    """An unknown flag, a flag of another command, a missing or wrong value: each refused in one line that points to
    the command's own help (argparse left the unknown ones to the top-level parser, which pointed to its help)."""
    from minitransformer.cli import build_parser, main

    parsers = build_parser().commands  # type: ignore[attr-defined]
    own = parsers[command]._option_string_actions
    foreign = next(flag for name, p in parsers.items() for flag in p._option_string_actions if flag not in own)
    for args in ([command, "--frobnicate"], [command, foreign, "1"], [command, "--json"],
                 [command, "--model", "demo", "--all-steps", "--ids", "1"]):  # fmt: skip
        assert main(args) == 2, args
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert captured.out == "" and len(lines) == 1, captured
        assert lines[0].startswith("minitransformer: error: ") and lines[0].endswith(
            f" (see minitransformer {command} --help)"
        ), lines[0]


@pytest.mark.parametrize("args, message", [
    (["count", "--precision", "bfloat16"], "unrecognized arguments: --precision bfloat16; --precision is an option of "
                                           "generate, validate, trace, lens, patch and attribute (see minitransformer count --help)"),
    (["generate", "Hi", "--all-steps"], "unrecognized arguments: --all-steps; --all-steps is an option of count "
                                        "(see minitransformer generate --help)"),
    (["trace", "Hi", "--routing=worst"], "unrecognized arguments: --routing=worst; --routing is an option of count "
                                         "(see minitransformer trace --help)"),
    (["count", "--frobnicate"], "unrecognized arguments: --frobnicate (see minitransformer count --help)"),
    (["count", "--dtype", "float64"], "argument --dtype: invalid choice: 'float64' (choose from 'float32', "
                                      "'bfloat16', 'float16') (see minitransformer count --help)"),
    (["frobnicate"], "argument command: invalid choice: 'frobnicate'"),
])  # fmt: skip
def test_a_flag_that_belongs_to_another_command_says_which(args, message, capsys):
    from minitransformer.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"minitransformer: error: {message}") and err.count("\n") == 1, err


def test_every_option_of_every_command_says_what_it_does_and_its_default():
    import argparse

    from minitransformer.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == {
        "generate",
        "download",
        "validate",
        "trace",
        "count",
        "config",
        "params",
        "crosscheck",
        "lens",
        "patch",
        "attribute",
    }
    for name, command in commands.items():
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.dest)
            if action.option_strings:  # an option, not a positional argument: its help states its default
                assert "default" in action.help, (name, action.option_strings, action.help)
    helped = run_cli("generate", "--help").stdout
    assert "--max-new-tokens N    tokens to generate (default 8)" in helped and "(default 10)" in helped


def test_an_analysis_s_help_says_which_model_runs_without_model_and_what_json_writes():
    """lens, patch and attribute said "(default: the gpt2 preset)" of a run that loads the default model (the preset is
    --count-only's), and that --json writes the ledger where it writes the analysis."""
    from minitransformer.cli import DEFAULT_MODEL, build_parser

    commands = build_parser().commands  # type: ignore[attr-defined]
    for name in ("lens", "patch", "attribute"):
        helped = " ".join(commands[name].format_help().split())
        assert f"--model runs its weights (default: {DEFAULT_MODEL}); with --count-only" in helped, name
        assert "write the analysis as JSON" in helped and "ledger" not in helped, name
    assert "(default: the gpt2 preset); its shapes only" in " ".join(commands["count"].format_help().split())


def test_a_batch_of_one_prompt_is_one_prompt(small_gpt2_dir, tmp_path):
    prompts = tmp_path / "one.txt"
    prompts.write_text("Hi\n")
    result = run_cli("generate", "--prompts", str(prompts), "--model", str(small_gpt2_dir), "--max-new-tokens", "1")
    assert result.returncode == 0, result.stderr
    assert "a batch of 1 prompt, left-padded to 1 token\n" in result.stdout


def test_numpy_s_arithmetic_warnings_are_one_note_after_the_output(tmp_path):
    """An infinite weight (as a float16 pass past its range) made NumPy print its RuntimeWarning (two lines, one of our
    source) in the middle of the streamed answer ("Hi/work/.../ops.py:78: RuntimeWarning: invalid value ...!!"): now one
    note on stderr as the command ends."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    directory = write_gpt2(tmp_path / "inf-gpt2")
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["transformer.h.0.attn.c_attn.weight"][0, 0] = np.inf
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    result = run_cli("generate", "Hi", "--model", str(directory), "--max-new-tokens", "2")
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" not in result.stdout + result.stderr and "nan%" in result.stdout, result.stdout[-300:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("minitransformer: note: this run's arithmetic met invalid value"), (
        lines
    )
    refused = run_cli("generate", "Hi", "--model", str(directory), "--max-new-tokens", "999")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "note" not in refused.stderr, refused.stderr


def test_a_nan_weight_s_quiet_nan_logits_are_said_in_the_note_and_warned_in_python(tmp_path):
    """NaN arithmetic is quiet: a NaN weight made every logit nan, every probability nan% and every token id 0 ('!'),
    and nothing said so. The pass's logits are checked: the CLI's note says it, the API warns."""
    import numpy as np
    import pytest
    from safetensors.numpy import load_file, save_file

    from minitransformer import load_model

    directory = write_gpt2(tmp_path / "nan-gpt2")
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["transformer.h.1.mlp.c_proj.weight"][3, 5] = np.nan
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    result = run_cli("generate", "Hi", "--model", str(directory), "--max-new-tokens", "2")
    assert result.returncode == 0 and "nan%" in result.stdout, result.stdout[-300:] + result.stderr
    assert result.stderr.splitlines() == [
        "minitransformer: note: this run's arithmetic met non-finite logits (first in verbs/generate.py:"
        + result.stderr.split("verbs/generate.py:")[1].split(")")[0]
        + "): the nan and inf shown come from it, a NaN or infinite weight or a value past the range of the run's "
        "number format"  # float16's was named whatever the format (e5m2's is 57,344): the drift's lines name it
    ], result.stderr
    with pytest.warns(RuntimeWarning, match=r"non-finite logits encountered in pass 0 \(\d[\d,]* nan and 0 inf of"):
        load_model(directory).generate("Hi", max_new_tokens=1)


def test_an_output_that_cannot_be_written_or_read_is_one_line():
    """stdout on a full device or closed, stdin closed under --prompts - or trace --step: tracebacks (OSError,
    AttributeError on None); trace --step's notice without a terminal came before a refusal (two lines)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    def run(args, **streams):
        streams.setdefault("stdout", subprocess.DEVNULL)
        done = subprocess.run([sys.executable, "-m", "minitransformer", *args], stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, env=os.environ, **streams)  # fmt: skip
        return done.returncode, done.stderr.splitlines()

    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            for args in (["count", "--preset", "gpt2"], ["generate", "Hi", "--model", "demo", "--max-new-tokens", "1"]):
                assert run(args, stdout=full) == (2, ["minitransformer: error: cannot write the output: No space left "
                                                      "on device"]), args  # fmt: skip
    closed = lambda fd: lambda: os.close(fd)  # noqa: E731 - a descriptor the shell closed (>&-, <&-)
    assert run(["count", "--preset", "gpt2"], preexec_fn=closed(1)) == (
        2, ["minitransformer: error: cannot write the output: it is closed"])  # fmt: skip
    code, said = run(["generate", "--model", "demo", "--prompts", "-"], preexec_fn=closed(0))
    assert (code, said) == (2, [said[0]]) and "--prompts - reads stdin, which is closed" in said[0], said
    assert run(["trace", "--model", "demo", "hi", "--step"], preexec_fn=closed(0))[0] == 0
    code, said = run(["trace", "--model", "nope", "hi", "--step"], stdin=subprocess.DEVNULL)
    assert code == 2 and len(said) == 1 and "unknown model 'nope'" in said[0], said
