"""The markdown of README.md and docs/: its code fences, and the outputs pasted in it with the commands that made them.

A pasted output is a fenced block without a language, right after a marker that names the command it came from
(an HTML comment: the page does not show it, so the paragraph before it says the command too):

    <!-- output: count --preset qwen3-0.6b --tokens 100 -->             the whole output, as printed
    <!-- output, excerpt: count --preset qwen3-0.6b --tokens 100 -->    runs of consecutive lines of it, in order,
                                                                          separated by a line "..."
    <!-- measured: scripts/bench.py --reps 3 (scripts/bench_epyc.json) -->   a measure no test can rerun (before
                                                                               a fenced block or a table)

The command is what follows `python -m minitransformer` (shell quoting). It runs in a fresh process, as a user's
would, on a machine where GPT-2 is not on disk and the hub is out of reach (so the demo model answers, as the
README's main command shows). Flags after "output", comma-separated, say more:
    excerpt     the block is runs of the output's lines (above)
    rounding    floating-point rounding errors (1.14e-05), which side of a comparison they favour (ours,
                theirs) and other libraries' versions differ from machine to machine: they are compared as
                placeholders
    small-moe   the command reads /tmp/small-moe, the small random Mixtral scripts/make_small_moe.py writes
                (made afresh, in a temporary directory, for each run of the tests; needs torch and transformers)
    small-hybrid  the same for /tmp/small-hybrid, the small random Qwen3.5 of scripts/make_small_hybrid.py
Output is stderr then stdout (what a terminal shows: the notices come first), each line's trailing spaces cut.
Other fences name their language (sh, python, text for a drawing). tests/project/test_docs.py checks every file and
every block; scripts/refresh_docs.py reruns the commands and rewrites the blocks.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^\s*<!--\s*(output|measured)\s*((?:,\s*[\w-]+\s*)*):\s*(.*?)\s*-->\s*$")
# the small random models a command may read: its flag -> the script that writes it (at /tmp/<flag> in the docs)
SMALL_MODELS = {"small-moe": "make_small_moe.py", "small-hybrid": "make_small_hybrid.py"}
FLAGS = {"excerpt", "rounding", *SMALL_MODELS}
LANGUAGES = {"sh", "python", "text", "json"}


def markdown_files() -> list[Path]:
    """README.md and every markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass
class Fence:
    """A fenced code block: its lines (0-based, the opening and closing fence lines), its info string, its indent."""

    path: Path
    open_line: int
    close_line: int | None  # None: never closed
    info: str
    indent: str
    content: list[str]  # the lines between the fences, the fence's indent removed


def fences(path: Path, text: str | None = None) -> list[Fence]:
    """The fenced code blocks of a markdown file, as CommonMark reads them: a fence of three or more backticks or
    tildes, indented at most three spaces, closed by a fence of the same character, at least as long, without an
    info string; everything between is code, whatever it looks like."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Fence] = []
    i = 0
    while i < len(lines):
        opening = re.match(r"^( {0,3})(`{3,}|~{3,})(.*)$", lines[i])
        if not opening or (opening.group(2)[0] == "`" and "`" in opening.group(3)):
            i += 1
            continue
        indent, fence, info = opening.group(1), opening.group(2), opening.group(3).strip()
        close = None
        for j in range(i + 1, len(lines)):
            closing = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", lines[j])
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                close = j
                break
        end = len(lines) if close is None else close
        content = [
            line.removeprefix(indent) if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : end]
        ]
        found.append(Fence(path, i, close, info, indent, content))
        i = end + 1
    return found


@dataclass
class Block:
    """A pasted output: its fence, its marker, and the command that made it."""

    fence: Fence
    kind: str  # "output" | "measured"
    flags: set[str] = field(default_factory=set)
    command: str = ""  # the arguments after `python -m minitransformer`; for "measured", where it came from
    prose: str = ""  # the text before the marker (whitespace collapsed): it must say the command too

    @property
    def where(self) -> str:
        return f"{self.fence.path.relative_to(ROOT)}:{self.fence.open_line + 1}"

    @property
    def excerpt(self) -> bool:
        return "excerpt" in self.flags

    def segments(self) -> list[list[str]]:
        """The block's runs of lines: the whole block, or its parts between lines "..." of an excerpt."""
        lines = [line.rstrip() for line in self.fence.content]
        if not self.excerpt:
            return [lines]
        runs: list[list[str]] = [[]]
        for line in lines:
            if line.strip() == "...":
                runs.append([])
            else:
                runs[-1].append(line)
        return [run for run in runs if run]


def blocks(path: Path) -> tuple[list[Block], list[str]]:
    """The pasted outputs of a file, and what is wrong with its markers: a fence without a language and without a
    marker, a marker that no fence follows, an unknown flag."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found, problems = [], []
    by_line = {f.open_line: f for f in fences(path, text)}
    inside = {k for f in fences(path, text) for k in range(f.open_line, (f.close_line or len(lines)) + 1)}
    for i, line in enumerate(lines):
        marker = MARKER.match(line)
        if not marker or i in inside:
            continue
        kind, flags, command = (
            marker.group(1),
            {f.strip() for f in marker.group(2).split(",") if f.strip()},
            marker.group(3),
        )
        following = next((k for k in range(i + 1, len(lines)) if lines[k].strip()), None)
        where = f"{path.relative_to(ROOT)}:{i + 1}"
        if kind == "measured" and following is not None and lines[following].startswith("|"):
            continue  # a table of measures (docs/speed.md): said where it came from, never rerun
        if following is None or following not in by_line or by_line[following].info:
            problems.append(f"{where}: a marker with no fenced block (without a language) right after it")
            continue
        if flags - FLAGS or (kind == "measured" and flags):
            problems.append(f"{where}: unknown flags {sorted(flags - FLAGS) or sorted(flags)}")
        prose = " ".join(" ".join(lines[max(0, i - 15) : i]).split())
        found.append(Block(by_line[following], kind, flags, command, prose))
    marked = {b.fence.open_line for b in found}
    for f in by_line.values():
        if not f.info and f.open_line not in marked:
            problems.append(f"{path.relative_to(ROOT)}:{f.open_line + 1}: a fenced block without a language and "
                            f"without a marker (<!-- output: COMMAND --> or <!-- measured: WHERE -->)")  # fmt: skip
    return found, problems


# --- running the commands -----------------------------------------------------------------------------------------
def offline_env(scratch: Path) -> dict[str, str]:
    """A machine without GPT-2 and without the hub: the demo answers, as in the README's main command."""
    return {**os.environ, "MINITRANSFORMER_WEIGHTS": str(scratch / "weights"), "HF_HUB_CACHE": str(scratch / "hf"),
            "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip


class Runner:
    """Runs each command once (several blocks may paste the same one) and keeps what it printed: `at_once` commands at
    a time, on threads of its own that wait for them; `start` hands it a list to run before they are asked for."""

    def __init__(self, scratch: Path | None = None, at_once: int = 1) -> None:
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="mt-docs-"))
        self._outputs: dict[tuple[str, bool], Future[str]] = {}
        self._small: dict[str, Path] = {}
        self._lock = threading.Lock()  # one thread at a time hands out a command
        self._making = threading.Lock()  # ... and makes a small model
        self._pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="docs-commands")

    def small_moe(self) -> Path:
        """The small random Mixtral that scripts/make_small_moe.py writes, made once per runner."""
        return self.small("small-moe")

    def small(self, flag: str) -> Path:
        """The small random model of `flag` (SMALL_MODELS), written by its script once per runner."""
        with self._making:
            if flag not in self._small:
                directory, script = self.scratch / flag, SMALL_MODELS[flag]
                made = subprocess.run([sys.executable, str(ROOT / "scripts" / script), str(directory)],
                                      capture_output=True, text=True, cwd=ROOT)  # fmt: skip
                if made.returncode != 0:
                    raise RuntimeError(f"scripts/{script} failed: {made.stderr.strip()[-500:]}")
                self._small[flag] = directory
            return self._small[flag]

    def start(self, blocks: list[Block]) -> None:
        """Run the blocks' commands in the background, in their order: a command is mostly one thread (a shape-only
        count), and the tests that read them wait only for their own (the docs' 64 commands one after the other took
        152 s of the suite on the Intel Xeon here). Each output is still its own fresh process's, and the bits of a
        product do not depend on the load (engine/threads.py)."""
        for block in blocks:
            self._future(block)

    def stop(self) -> None:
        """Drop the commands not yet begun and wait for those running."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def output(self, block: Block) -> str:
        """What the block's command prints: stderr then stdout, trailing spaces cut, as the block must read."""
        return self._future(block).result()

    def _future(self, block: Block) -> Future[str]:
        small = [flag for flag in SMALL_MODELS if flag in block.flags]
        key = (block.command, bool(small))
        with self._lock:
            if key not in self._outputs:
                self._outputs[key] = self._pool.submit(self._run, block, small)
            return self._outputs[key]

    def _run(self, block: Block, small: list[str]) -> str:
        args = shlex.split(block.command)
        for flag in small:
            args = [str(self.small(flag)) if a == f"/tmp/{flag}" else a for a in args]
        result = subprocess.run([sys.executable, "-m", "minitransformer", *args], capture_output=True, text=True,
                                env=offline_env(self.scratch), cwd=ROOT)  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"{block.where}: `{block.command}` failed: {result.stderr.strip()}")
        text = result.stderr + result.stdout
        for flag in small:
            text = text.replace(str(self.small(flag)), f"/tmp/{flag}")
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def normalise(text: str, flags: set[str]) -> str:
    """What may differ from one machine to another, made alike: with `rounding`, rounding errors, which pass they
    favour and other libraries' versions."""
    if "rounding" in flags:
        text = re.sub(r"\b\d\.\d+e[-+]\d+\b", "<rounding>", text)
        text = re.sub(r"\b(ours|theirs)\b +", "<closer> ", text)
        text = re.sub(r"\btransformers \d+\.\d+\S*", "transformers <version>", text)
    return text


def mismatch(block: Block, output: str) -> str | None:
    """None where the block is what the command printed (the whole of it, or runs of it in order); else why not."""
    printed = normalise(output, block.flags).splitlines()
    segments = [normalise("\n".join(s), block.flags).splitlines() for s in block.segments()]
    if not block.excerpt:
        if segments[0] == printed:
            return None
        first = next((k for k, (a, b) in enumerate(zip(segments[0], printed)) if a != b), min(len(segments[0]),
                                                                                               len(printed)))  # fmt: skip
        return (f"line {first + 1} differs:\n  pasted:  {segments[0][first] if first < len(segments[0]) else '(end)'}"
                f"\n  printed: {printed[first] if first < len(printed) else '(end)'}")  # fmt: skip
    start = 0
    for segment in segments:
        at = next((k for k in range(start, len(printed) - len(segment) + 1)
                   if printed[k : k + len(segment)] == segment), None)  # fmt: skip
        if at is None:
            missing = next((line for line in segment if line not in printed[start:]), segment[0])
            return f"not printed (after line {start} of the output): {missing!r}"
        start = at + len(segment)
    return None


def refreshed(block: Block, output: str) -> list[str] | None:
    """The block's new lines from a fresh output: all of it, or for an excerpt the same runs found again, each by its
    first line (or, if that line changed, by its first column); None where a run cannot be found."""
    printed = output.splitlines()
    if not block.excerpt:
        return printed
    lines: list[str] = []
    start = 0
    for k, segment in enumerate(block.segments()):
        head = segment[0]
        label = re.split(r"\s{2,}|:", head.strip(), maxsplit=1)[0]
        at = next((i for i in range(start, len(printed)) if printed[i].rstrip() == head), None)
        if at is None:
            at = next((i for i in range(start, len(printed))
                       if re.split(r"\s{2,}|:", printed[i].strip(), maxsplit=1)[0] == label
                       and printed[i][: len(head) - len(head.lstrip())].strip() == ""), None)  # fmt: skip
        if at is None:
            return None
        if k:
            lines.append("...")
        lines += printed[at : at + len(segment)]
        start = at + len(segment)
    return lines
