"""The analyses' shared front door (cli._counted_only, cli._analysis): lens, patch and attribute with --count-only
take a prompt length that the model's context holds, refuse files they would not write, and, run on a model without
tokenizer.json, say what takes token ids. Each refusal one line, exit 2, nothing written."""

from __future__ import annotations

import pytest

from conftest import write_llama
from minitransformer.cli import main
from minitransformer.families.table import PRESETS

VERBS = ("lens", "patch", "attribute")


def refused(capsys, argv: list[str]) -> str:
    """The one line a refused command printed on stderr (nothing on stdout)."""
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("minitransformer: error: "), (out, err)
    return err


@pytest.mark.parametrize("verb", VERBS)
def test_a_prompt_longer_than_the_context_is_refused_before_any_array_is_made(capsys, verb):
    # 10**12 positions were an np.zeros of 7.28 TiB (a MemoryError), 10**23 a ValueError: a traceback either way
    for tokens in (10**12, 10**23, PRESETS["llama3-8b"].n_positions + 1):
        err = refused(capsys, [verb, "--count-only", "--preset", "llama3-8b", "--tokens", str(tokens)])
        assert f"a {tokens:,}-token prompt exceeds llama3-8b's context of 8,192 positions; give at most 8,192" in err


@pytest.mark.parametrize("verb", VERBS)
def test_the_default_prompt_is_the_whole_context_where_it_holds_fewer_than_100(capsys, verb):
    assert main([verb, "--count-only", "--model", "demo"]) == 0  # demo's context: 64 positions
    assert " of 64 tokens on demo" in capsys.readouterr().out
    assert main([verb, "--count-only", "--preset", "gpt2"]) == 0
    assert " of 100 tokens on gpt2" in capsys.readouterr().out


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("files", [["--json", "{json}"], ["--html", "{html}"], ["--json", "-", "--html", "{html}"]])
def test_count_only_refuses_the_files_it_would_not_write(capsys, tmp_path, verb, files):
    argv = [a.format(json=tmp_path / "a.json", html=tmp_path / "a.html") for a in files]
    err = refused(capsys, [verb, "--count-only", "--preset", "gpt2", *argv])
    asked = " or ".join(flag for flag in ("--json", "--html") if flag in files)
    assert f"--count-only prints the bill alone, with no analysis for {asked} to write" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("verb", VERBS)
def test_the_llama_demo_is_counted_from_shapes_alone_by_its_name(capsys, verb):
    assert main([verb, "--count-only", "--model", "demo-llama", "--tokens", "5"]) == 0
    assert "of 5 tokens on demo-llama" in capsys.readouterr().out
    for command in (["count", "--tokens", "5"], ["params"]):
        assert main([*command, "--model", "demo-llama"]) == 0
        assert "demo-llama" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize(
    "verb, texts, ids, function",
    [
        ("lens", ["Hi", "--target", "x"], ["--target", "7"], "minitransformer.verbs.lens.logit_lens"),
        ("patch", ["Hi", "--corrupt", "Ho", "--target", "x", "--versus", "y"],
         ["--corrupt", "9,4,3", "--target", "7", "--versus", "11"], "minitransformer.verbs.patch.patch"),
        ("attribute", ["Hi", "--target", "x", "--versus", "y"], ["--target", "7", "--versus", "11"],
         "minitransformer.verbs.attribute.attribute"),
    ],
)  # fmt: skip
def test_a_model_without_a_tokenizer_is_analysed_from_token_ids(capsys, tmp_path, verb, texts, ids, function):
    """Text is refused, pointing at --ids; with --ids the prompt, --corrupt, --target and --versus are token ids, and
    the analysis is the API's on those ids (the verbs had no --ids: a checkpoint without a tokenizer could not be
    analysed from the command line)."""
    import json

    from minitransformer import load_model
    from minitransformer.verbs.attribute import attribute
    from minitransformer.verbs.lens import logit_lens
    from minitransformer.verbs.patch import patch

    directory = write_llama(tmp_path / "llama", vocab_size=50)  # a Llama reads its tokenizer.json: it has none
    assert not (directory / "tokenizer.json").exists()
    err = refused(capsys, [verb, *texts, "--model", str(directory)])
    assert f"has no tokenizer.json, and {verb} reads its prompt and tokens as text: give token ids, --ids" in err
    assert function in err
    path = tmp_path / "by_ids.json"
    assert main([verb, "--ids", "5,8,13", *ids, "--model", str(directory), "--json", str(path)]) == 0
    capsys.readouterr()
    model, prompt = load_model(directory), [5, 8, 13]
    expected = {
        "lens": lambda: logit_lens(model, prompt, 7),
        "patch": lambda: patch(model, prompt, [9, 4, 3], 7, 11),
        "attribute": lambda: attribute(model, prompt, 7, 11),
    }[verb]().to_dict(model.tokenizer.decode)
    written = json.loads(path.read_text())
    assert written.pop("model")["source"] == str(directory)
    assert written == json.loads(json.dumps(expected)), verb


@pytest.mark.parametrize(
    "argv, said",
    [
        (["lens", "Hi", "--ids", "1,2", "--target", "3"], "give a prompt or --ids, not both"),
        (["lens", "--ids", "1,2", "--target", "x"], "with --ids, --target is a token id"),
        (["patch", "--ids", "1,2", "--corrupt", "a b", "--target", "3", "--versus", "4"], "--corrupt takes whole"),
        (["attribute", "--ids", "1,2", "--target", "3"], "attribute needs --versus"),
        (["lens", "--count-only", "--ids", "1,2"], "--ids has no part in it"),
    ],
)
def test_ids_mistakes_are_one_line(capsys, argv, said):
    err = refused(capsys, [*argv, "--model", "demo-llama"] if "--count-only" not in argv else argv)
    assert said in err, err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["attribute", "--count-only", "--preset", "deepseek-v4-flash"], "hyper-connections"),
        (["attribute", "--count-only", "--preset", "gemma-2-2b"], "a scale or soft-cap after the logits"),
        (["patch", "--count-only", "--heads", "--preset", "deepseek-v4-pro"], "does not name"),
    ],
)
def test_count_only_refuses_what_the_analysis_itself_refuses(capsys, argv, said):
    """No bill for a run that would be refused: the same refusal as the analysis's, one line, before any bill."""
    assert said in refused(capsys, [*argv, "--tokens", "8"])


def test_count_only_bills_patching_the_stream_of_a_model_whose_heads_it_refuses(capsys):
    """DeepSeek-V4's stream is patched (its sliding layers name no head output, so --heads alone is refused)."""
    assert main(["patch", "--count-only", "--preset", "deepseek-v4-flash", "--tokens", "8"]) == 0
    assert "stream patched: 43 layers x 8 positions" in capsys.readouterr().out


@pytest.mark.parametrize(
    "verb, asked",
    [
        ("lens", ["The capital of France is", "--target", " Paris"]),
        ("patch", ["The capital of France is", "--corrupt", "The capital of Italy is", "--target", " Paris",
                   "--versus", " Rome"]),
        ("attribute", ["The capital of France is", "--target", " Paris", "--versus", " Rome"]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("flag", [["--preset", "llama2-7b"], ["--tokens", "7"], ["--config", "config.json"]])
def test_a_shape_flag_without_count_only_is_refused_not_ignored(capsys, verb, asked, flag):
    """`lens ... --preset llama2-7b` ran the demo GPT-2 and said nothing: the flag gives --count-only's model."""
    said = refused(capsys, [verb, *asked, *flag])
    assert f"{flag[0]} is for --count-only (a bill from shapes alone); {verb} runs a model's weights" in said, said


@pytest.mark.parametrize(
    "verb, extra, flag",
    [
        ("lens", ["The capital of France is"], "a prompt"),
        ("lens", ["--target", " Paris"], "--target"),
        ("patch", ["--corrupt", "The capital of Italy is"], "--corrupt"),
        ("attribute", ["--versus", " Rome"], "--versus"),
        ("attribute", ["--fold-ln"], "--fold-ln"),
        ("lens", ["--dtype", "float64"], "--dtype"),
        ("patch", ["--precision", "bfloat16"], "--precision"),
        ("lens", ["--weights", "stored"], "--weights"),
        ("lens", ["--top", "3"], "--top"),
    ],
)
def test_count_only_refuses_what_has_no_part_in_a_bill_from_shapes(capsys, verb, extra, flag):
    """They were accepted and ignored: a bill from shapes alone reads no text and no weights."""
    said = refused(capsys, [verb, "--count-only", "--preset", "gpt2", *extra])
    assert f"without weights or text: {flag} has no part in it" in said, said
