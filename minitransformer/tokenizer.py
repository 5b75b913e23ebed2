"""GPT-2's byte-level BPE tokenizer, built offline from the vocabulary files shipped in the package.

Every GPT-2 checkpoint (small to XL, distilgpt2) shares this one vocabulary, so the tokenizer never
needs the network. The `tokenizers` library does the work; we only assemble it the way GPT-2 defines
it: split with GPT-2's regex, map bytes to printable characters, apply the merges.
"""

from __future__ import annotations

import codecs
import hashlib
from functools import cached_property, lru_cache
from importlib import resources

from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from .errors import UserError
from .ids import as_token_ids

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
        raise UserError(f"{what} has a byte that is not UTF-8 (0x{code - 0xDC00:02x} at byte {offset}); give it "
                        "as UTF-8 text (from Latin-1, for example: iconv -f latin1 -t utf-8)")  # fmt: skip
    raise UserError(f"{what} has a lone surrogate (U+{code:04X} at character {at}), which is not a character; "
                    "give valid unicode text")  # fmt: skip


class Tokenizer:
    """encode(str) -> list[int] and decode(list[int]) -> str, exactly as OpenAI's GPT-2 encoder."""

    def __init__(self) -> None:
        bpe = models.BPE.from_file(_vocab_file("encoder.json"), _vocab_file("vocab.bpe"))
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
        ids = as_token_ids(token_ids, self.vocab_size, batch=False, vocabulary="the GPT-2 vocabulary")
        return b"".join(table[t] for t in ids.tolist())

    def token_str(self, token_id: int) -> str:
        """One token as text, with partial UTF-8 characters shown as escapes (for tables of candidates)."""
        return self.token_bytes([token_id]).decode("utf-8", errors="backslashreplace")

    def stream_decoder(self) -> "StreamDecoder":
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

