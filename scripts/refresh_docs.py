"""Rerun every command whose output README.md and docs/ paste, and rewrite the pasted blocks with what it prints now.

    python scripts/refresh_docs.py            # rewrite the blocks that changed, and say which
    python scripts/refresh_docs.py --check    # only say which differ (exit status 1 if any)

Each pasted block follows a marker naming its command (tests/docs_blocks.py says how to write one). A whole
output is replaced whole. An excerpt keeps its runs of lines: each run is found again in the new output by its
first line (or, where that line changed, by its first column, the stage or the label) and as many lines are
taken as before. To start an excerpt, or to change which lines it holds, write selector lines in its block and
run this script:

    @@ REGEX                  the first line of the output (after the previous run) that REGEX matches
    @@ REGEX @@ END_REGEX     from that line through the next line END_REGEX matches
    @@ REGEX @@ END_REGEX +N  ... and N lines more

with a line "..." between runs. Measured blocks (<!-- measured: ... -->) are left as they are. Then run
tests/project/test_docs.py, which judges: the blocks must read as the commands print, normalised only where a machine
makes them differ.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from docs_blocks import Block, Runner, blocks, markdown_files, mismatch, refreshed  # noqa: E402


def selected(block: Block, output: str) -> list[str] | None:
    """An excerpt written as selector lines (@@ REGEX [@@ END_REGEX]), made from the output; None if it has none."""
    lines = [line.strip() for line in block.fence.content]
    if not any(line.startswith("@@ ") for line in lines):
        return None
    printed, out, start = output.splitlines(), [], 0
    for line in lines:
        if line == "...":
            out.append("...")
            continue
        first, _, last = line.removeprefix("@@ ").partition(" @@ ")
        more = re.search(r" \+(\d+)$", last)  # END_REGEX +N: N lines past the line it matches
        last, extra = (last[: more.start()], int(more.group(1))) if more else (last, 0)
        at = next((i for i in range(start, len(printed)) if re.search(first, printed[i])), None)
        if at is None:
            raise SystemExit(f"{block.where}: no line of `{block.command}` matches {first!r}")
        end = at if not last else next((i for i in range(at, len(printed)) if re.search(last, printed[i])), None)
        if end is None:
            raise SystemExit(f"{block.where}: no line of `{block.command}` after {first!r} matches {last!r}")
        end += extra
        out += printed[at : end + 1]
        start = end + 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say which blocks differ; rewrite nothing")
    args = parser.parse_args()
    runner = Runner()
    stale = 0
    for path in markdown_files():
        found, problems = blocks(path)
        for problem in problems:
            print(f"warning: {problem}")
        lines = path.read_text(encoding="utf-8").splitlines()
        changed = False
        for block in sorted(found, key=lambda b: b.fence.open_line, reverse=True):  # from the end: lines stay put
            if block.kind != "output":
                continue
            output = runner.output(block)
            new = selected(block, output)
            if new is None and mismatch(block, output) is None:
                continue
            stale += 1
            new = new if new is not None else refreshed(block, output)
            if new is None:
                print(f"{block.where}: `{block.command}`: a run of the excerpt is no longer printed; choose its lines "
                      f"again with @@ selectors")  # fmt: skip
                continue
            print(f"{block.where}: `{block.command}` {'differs' if args.check else 'rewritten'}")
            if not args.check:
                f = block.fence
                lines[f.open_line + 1 : f.close_line] = [f.indent + line if line else "" for line in new]
                changed = True
        if changed:
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{stale} block{'' if stale == 1 else 's'} {'differ' if args.check else 'refreshed'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
