"""What people are told, rather than programmers: the one exception meant for them, its kind for a refused option,
and a note that is no error (`note`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


class UserError(Exception):
    """Bad input from the person running the tool: the message is one line that says what to do.

    The CLI prints it on stderr and exits with status 2; the Python API lets it propagate.
    """


def readable(path) -> None:
    """Refuse in words a file this user may not open (or a directory where a file belongs): the libraries that read
    model files name another cause (safetensors: "No such file"; tokenizers: an unknown format)."""
    try:
        open(path, "rb").close()
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None


def writable(out) -> None:
    """Refuse in words an `out` the API cannot print to (an int, a path as text: an AttributeError at the first
    print); None takes sys.stdout."""
    if out is not None and not callable(getattr(out, "write", None)):
        raise UserError(
            f"out must be something to write to (sys.stdout, io.StringIO(), an open file) or None, not {out!r:.60}"
        )


class OptionError(UserError):
    """An option refused: `option` (the API's name of it) and `rule` (what it must be), read as one message.

    A rule about options that go together names the others it speaks of as {name} (`others`), so that a caller that
    knows every option by another name (the CLI by its flags) renames them all in one place (`named`): the API says
    "precision bfloat16 ... leave out dtype float64", the CLI "--precision bfloat16 ... leave out --dtype float64".
    """

    def __init__(self, option: str, rule: str, others: tuple[str, ...] = ()) -> None:
        self.option, self.rule, self.others = option, rule, others
        super().__init__(self._said({}))

    def named(self, names: Mapping[str, str]) -> UserError:
        """The same refusal naming each option as `names` does (an option it does not list keeps its API name)."""
        return UserError(self._said(names))

    def _said(self, names: Mapping[str, str]) -> str:
        rule = self.rule
        if self.others:
            others = "|".join(map(re.escape, self.others))
            rule = re.sub(rf"\{{({others})\}}", lambda found: names.get(found[1], found[1]), rule)
        return f"{names.get(self.option, self.option)} {rule}"


# The notes held back while the CLI runs a command (held_notes), None while nobody holds them
_held: list[str] | None = None


def note(text: str) -> None:
    """A line on stderr that is no error (a default a config.json leaves to transformers, the demo model answering for
    GPT-2): said at once, or, while the CLI holds notes, when it says them (say_held_notes)."""
    if _held is None:
        print(text, file=sys.stderr)
    else:
        _held.append(text)


@contextmanager
def held_notes() -> Iterator[None]:
    """Hold every note made inside, until say_held_notes; those not said by the end are dropped (a command refused
    before its output began says one line, its refusal, and the notes that explained the output have none to explain)."""
    global _held
    _held = []
    try:
        yield
    finally:
        _held = None


def say_held_notes(stream) -> None:
    """The notes held so far, on `stream` (stderr), each once."""
    if _held:
        for text in _held:
            print(text, file=stream)
        _held.clear()
