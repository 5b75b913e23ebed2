"""Tokens in and out of a Llama-family model: its directory's own tokenizer.json, or token ids alone (--ids on
the command line) where it has none, and streamed text that adds up to the final decode."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, processors

from conftest import hf_llama_fixture_dirs, run_cli, write_gpt2, write_llama
from minitransformer import UserError, load_model, load_tokenizer
from minitransformer.cli import main, parse_ids
from minitransformer.models.tokenizer import FileTokenizer, NoTokenizer, TextDiffStream

TEXTS = ["The capital of France is", "  two spaces\tand\nnewlines\n", "naïve café — “quotes” ½",
         "日本語 🤖👩‍👩‍👧 flags 🇫🇷", "<|endoftext|> is text here", "I'm sure they'll say it's 3.14"]  # fmt: skip
PROMPT_IDS = [464, 3139, 286, 4881, 318]  # GPT-2's tokens of "The capital of France is"


@pytest.fixture(scope="module")
def gpt2_tokenizer_json(tmp_path_factory):
    """GPT-2's shipped tokenizer, saved as a tokenizer.json by the tokenizers library."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    load_tokenizer()._tokenizer.save(str(path))
    return path


@pytest.fixture(scope="module")
def llama_with_tokenizer(tmp_path_factory, gpt2_tokenizer_json):
    """A tiny Llama with GPT-2's vocabulary and GPT-2's tokenizer as its own tokenizer.json."""
    directory = write_llama(tmp_path_factory.mktemp("models") / "llama-gpt2-tokenizer", vocab_size=50257, seed=3)
    shutil.copy(gpt2_tokenizer_json, directory / "tokenizer.json")
    return directory


@pytest.fixture(scope="module")
def no_tokenizer():
    directory = next(d for d in hf_llama_fixture_dirs() if d.name == "mistral_window")
    assert not (directory / "tokenizer.json").exists()
    return directory


def test_gpt2s_tokenizer_saved_as_tokenizer_json_reads_back_the_same(gpt2_tokenizer_json):
    saved = json.loads(gpt2_tokenizer_json.read_text())
    assert saved["pre_tokenizer"]["type"] == "ByteLevel" and saved["pre_tokenizer"]["add_prefix_space"] is False
    assert saved["decoder"]["type"] == "ByteLevel" and saved["post_processor"] is None
    from_file, shipped = FileTokenizer(gpt2_tokenizer_json), load_tokenizer()
    assert from_file.vocab_size == shipped.vocab_size == 50257
    for text in TEXTS:
        ids = shipped.encode(text)
        assert from_file.encode(text) == ids, text
        assert from_file.decode(ids) == shipped.decode(ids) == text


def test_a_llama_directory_uses_its_own_tokenizer_json(llama_with_tokenizer):
    model = load_model(llama_with_tokenizer)
    assert isinstance(model.tokenizer, FileTokenizer)
    assert model.tokenizer.path == str(llama_with_tokenizer / "tokenizer.json")
    assert model.tokenizer.encode("The capital of France is") == PROMPT_IDS
    by_text = model.generate("The capital of France is", max_new_tokens=6, stop_at_eos=False)
    by_ids = model.generate(PROMPT_IDS, max_new_tokens=6, stop_at_eos=False)
    assert by_text.prompt_tokens == by_ids.prompt_tokens == PROMPT_IDS
    assert by_text.new_tokens == by_ids.new_tokens and len(by_ids.new_tokens) == 6
    assert by_text.text == by_ids.text == model.tokenizer.decode(by_ids.new_tokens)
    assert by_ids.prompt == "The capital of France is"


def test_a_gpt2_reads_the_tokenizer_json_beside_it_and_refuses_a_broken_one(tmp_path):
    """A GPT-2 directory's tokenizer.json is read, as transformers' AutoTokenizer reads it (its own, where it is not
    GPT-2's: tests/models/test_gpt2_tokenizer_files.py); one that is no tokenizer is refused as a Llama's is. It was
    never read; without one, the shipped GPT-2 encoder."""
    directory = write_gpt2(tmp_path / "gpt2-with-file", vocab_size=300)
    assert load_model(directory).tokenizer is load_tokenizer()
    (directory / "tokenizer.json").write_text("not a tokenizer")
    with pytest.raises(UserError, match="is not a tokenizer file tokenizers"):
        load_model(directory)


def test_the_command_line_gives_the_same_run_for_text_and_for_its_ids(llama_with_tokenizer):
    model = str(llama_with_tokenizer)
    by_text = run_cli("generate", "The capital of France is", "--model", model, "--max-new-tokens", "5")
    by_ids = run_cli("generate", "--ids", ",".join(map(str, PROMPT_IDS)), "--model", model, "--max-new-tokens", "5")
    assert by_text.returncode == by_ids.returncode == 0, by_text.stderr + by_ids.stderr
    assert by_text.stdout == by_ids.stdout
    assert "prompt: 5 tokens [464, 3139, 286, 4881, 318]\n\nThe capital of France is" in by_ids.stdout
    traced_text = run_cli("trace", "The capital of France is", "--model", model, "--new-tokens", "2")
    traced_ids = run_cli("trace", "--ids", "464, 3139, 286, 4881, 318", "--model", model, "--new-tokens", "2")
    assert traced_text.returncode == traced_ids.returncode == 0, traced_text.stderr + traced_ids.stderr
    assert traced_text.stdout == traced_ids.stdout and "' France'" in traced_ids.stdout


def test_without_tokenizer_json_text_is_refused_and_ids_run(no_tokenizer):
    model = load_model(no_tokenizer)
    assert isinstance(model.tokenizer, NoTokenizer)
    with pytest.raises(UserError, match=r"has no tokenizer.json, so text cannot be turned into tokens; give token ids"):
        model.generate("hello")
    result = model.generate([5, 6, 7], max_new_tokens=3, stop_at_eos=False)
    assert result.prompt == "<5><6><7>" and result.text == "".join(f"<{t}>" for t in result.new_tokens)
    assert model.tokenizer.decode(np.array([5, 6])) == "<5><6>" and model.tokenizer.token_str(7) == "<7>"
    for bad in ([-1], [1.0], 5, [[1, 2]]):  # as the other tokenizers refuse them ('<-1>', '<1>', a TypeError)
        with pytest.raises(UserError, match="token ids"):
            model.tokenizer.decode(bad)

    for command in ("generate", "trace"):
        refused = run_cli(command, "hello", "--model", str(no_tokenizer))
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "has no tokenizer.json" in refused.stderr
        assert "--ids 1,2,3" in refused.stderr and "Traceback" not in refused.stderr
    ran = run_cli("generate", "--ids", "5,6,7", "--model", str(no_tokenizer), "--max-new-tokens", "3")
    assert ran.returncode == 0, ran.stderr
    expected = model.generate([5, 6, 7], max_new_tokens=3)
    assert f"prompt: 3 tokens [5, 6, 7]\n\n<5><6><7>{expected.text}\n" in ran.stdout
    traced = run_cli("trace", "--ids", "5,6,7", "--model", str(no_tokenizer), "--new-tokens", "1")
    assert traced.returncode == 0, traced.stderr
    assert "prompt 3 tokens [5, 6, 7] = '<5>' '<6>' '<7>'" in traced.stdout


@pytest.mark.parametrize("argv, message", [
    (["generate", "--ids", "1,x"], "--ids takes whole numbers separated by commas, such as 464,3139,286; not '1,x'"),
    (["generate", "--ids", ""], "--ids takes whole numbers"),
    (["trace", "--ids", "1,,2"], "--ids takes whole numbers"),
    (["generate", "--ids", "1.5"], "--ids takes whole numbers"),
    (["generate", "hello", "--ids", "1"], "give a prompt or --ids, not both: generate takes text or token ids"),
    (["trace", "hello", "--ids", "1"], "give a prompt or --ids, not both: trace takes text or token ids"),
    (["generate"], "give a prompt to continue (text) or --ids 1,2,3 (token ids)"),
    (["trace"], "give a prompt to trace (text) or --ids 1,2,3 (token ids)"),
    (["generate", "--ids=-1,2"], "token id -1 is outside this model's vocabulary (0..159)"),
    (["generate", "--ids", "1,160"], "token id 160 is outside this model's vocabulary (0..159)"),
    (["trace", "--ids", "1,999"], "token id 999 is outside this model's vocabulary (0..159)"),
    (["generate", "--ids", ",".join(["1"] * 49)], "exceed"),  # the context is 48
])  # fmt: skip
def test_bad_ids_are_one_line_errors_with_exit_status_2(argv, message, no_tokenizer, capsys):
    assert main([*argv, "--model", str(no_tokenizer)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("minitransformer: error: ") and err.count("\n") == 1
    assert message in err


def test_parse_ids():
    assert parse_ids("464,3139, 286 ,4881") == [464, 3139, 286, 4881]
    assert parse_ids("7") == [7] and parse_ids("-3") == [-3]  # the model refuses it, naming its vocabulary
    for bad in ("", " ", "1 2", "1;2", "0x10", "1,", "one"):
        with pytest.raises(UserError, match="--ids takes whole numbers"):
            parse_ids(bad)


def sentencepiece_like(words: list[str]) -> Tokenizer:
    """A tokenizer built like Llama 2's and Mistral's tokenizer.json: "▁" for spaces, byte fallback for what the
    vocabulary lacks, <s> put first by the post-processor, a decoder that drops the leading space."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"<0x{b:02X}>": 3 + b for b in range(256)}
    merges = []
    for word in words:
        for ch in word:
            vocab.setdefault(ch, len(vocab))
        for k in range(2, len(word) + 1):
            if word[:k] not in vocab:
                vocab[word[:k]] = len(vocab)
                merges.append((word[: k - 1], word[k - 1]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])  # fmt: skip
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


WORDS = ["▁the", "▁capital", "▁of", "▁France", "▁is", "▁Paris", "▁caf", "▁and", "▁a"]


@pytest.fixture(scope="module")
def llama_with_sentencepiece(tmp_path_factory):
    tok = sentencepiece_like(WORDS)
    directory = write_llama(tmp_path_factory.mktemp("models") / "llama-sp", vocab_size=tok.get_vocab_size(), seed=5)
    tok.save(str(directory / "tokenizer.json"))
    return directory


def test_a_sentencepiece_style_tokenizer_json_puts_bos_first_and_decodes_bytes(llama_with_sentencepiece):
    tok = load_model(llama_with_sentencepiece).tokenizer
    ids = tok.encode("the capital of France is café")
    assert ids[0] == 1 and tok.decode(ids) == "<s> the capital of France is café"
    assert tok.decode(ids[-2:-1]) == "\ufffd"  # half of é


def test_text_diff_stream_holds_back_half_characters_and_adds_up_to_the_decode(llama_with_sentencepiece):
    tok = load_model(llama_with_sentencepiece).tokenizer
    ids = tok.encode("caf\u00e9 is the capital")[1:]  # ▁caf <0xC3> <0xA9> ▁is ▁the ▁capital
    stream = tok.stream_decoder()
    pieces = [stream.push(t) for t in ids]
    assert pieces == ["caf", "", "", "é is", " the", " capital"]  # bytes wait for the end of their run
    assert "".join(pieces) + stream.flush() == tok.decode(ids) == "café is the capital"


@pytest.mark.parametrize("which", ["gpt2-tokenizer-json", "sentencepiece-like", "no-tokenizer"])
def test_streamed_text_equals_the_final_decode(which, llama_with_tokenizer, llama_with_sentencepiece, no_tokenizer):
    directory = {"gpt2-tokenizer-json": llama_with_tokenizer, "sentencepiece-like": llama_with_sentencepiece,
                 "no-tokenizer": no_tokenizer}[which]  # fmt: skip
    model = load_model(directory)
    prompt = [5, 6, 7] if which == "no-tokenizer" else model.tokenizer.encode("the capital of France is")
    streamed: list[str] = []
    # Sampling at a high temperature picks byte tokens that are halves of characters, and whole words.
    result = model.generate(prompt, max_new_tokens=40, temperature=3.0, seed=1, stop_at_eos=False,
                            on_token=lambda token, text: streamed.append(text))  # fmt: skip
    assert len(result.new_tokens) == 40 and "".join(streamed) == result.text
    assert result.full_text == model.tokenizer.decode(prompt + result.new_tokens)
    if which == "sentencepiece-like":
        assert "" in streamed[:40]  # some token was held back until its character was whole


def test_a_continuation_keeps_the_space_before_its_first_word(llama_with_sentencepiece):
    """A SentencePiece decoder drops the leading space of what it decodes, so "▁Paris" alone is "Paris"; after
    the prompt it is " Paris", and the continuation must say so, or the CLI prints "France isParis"."""
    model = load_model(llama_with_sentencepiece)
    tok = model.tokenizer
    assert tok.decode([tok._tokenizer.token_to_id("▁Paris")]) == "Paris"
    words = np.array([tok._tokenizer.token_to_id(w) for w in WORDS])
    with model.add_hook("logits", lambda logits, name: logits + np.isin(np.arange(logits.shape[-1]), words) * 100):
        streamed: list[str] = []
        result = model.generate("the capital of France is", max_new_tokens=5, stop_at_eos=False,
                                on_token=lambda token, text: streamed.append(text))  # fmt: skip
    assert set(result.new_tokens) <= set(words.tolist())  # every new token is a word: "▁..."
    assert result.text.startswith(" ") and result.text.count(" ") == 5 and "".join(streamed) == result.text
    assert tok.decode(result.prompt_tokens + result.new_tokens) == "<s> " + result.full_text  # <s>: the prompt's first


def test_a_run_of_byte_tokens_is_shown_only_once_a_token_ends_it(llama_with_sentencepiece):
    """The decoder shows bytes 0x07 0x28 as two characters, until 0xE2 makes the run invalid UTF-8 and all
    three become "\ufffd": text shown before that point would be contradicted by the final decode."""
    tok = load_model(llama_with_sentencepiece).tokenizer
    ids = [tok._tokenizer.token_to_id(t) for t in ("▁caf", "<0x07>", "<0x28>", "<0xE2>", "▁is")]
    assert tok.decode(ids[:3]) == "caf\x07(" and tok.decode(ids) == "caf\ufffd\ufffd\ufffd is"
    stream = tok.stream_decoder()
    assert [stream.push(t) for t in ids] == ["caf", "", "", "", "\ufffd\ufffd\ufffd is"]
    stream = tok.stream_decoder()
    assert [stream.push(t) for t in ids[:3]] + [stream.flush()] == ["caf", "", "", "\x07("]  # the end ends a run


def test_text_a_decoder_rewrites_is_shown_again_rather_than_lost():
    texts = iter(["ab", "aX", "aXc", "aXcd"])
    stream = TextDiffStream(lambda tokens: next(texts))
    assert [stream.push(1), stream.push(2), stream.push(3)] == ["ab", "X", "c"]
    assert stream.flush() == "d"


def test_validate_prompts_come_from_the_models_own_tokenizer_or_are_seeded_ids(llama_with_tokenizer, no_tokenizer,
                                                                               small_gpt2):  # fmt: skip
    from minitransformer.families.table import ARCHITECTURES, model_types
    from minitransformer.verbs.validate import prompt_ids

    references = {t: c for a in ARCHITECTURES.values() for t, c in a.reference_classes.items()}
    assert set(references) == set(model_types()) >= {"gpt2", "llama", "mistral", "qwen2"}  # and each family added
    assert prompt_ids(load_model(llama_with_tokenizer), "The capital of France is", seed=0) == PROMPT_IDS
    assert prompt_ids(small_gpt2, "The capital of France is", seed=0) == PROMPT_IDS
    model = load_model(no_tokenizer)
    ids = prompt_ids(model, "The capital of France is", seed=4)
    assert len(ids) == 5 and max(ids) < model.config.vocab_size
    assert (
        ids
        == prompt_ids(model, "The capital of France is", seed=4)
        != prompt_ids(model, "The capital of France is", seed=5)
    )
    assert np.asarray(ids).dtype.kind == "i"


def test_a_tokenizer_file_that_cannot_be_read_is_refused_naming_the_library_version(tmp_path):
    import tokenizers

    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "merges": 3}}')
    with pytest.raises(UserError, match=rf"not a tokenizer file tokenizers {tokenizers.__version__} can read") as err:
        FileTokenizer(path)
    assert "upgrade tokenizers" in str(err.value)


def test_demo_llamas_tokenizer_is_written_for_every_allowed_tokenizers():
    """Merges as "a b" strings: tokenizers 0.15 (the lower bound) cannot read the pairs newer ones write."""
    with open(load_model("demo-llama").tokenizer.path, encoding="utf-8") as f:
        merges = json.load(f)["model"]["merges"]
    assert len(merges) == 50000 and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)
