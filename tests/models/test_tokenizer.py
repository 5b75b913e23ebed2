"""The tokenizer agrees with OpenAI's GPT-2 encoding (tiktoken, built from the same files) on any string."""

from __future__ import annotations

import hashlib
import unicodedata
from importlib import resources
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer import load_tokenizer
from minitransformer.models.tokenizer import VOCAB_FILES_SHA256

tok = load_tokenizer()


@pytest.fixture(scope="module")
def openai_gpt2():
    """OpenAI's own GPT-2 encoder (tiktoken's "gpt2" definition) from the shipped files, offline."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is in the [test] extra")
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str

    data = resources.files("minitransformer") / "data" / "gpt2"
    # tiktoken reads a local file through blobfile, which older tiktokens need installed and the [test] extra does
    # not ask for (the lower bounds passed only where an earlier run had left tiktoken's cache of these paths):
    # the files are local, so they are read as files.
    with patch("tiktoken.load.read_file", lambda path: Path(path).read_bytes()):
        ranks = data_gym_to_mergeable_bpe_ranks(str(data / "vocab.bpe"), str(data / "encoder.json"))
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)  # fmt: skip


def test_known_answers():
    assert tok.encode("The capital of France is") == [464, 3139, 286, 4881, 318]
    assert tok.encode(" Paris") == [6342]
    assert tok.encode("The dog") == [464, 3290]
    assert tok.vocab_size == 50257 and tok.eot_token == 50256


def test_vocabulary_files_are_the_published_ones():
    data = resources.files("minitransformer") / "data" / "gpt2"
    for name, digest in VOCAB_FILES_SHA256.items():
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() == digest
    assert VOCAB_FILES_SHA256["encoder.json"] == "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
    assert VOCAB_FILES_SHA256["vocab.bpe"] == "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"


TRICKY = [
    "",
    " ",
    "   leading and trailing   ",
    "tabs\tand\nnewlines\r\n\n\n  indented",
    "I'm sure they'll say it's what we've done; I'D SHOUT 'TIS",
    "naïve café résumé — “quotes” … ½ ² ٣ Ⅳ",
    "日本語のテキスト、中文，한국어",
    "emoji 🤖👩‍👩‍👧 flags 🇫🇷 and ZWJ",
    "<|endoftext|> is text here",
    "\u00a0non-breaking\u3000ideographic\u2028line sep\u200bzero width",
    "123456789 3.14159 1,000,000",
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_strings_match_openai(text, openai_gpt2):
    assert tok.encode(text) == openai_gpt2.encode_ordinary(text)
    assert tok.decode(tok.encode(text)) == text


WHITESPACE_AND_WORDS = st.lists(
    st.sampled_from(
        [" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "a", "Word", "'s", "'ll", "9", "é", "日", "🤖", "!", "."]
    ),
    max_size=30,
).map("".join)


# Characters assigned by Unicode 3.2. GPT-2's regex splits on letter, number and space classes, which each
# library takes from the Unicode tables it was built with: at our lower bounds (tokenizers 0.15, tiktoken
# 0.8) the two disagree on 9,392 code points, every one a character assigned since Unicode 15 (U+13441's
# is "\U00013441" "'s" to one and "\U00013441'" "s" to the other), and none assigned by Unicode 3.2.
CHARACTERS_EVERY_VERSION_KNOWS = st.characters().filter(lambda c: unicodedata.ucd_3_2_0.category(c) not in ("Cn", "Cs"))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(CHARACTERS_EVERY_VERSION_KNOWS, max_size=60), WHITESPACE_AND_WORDS))
def test_any_string_matches_openai_and_round_trips(openai_gpt2, text):
    ids = tok.encode(text)
    assert ids == openai_gpt2.encode_ordinary(text)
    assert tok.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_streaming_decoder_reassembles_split_characters(text):
    stream = tok.stream_decoder()
    pieces = [stream.push(t) for t in tok.encode(text)]
    assert "".join(pieces) + stream.flush() == text


def test_token_that_is_half_a_character_is_shown_escaped():
    ids = tok.encode("日")
    assert len(ids) > 1  # GPT-2 splits this character's three UTF-8 bytes over several tokens
    assert "\\x" in tok.token_str(ids[0])
