"""The README stays true: its Python examples run as written (and the API page's), its commands are the ones CI
runs, its main command prints what it pastes, and the code's layout table (docs/architecture.md) names every
module. Every other pasted output of README.md and docs/ is tests/project/test_docs.py's."""

from __future__ import annotations

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()
API = (ROOT / "docs" / "api.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def test_the_python_example_runs():
    code = re.search(r"```python\n(.*?)```", API, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)  # noqa: S102 - our own documentation
    out, cache = namespace["out"], namespace["cache"]
    assert namespace["ids"] == [464, 3139, 286, 4881, 318]
    assert out.text.startswith(" Paris") and len(out.new_tokens) == 8
    assert list(cache) == [f"blocks.{i}.attn.weights" for i in range(4)]
    bound = namespace["bound"]  # what the example's comments say of it
    assert bound.compute_bound_batch is None and bound.weights_compute_bound_batch == 327


def test_the_readme_python_example_runs_and_says_what_it_prints():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own documentation
    said = [line.split("  # ", 1)[1] for line in code.splitlines() if "  # " in line]
    out = namespace["out"]
    assert said == [repr(out.text), str(out.ledger.phases[0].find("scores", layer=3).dot_products)]


def test_ci_runs_the_test_command_of_the_readme():
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_ci_also_runs_the_suite_at_the_lower_bounds_as_the_readme_says():
    block = next(c for c in re.findall(r"```sh\n(.*?)\n```", README, re.S) if "test_lower_bounds" in c)
    command = block.split("#")[0].strip()
    assert command == "scripts/test_lower_bounds.sh" and (ROOT / command).stat().st_mode & 0o100  # executable
    assert any(line.split()[-1] == command for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip())


def test_the_pasted_output_is_what_the_main_command_prints(tmp_path):
    from conftest import run_cli

    pasted = re.search(r'<!-- output: generate "The capital of France is" -->\n```\n(.*?)```', README, re.S).group(1)
    main = next(c for c in re.findall(r"```sh\n(.*?)\n```", README, re.S) if "generate" in c)
    args = main.split("-m minitransformer ")[1]
    assert args == 'generate "The capital of France is"'
    env = {"MINITRANSFORMER_WEIGHTS": str(tmp_path / "weights"), "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip  # a machine without GPT-2 or the hub, as pasted
    result = run_cli("generate", "The capital of France is", env=env)
    assert result.returncode == 0
    printed = "\n".join(line.rstrip() for line in (result.stderr + result.stdout).strip().splitlines())
    assert printed == pasted.strip()


def test_the_layout_table_names_every_module():
    table = ARCHITECTURE.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w/]+\.py)`", table))
    package = ROOT / "minitransformer"
    modules = {p.relative_to(package).as_posix() for p in package.rglob("*.py")} - {"__main__.py"}
    modules = {m for m in modules if not m.endswith("__init__.py")}
    assert named == modules, f"missing: {sorted(modules - named)}; gone: {sorted(named - modules)}"
