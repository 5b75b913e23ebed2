"""Style and types are settled by tools, not argued by hand: ruff's lint and format, and mypy, as pyproject.toml
configures them, over the package, the tests, the scripts and the examples (mypy: the package); and the package's
functions short enough to read as their steps."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SOURCES = ["minitransformer", "tests", "scripts", "examples"]


def _tool(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        if os.environ.get("MINITRANSFORMER_REQUIRE_LINT"):
            pytest.fail(f"{name} is not installed: pip install -e '.[lint]' (CI requires it)")
        pytest.skip(f"{name} is not installed here: pip install -e '.[lint]' to check style and types")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_to_say():
    _tool("ruff")
    done = _run("ruff", "check", "--no-cache", *SOURCES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_as_ruff_formats_it():
    _tool("ruff")
    done = _run("ruff", "format", "--check", "--no-cache", *SOURCES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_no_type_error():
    _tool("mypy")
    done = _run("mypy", "--no-incremental")  # files and settings: pyproject.toml's [tool.mypy]
    assert done.returncode == 0, done.stdout + done.stderr


# A function longer than this is several steps that want names of their own (issue 35).
LONGEST_FUNCTION = 60


def test_no_function_is_longer_than_a_screen():
    """Every function and method of the package, nested ones too, from its `def` line to its last (decorators not
    counted), at most LONGEST_FUNCTION lines."""
    package = ROOT / "minitransformer"
    longer = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    longer.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert not longer, f"{len(longer)} functions over {LONGEST_FUNCTION} lines:\n" + "\n".join(longer)
