"""What a user sees, frozen: the output of a few commands, byte for byte as the code before issue 25's refactoring
printed it (tests/frozen/, one file a command). A change of the house that changes none of what it computes or
prints must leave every one of them as it is: a count's text, JSON, CSV and HTML (a hybrid of each kind among them:
Qwen3.5's linear attention, Mamba-2's state-space layers, Nemotron-H's mixture of both with attention and experts),
params, generate (text and JSON, GPT-2, the Llama family and a Mistral with its window, the demo models' and a
checkpoint's weights) and trace.

scripts/snapshot_outputs.py does the same for every command of every preset and every family's random models, to be
compared by hand before and after a change; these few are the suite's.

Counts, parameters and every word are compared exactly. The numbers a run computes (a generation's probabilities,
trace's values) are compared to float32's rounding: another CPU's BLAS kernels or another NumPy (the lowest versions
CI also runs) add a product's terms in another order and move their last digits, while the code is the same.

A change meant to change what a user sees rewrites these files deliberately: `PYTHONPATH=tests python
tests/project/test_frozen_outputs.py --write` (tests/ on the path for conftest, as pytest puts it), and the diff of
tests/frozen/ is the change's to explain.
"""

from __future__ import annotations

import difflib
import math
import re
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


# A number with a fraction or an exponent: what a run computes. Whole numbers (counts, ids, shapes) are text.
FLOAT = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")
RELATIVE = 1e-4  # float32's rounding through a forward pass, as the logits' tolerance against transformers


def last_place(literal: str) -> float:
    """One unit in the last digit a literal prints: 0.1235 -> 1e-4, 2.5e-05 -> 1e-06."""
    mantissa, _, exponent = literal.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def same_but_rounding(frozen: str, now: str) -> bool:
    """The same text, and the same numbers within float32's rounding or a flip of the last digit printed."""
    if FLOAT.split(frozen) != FLOAT.split(now):
        return False
    pairs = zip(FLOAT.findall(frozen), FLOAT.findall(now))
    return all(math.isclose(float(a), float(b), rel_tol=RELATIVE, abs_tol=1.5 * max(last_place(a), last_place(b)))
               for a, b in pairs)  # fmt: skip


def test_rounding_is_all_that_may_differ():
    assert same_but_rounding('{"p": 0.9960004687309265}', '{"p": 0.996000349521637}')
    assert same_but_rounding("x 0.1235 y", "x 0.1234 y")  # a printed rounding flipped
    assert not same_but_rounding('{"p": 0.9960004687309265}', '{"p": 0.9860004687309265}')
    assert not same_but_rounding("1,234 MACs", "1,235 MACs")  # counts are exact
    assert not same_but_rounding(" Paris 0.5", " Rome 0.5")
    assert not same_but_rounding("1.0 2.0", "1.0 2.0 3.0")


@pytest.mark.parametrize("name", CASES)
def test_the_output_is_what_it_was(name):
    frozen = (FROZEN / name).read_text("utf-8")
    now = output(CASES[name])
    if not same_but_rounding(frozen, now):
        diff = difflib.unified_diff(frozen.splitlines(), now.splitlines(), "frozen", "now", lineterm="", n=1)
        pytest.fail(f"{name} differs from tests/frozen/{name}:\n" + "\n".join(list(diff)[:40]))


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FROZEN.mkdir(exist_ok=True)
    for name, args in CASES.items():
        (FROZEN / name).write_text(output(args), "utf-8")
        print(f"wrote tests/frozen/{name}")
