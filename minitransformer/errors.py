"""The one exception meant for people rather than programmers, and its kind for a refused option."""

from __future__ import annotations

import re
from collections.abc import Mapping


class UserError(Exception):
    """Bad input from the person running the tool: the message is one line that says what to do.

    The CLI prints it on stderr and exits with status 2; the Python API lets it propagate.
    """


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
