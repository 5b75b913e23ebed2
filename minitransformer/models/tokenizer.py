"""GPT-2's byte-level BPE tokenizer, built offline from the vocabulary files shipped in the package.

Every GPT-2 checkpoint (small to XL, distilgpt2) shares this one vocabulary, so the tokenizer never
needs the network. The `tokenizers` library does the work; we only assemble it the way GPT-2 defines
it: split with GPT-2's regex, map bytes to printable characters, apply the merges.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Sequence
from functools import cached_property, lru_cache
from importlib import resources

import tokenizers
from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from ..errors import UserError, readable
from .ids import ANY_ID, as_token_ids

VOCAB_FILES_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
END_OF_TEXT = "<|endoftext|>"


def _vocab_file(name: str) -> str:
    path = resources.files("minitransformer") / "data" / "gpt2" / name
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != VOCAB_FILES_SHA256[name]:
        raise UserError(f"the GPT-2 vocabulary file {name} is damaged (sha256 mismatch); reinstall minitransformer")
    return str(path)


@lru_cache(maxsize=1)
def _byte_of_char() -> dict[str, int]:
    """GPT-2's reversible map from bytes to printable unicode characters, inverted.

    GPT-2 never puts raw bytes in its vocabulary: the 188 printable Latin-1 bytes stand for themselves
    and the other 68 are shifted to code points 256 and up, so that every token is a visible string.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars.update({b: chr(256 + i) for i, b in enumerate(shifted)})
    return {c: b for b, c in chars.items()}


def _check_text(text, what: str = "the text") -> None:
    """Refuse what has no UTF-8 bytes for GPT-2 to read: not a str, or a str with a lone surrogate.

    Python hands over a command-line argument that is not UTF-8 with each bad byte as a surrogate
    U+DC80..U+DCFF ("surrogateescape"), so those are named as the byte the user typed and where it is;
    any other lone surrogate (possible only from Python) is named as the code point. Refusing beats
    replacing with U+FFFD: the model would be continuing text nobody wrote.
    """
    if not isinstance(text, str):
        raise UserError(f"{what} must be a str, not {type(text).__name__}")
    try:
        text.encode("utf-8")
        return
    except UnicodeEncodeError as err:
        at = err.start
    code = ord(text[at])
    if 0xDC80 <= code <= 0xDCFF:
        offset = len(text[:at].encode("utf-8"))
        raise UserError(
            f"{what} has a byte that is not UTF-8 (0x{code - 0xDC00:02x} at byte {offset}); give it "
            "as UTF-8 text (from Latin-1, for example: iconv -f latin1 -t utf-8)"
        )
    raise UserError(
        f"{what} has a lone surrogate (U+{code:04X} at character {at}), which is not a character; "
        "give valid unicode text"
    )


class Tokenizer:
    """encode(str) -> list[int] and decode(list[int]) -> str, exactly as OpenAI's GPT-2 encoder: the shipped GPT-2
    vocabulary and merges, or another byte-level BPE's (a GPT-2 directory's own vocab.json and merges.txt)."""

    def __init__(self, vocab: str | None = None, merges: str | None = None, name: str = "the GPT-2 vocabulary") -> None:
        if vocab is None or merges is None:
            vocab, merges = _vocab_file("encoder.json"), _vocab_file("vocab.bpe")
        else:
            readable(vocab)
            readable(merges)
        try:
            bpe = models.BPE.from_file(vocab, merges)
        except Exception as err:  # the library raises its own exception types for a bad file
            raise UserError(
                f"{vocab} and {merges} are not a BPE vocabulary and merges tokenizers can read ({err}); re-download them"
            ) from None
        self.name = name
        self._tokenizer = _HFTokenizer(bpe)
        # GPT-2 splits on its own regex and never adds a leading space.
        self._tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        self._tokenizer.decoder = decoders.ByteLevel()
        self.vocab_size = self._tokenizer.get_vocab_size()
        self.eot_token = self._tokenizer.token_to_id(END_OF_TEXT)

    def encode(self, text: str, *, what: str = "the text") -> list[int]:
        """Text -> token ids; `what` names the text in the refusal of something that is not text."""
        _check_text(text, what)
        # "<|endoftext|>" in user text is just text to GPT-2's encoder, as in OpenAI's encoder.py.
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, token_ids: list[int]) -> str:
        return self.token_bytes(token_ids).decode("utf-8", errors="replace")

    def vocabulary(self) -> dict[str, int]:
        """Each token's string -> its id."""
        return self._tokenizer.get_vocab()

    @cached_property
    def _bytes_of_token(self) -> list[bytes]:
        byte_of_char = _byte_of_char()
        vocab = self._tokenizer.get_vocab()
        table = [b""] * self.vocab_size
        for token, token_id in vocab.items():
            table[token_id] = token.encode() if token == END_OF_TEXT else bytes(byte_of_char[c] for c in token)
        return table

    def token_bytes(self, token_ids: list[int]) -> bytes:
        """The raw bytes a list of tokens stands for (a token may hold part of a UTF-8 character)."""
        table = self._bytes_of_token
        ids = as_token_ids(token_ids, self.vocab_size, batch=False, vocabulary=self.name)
        return b"".join(table[t] for t in ids.tolist())

    def token_str(self, token_id: int) -> str:
        """One token as text, with partial UTF-8 characters shown as escapes (for tables of candidates)."""
        return self.token_bytes([token_id]).decode("utf-8", errors="backslashreplace")

    def stream_decoder(self, context: Sequence[int] = ()) -> StreamDecoder:
        """`context` (the prompt) changes nothing here: a GPT-2 token's bytes do not depend on its neighbours."""
        return StreamDecoder(self)


class StreamDecoder:
    """Turns tokens into text one at a time, holding back bytes of a character not yet complete."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._utf8.decode(self._tokenizer.token_bytes([token_id]))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


@lru_cache(maxsize=1)
def load_tokenizer() -> Tokenizer:
    """The GPT-2 tokenizer (shared by every GPT-2 model); built once per process."""
    return Tokenizer()


class FileTokenizer:
    """A model directory's own tokenizer.json (Llama, Mistral, Qwen2, ...), run by the `tokenizers` library.

    encode adds what the file's post-processor adds (a Llama tokenizer puts <s> first), as
    transformers' AutoTokenizer does by default.
    """

    def __init__(self, path) -> None:
        readable(path)  # tokenizers says nothing of permissions: its error would ask for an upgrade
        try:
            self._tokenizer = _HFTokenizer.from_file(str(path))
        except Exception as err:  # the library raises its own exception types for a bad file
            raise UserError(
                f"{path} is not a tokenizer file tokenizers {tokenizers.__version__} can read ({err}); "
                "re-download it, or upgrade tokenizers if it was written by a newer one"
            ) from None
        self.path = str(path)
        self.vocab_size = self._tokenizer.get_vocab_size()
        # Byte-fallback tokens ("<0xE2>", in Llama 2's and Mistral's vocabularies) stand for one byte each.
        vocab = self._tokenizer.get_vocab()
        self.byte_tokens = frozenset(i for token, i in vocab.items() if _BYTE_TOKEN.fullmatch(token))

    def encode(self, text: str, *, what: str = "the text") -> list[int]:
        _check_text(text, what)  # refused as GPT-2's tokenizer refuses it: one door for every tokenizer
        try:
            return self._tokenizer.encode(text, add_special_tokens=True).ids
        except Exception as err:  # a file the library reads but cannot encode with (a WordLevel [UNK] it lacks)
            raise UserError(
                f"{self.path} cannot encode {what} ({err}); fix or re-download the tokenizer, or give token ids"
            ) from None

    def decode(self, token_ids: list[int]) -> str:
        """The text of token ids (whole numbers of 0 or more, refused otherwise: 1.5 was read as 1, -1 an
        OverflowError); an id past the file's vocabulary (a model's padded rows) is empty text, as the library has it."""
        ids = as_token_ids(token_ids, ANY_ID, batch=False)
        return self._tokenizer.decode(ids.tolist(), skip_special_tokens=False)

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])

    def vocabulary(self) -> dict[str, int]:
        """Each token's string -> its id (the added tokens too)."""
        return self._tokenizer.get_vocab()

    def stream_decoder(self, context: Sequence[int] = ()) -> TextDiffStream:
        """Text of the tokens pushed, decoded after `context` (the prompt): "▁Paris" after a prompt is " Paris"."""
        return TextDiffStream(self.decode, held=self.byte_tokens, context=context)


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


class TextDiffStream:
    """Streams text by decoding all tokens so far and emitting what is new, once it can no longer change.

    Decoders of SentencePiece-style vocabularies join tokens with context (a leading space is dropped
    at the start), so the text of one token alone is not its contribution to the whole: a continuation
    is decoded after its `context`, the prompt, whose text counts as already shown. What is new
    waits while the text ends in half a character, and while a run of `held` tokens (byte fallback)
    is open: the decoder turns a run of bytes that is not valid UTF-8 into one "\ufffd" per byte, those
    it showed as characters a token earlier included, so a run is only final once a token ends it.
    """

    def __init__(self, decode, held: frozenset[int] = frozenset(), context: Sequence[int] = ()) -> None:
        self._decode, self._held, self._tokens = decode, held, list(context)
        # The context's text counts as shown; half a character at its end may be completed by what follows.
        self._shown = decode(self._tokens).rstrip("\ufffd") if self._tokens else ""

    def push(self, token_id: int) -> str:
        self._tokens.append(token_id)
        if token_id in self._held:
            return ""
        text = self._decode(self._tokens)
        return "" if text.endswith("\ufffd") else self._new(text)  # half a character: wait for the rest

    def flush(self) -> str:
        return self._new(self._decode(self._tokens))

    def _new(self, text: str) -> str:
        """What `text` adds to what was shown. Should a decoder still rewrite shown text, what follows the
        rewritten part is shown again rather than lost."""
        start = len(self._shown) if text.startswith(self._shown) else len(_common_prefix(text, self._shown))
        self._shown = text
        return text[start:]


def _common_prefix(a: str, b: str) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a[:n]


class NoTokenizer:
    """A model directory without tokenizer.json: it runs from token ids, and says so if given text."""

    def __init__(self, directory) -> None:
        self.directory = str(directory)
        self.vocab_size = None

    def encode(self, text: str, *, what: str = "the text") -> list[int]:
        _check_text(text, what)
        raise UserError(
            f"{self.directory} has no tokenizer.json, so text cannot be turned into tokens; give token "
            f"ids instead (--ids 1,2,3 on the command line, a list of integers in Python)"
        )

    def decode(self, token_ids: list[int]) -> str:
        """Each id as <id>, the ids checked as the other tokenizers check them (a float, -1 or one number refused)."""
        ids = as_token_ids(token_ids, ANY_ID, batch=False)
        return "".join(f"<{t}>" for t in ids.tolist())

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])

    def stream_decoder(self, context: Sequence[int] = ()) -> TextDiffStream:
        return TextDiffStream(self.decode)  # "<5>" whatever comes before it: the context changes nothing


def tokenizer_of(directory) -> FileTokenizer | NoTokenizer:
    """The tokenizer a Llama-family model directory ships, or a stand-in that takes only ids."""
    from pathlib import Path

    path = Path(directory) / "tokenizer.json"
    return FileTokenizer(path) if path.is_file() else NoTokenizer(directory)


# Text a tokenizer that is GPT-2's encodes as the shipped one does (letters, digits, spaces, punctuation, a word
# split in two, UTF-8 of two and four bytes); "<|endoftext|>" left out: a tokenizer.json reads it as its special
# token, our GPT-2 encoder as text, as OpenAI's encoder.py does.
_PROBE = "The capital of France is Paris.  It's 2,026 km\n\tfrom naïveté, Zürich and 東京 😀 antidisestablishment"


def gpt2_tokenizer_of(directory) -> Tokenizer | FileTokenizer | None:
    """A GPT-2 directory's own tokenizer where it ships one that is not GPT-2's (its tokenizer.json, which
    transformers' AutoTokenizer reads first; else its vocab.json and merges.txt, a byte-level BPE as GPT-2's); None
    for the shipped GPT-2 encoder: a directory without them, or whose vocabulary is GPT-2's and encodes as it does."""
    from pathlib import Path

    shipped = load_tokenizer()
    path, vocab, merges = (Path(directory) / name for name in ("tokenizer.json", "vocab.json", "merges.txt"))
    own: Tokenizer | FileTokenizer
    if path.is_file():
        own = FileTokenizer(path)
    elif vocab.is_file() and merges.is_file():
        own = Tokenizer(str(vocab), str(merges), name=f"{vocab}'s vocabulary")
    else:
        return None
    same = own.vocabulary() == shipped.vocabulary() and own.encode(_PROBE) == shipped.encode(_PROBE)
    return None if same else own
