"""A GPT-2 directory's own tokenizer: transformers' AutoTokenizer reads the directory's tokenizer.json (else its
vocab.json and merges.txt), so a GPT-2-shaped model trained with another tokenizer is fed its own ids; GPT-2's own
files (what the Hub's gpt2 ships) keep the shipped encoder, OpenAI's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_gpt2
from minitransformer import load_model
from minitransformer.models.tokenizer import FileTokenizer, Tokenizer, load_tokenizer

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "minitransformer" / "data" / "gpt2"
TEXT = "The capital of France is Paris, and 東京 is far 😀"


def gpt2_files(directory: Path) -> Path:
    """The Hub's gpt2 tokenizer files: tokenizer.json (a byte-level BPE of GPT-2's vocabulary and merges, its
    <|endoftext|> an added special token) and vocab.json and merges.txt."""
    bpe = tokenizers.models.BPE.from_file(str(SHIPPED / "encoder.json"), str(SHIPPED / "vocab.bpe"))
    made = tokenizers.Tokenizer(bpe)
    made.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    made.post_processor = tokenizers.processors.ByteLevel(trim_offsets=False)
    made.decoder = tokenizers.decoders.ByteLevel()
    made.add_special_tokens([tokenizers.AddedToken("<|endoftext|>", special=True)])
    made.save(str(directory / "tokenizer.json"))
    bpe.save(str(directory))
    return directory


def other_bpe(directory: Path, vocab_size: int = 300) -> tokenizers.Tokenizer:
    """A byte-level BPE trained here on a few sentences: another tokenizer, as a GPT-2 retrained on another language
    ships one."""
    made = tokenizers.Tokenizer(tokenizers.models.BPE())
    made.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    made.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    made.train_from_iterator([TEXT, "capital cities of the world are far apart"] * 20, trainer)
    return made


def test_gpt2_s_own_files_keep_the_shipped_encoder(tmp_path):
    directory = gpt2_files(write_gpt2(tmp_path / "gpt2"))
    model = load_model(directory)
    assert model.tokenizer is load_tokenizer()
    assert model.prompt_ids("The capital of France is") == [464, 3139, 286, 4881, 318]


def test_a_gpt2_with_its_own_tokenizer_json_is_fed_its_ids(tmp_path):
    """It was fed GPT-2's: ids past its vocabulary refused, or, for a vocabulary as large, the wrong tokens."""
    made = other_bpe(tmp_path)
    directory = write_gpt2(tmp_path / "own", vocab_size=made.get_vocab_size())
    made.save(str(directory / "tokenizer.json"))
    model = load_model(directory)
    theirs = transformers.AutoTokenizer.from_pretrained(directory)
    assert isinstance(model.tokenizer, FileTokenizer)
    assert model.prompt_ids(TEXT) == theirs(TEXT)["input_ids"] != load_tokenizer().encode(TEXT)
    assert model.tokenizer.decode(model.prompt_ids(TEXT)) == TEXT


def test_a_gpt2_with_its_own_vocab_and_merges_alone_is_fed_their_ids(tmp_path):
    made = other_bpe(tmp_path)
    directory = write_gpt2(tmp_path / "files", vocab_size=made.get_vocab_size())
    made.model.save(str(directory))  # vocab.json and merges.txt
    model = load_model(directory)
    theirs = transformers.GPT2Tokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
    assert isinstance(model.tokenizer, Tokenizer) and model.tokenizer is not load_tokenizer()
    ids = model.prompt_ids(TEXT)
    assert ids == theirs(TEXT)["input_ids"] and model.tokenizer.decode(ids) == TEXT
    vocabulary = json.loads((directory / "vocab.json").read_text())
    assert max(ids) < len(vocabulary) < 50257


def test_a_gpt2_s_unreadable_vocabulary_is_refused_in_a_line(tmp_path):
    from minitransformer.errors import UserError

    directory = write_gpt2(tmp_path / "broken", vocab_size=300)
    (directory / "vocab.json").write_text("{not json")
    (directory / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(UserError, match="are not a BPE vocabulary and merges tokenizers can read") as refused:
        load_model(directory)
    assert "\n" not in str(refused.value)
