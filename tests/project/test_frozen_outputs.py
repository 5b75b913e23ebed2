"""What a user sees, frozen: the output of a few commands, byte for byte as the code before issue 25's refactoring
printed it (tests/frozen/, one file a command). A change of the house that changes none of what it computes or
prints must leave every one of them as it is: a count's text, JSON, CSV and HTML (a hybrid of each kind among them:
Qwen3.5's linear attention, Mamba-2's state-space layers, Nemotron-H's mixture of both with attention and experts),
params, generate (text and JSON, GPT-2, the Llama family and a Mistral with its window, the demo models' and a
checkpoint's weights) and trace.

scripts/snapshot_outputs.py does the same for every command of every preset and every family's random models, to be
compared by hand before and after a change; these few are the suite's.

A change meant to change what a user sees rewrites these files deliberately: `python tests/project/test_frozen_outputs.py
--write`, and the diff of tests/frozen/ is the change's to explain.
"""

from __future__ import annotations

import difflib
import sys

import pytest

from conftest import ROOT, run_cli

FROZEN = ROOT / "tests" / "frozen"
PROMPT = "The capital of France is"
MISTRAL = (ROOT / "tests" / "fixtures" / "hf_llama" / "mistral_window").relative_to(ROOT).as_posix()

CASES: dict[str, tuple[str, ...]] = {
    "count-qwen3-0.6b.txt": ("count", "--preset", "qwen3-0.6b", "--tokens", "100"),
    "count-deepseek-v3.txt": ("count", "--preset", "deepseek-v3", "--tokens", "50", "--new-tokens", "2"),
    "count-deepseek-v3.2-exp.txt": ("count", "--preset", "deepseek-v3.2-exp", "--tokens", "2100", "--new-tokens", "2"),
    "count-mixtral-8x7b.csv": ("count", "--preset", "mixtral-8x7b", "--tokens", "20", "--new-tokens", "2", "--csv", "-"),
    "count-demo-llama.json": ("count", "--model", "minitransformer/data/demo-llama", "--tokens", "20", "--new-tokens", "2",
                              "--json", "-"),
    "count-gemma-3-1b.csv": ("count", "--preset", "gemma-3-1b", "--tokens", "20", "--new-tokens", "2", "--csv", "-"),
    "count-pythia-70m.html": ("count", "--preset", "pythia-70m", "--tokens", "10", "--new-tokens", "2", "--html", "-"),
    "count-qwen3.5-27b.txt": ("count", "--preset", "qwen3.5-27b", "--tokens", "100", "--new-tokens", "2"),
    "count-mamba-codestral-7b.txt": ("count", "--preset", "mamba-codestral-7b", "--tokens", "300", "--new-tokens", "2"),
    "count-nemotron-3-nano-30b-a3b.txt": ("count", "--preset", "nemotron-3-nano-30b-a3b", "--tokens", "200",
                                          "--new-tokens", "2"),
    "params-phi-3.5-mini.txt": ("params", "--preset", "phi-3.5-mini"),
    "generate-demo.txt": ("generate", PROMPT, "--model", "demo"),
    "generate-demo-llama.json": ("generate", PROMPT, "--model", "demo-llama", "--max-new-tokens", "4", "--json", "-"),
    "generate-mistral-window.json": ("generate", "--model", MISTRAL, "--ids", ",".join(map(str, range(3, 43))),
                                     "--max-new-tokens", "6", "--json", "-"),
    "trace-demo-llama.txt": ("trace", PROMPT, "--model", "demo-llama", "--layers", "0", "--new-tokens", "2"),
}  # fmt: skip


def output(args: tuple[str, ...]) -> str:
    """What the command prints on stdout, the repository's path written ROOT (a JSON names its weights' directory)."""
    done = run_cli(*args, timeout=900)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace(str(ROOT), "ROOT")


@pytest.mark.parametrize("name", CASES)
def test_the_output_is_what_it_was(name):
    frozen = (FROZEN / name).read_text("utf-8")
    now = output(CASES[name])
    if now != frozen:
        diff = difflib.unified_diff(frozen.splitlines(), now.splitlines(), "frozen", "now", lineterm="", n=1)
        pytest.fail(f"{name} differs from tests/frozen/{name}:\n" + "\n".join(list(diff)[:40]))


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FROZEN.mkdir(exist_ok=True)
    for name, args in CASES.items():
        (FROZEN / name).write_text(output(args), "utf-8")
        print(f"wrote tests/frozen/{name}")
