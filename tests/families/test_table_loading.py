"""The table loads a family's modules when it is first asked for something of it (families/table.py): a command that
runs one model loads its family and those before it in the table's order, where the package's import loaded all 41;
a list of the families, the model types or the presets, and a name no family has, load them all. Each case runs in a
fresh interpreter, whose table nothing has read yet."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from minitransformer import cli
from minitransformer.families.table import ARCHITECTURES, BUILT_IN, PRESETS, model_types
from minitransformer.models.hub import HUB_REPOS
from minitransformer.models.registry import DEMOS

# What a fresh interpreter prints after running its lines: the packages of the families the table loaded, in order
LOADED = "from minitransformer.families import table; print(' '.join(table.BUILT_IN[:-len(table._unloaded) or None]))"


def loaded_after(*lines: str) -> list[str]:
    code = "\n".join(["import contextlib, io", *lines, LOADED])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def family_package(family: str) -> str:
    """The package under families/ of a family of the table (its name and its package's may differ: qwen3_5)."""
    list(ARCHITECTURES)  # every family loaded
    modules = {p: sys.modules[f"minitransformer.families.{p}.family"] for p in BUILT_IN}
    return next(p for p, module in modules.items() if module.ARCHITECTURE is ARCHITECTURES[family])


def run(args: str) -> str:
    quiet = "with contextlib.redirect_stdout(io.StringIO()):\n    "
    return f"from minitransformer import cli\n{quiet}assert cli.main({args.split()!r}) == 0"


@pytest.mark.parametrize(
    ("args", "family"),
    [
        ("count --preset gpt2 --tokens 5", "gpt2"),
        ("generate --model demo Hi --max-new-tokens 1", "gpt2"),
        ("count --model demo-llama --tokens 5", "llama"),
        ("params --preset llama2-7b", "llama"),
        ("count --preset deepseek-v3 --tokens 5", "deepseek_v3"),
    ],
)
def test_a_command_that_runs_one_model_loads_the_families_up_to_its_own(args, family):
    until = BUILT_IN.index(family_package(family)) + 1
    assert loaded_after(run(args)) == list(BUILT_IN[:until]), (args, family)


def test_the_package_s_import_loads_no_family():
    assert loaded_after("import minitransformer") == []


@pytest.mark.parametrize(
    "line",
    [
        "list(table.ARCHITECTURES)",
        "len(table.PRESETS)",
        "dict(table.PRESETS)",
        "{**table.ARCHITECTURES}",
        "list(reversed(table.PRESETS.items()))",
        "repr(table.PRESETS)",
        "table.model_types()",
        "'no-such-preset' in table.PRESETS",
        "from minitransformer.families.table import read_config\n"
        "try:\n    read_config({'model_type': 'no-such-type'}, 'x')\nexcept Exception:\n    pass",
    ],
)
def test_a_list_or_a_name_no_family_has_loads_them_all(line):
    assert loaded_after("from minitransformer.families import table", line) == list(BUILT_IN)


def test_a_config_json_is_read_by_the_first_family_in_the_table_s_order_that_reads_its_model_type():
    assert loaded_after(
        "from minitransformer.families.table import read_config",
        "assert read_config({'model_type': 'qwen2', 'hidden_size': 16, 'num_attention_heads': 4, "
        "'num_key_value_heads': 2, 'num_hidden_layers': 1, 'intermediate_size': 32, 'vocab_size': 50}, 'x')[0].family == 'llama'",
    ) == ["gpt2", "llama"]


def test_a_model_s_name_means_one_thing():
    """`--model NAME` in a count asks the shipped demos before the presets (asking the presets for a demo's name
    loaded every family to say no): so no preset may bear a demo's name, or that count would change its model. And
    every name the hub downloads is a preset, whose shapes count without the download."""
    assert set(DEMOS).isdisjoint(PRESETS), sorted(set(DEMOS) & set(PRESETS))
    assert set(HUB_REPOS) <= set(PRESETS), sorted(set(HUB_REPOS) - set(PRESETS))


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_help_names_every_family_model_type_and_preset_whole(columns, capsys, monkeypatch):
    """The help's lists are the table's, and wrapping breaks no name: argparse's own broke "seed-oss-36b" after its
    hyphen. Wrapping at a space only puts a newline and an indent where the space was."""
    monkeypatch.setenv("COLUMNS", str(columns))

    def unwrapped(text: str) -> str:
        return " ".join(text.split())

    with pytest.raises(SystemExit):
        cli.main(["count", "--help"])
    words = unwrapped(capsys.readouterr().out)
    assert f"--preset NAME {', '.join(PRESETS)} (default: gpt2)" in words, words
    assert f"(model_type {', '.join(model_types())}; default: none)" in words, words
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    words = unwrapped(capsys.readouterr().out)
    assert f"(families: {', '.join(ARCHITECTURES)})" in words, words
    assert f"any family ({', '.join(ARCHITECTURES)})" in words, words


def test_two_threads_asking_at_once_load_each_family_once():
    code = (
        "import json, threading\nfrom minitransformer.families import table\n"
        "found = []\n"
        "ask = lambda name: found.append(table.PRESETS[name].name)\n"
        "threads = [threading.Thread(target=ask, args=(n,)) for n in ('deepseek-v3', 'minimax-text-01', 'gpt2')]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(json.dumps([sorted(found), list(table.ARCHITECTURES.held)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    found, held = json.loads(done.stdout)
    assert found == ["deepseek-v3", "gpt2", "minimax-text-01"] and held == list(ARCHITECTURES), (found, held)
