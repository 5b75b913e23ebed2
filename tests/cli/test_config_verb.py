"""`minitransformer config`: every preset of every family a line, its name first; a preset's config.json as
transformers reads it (config.to_hf_dict), which reads back as the same config; errors in one line, exit 2.
tests/families/test_presets_transformers.py holds each config.json to transformers' own model of it."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from conftest import run_cli
from minitransformer.families.table import PRESETS, architecture_of, config_from_hf_dict
from minitransformer.verbs.presets import preset_lines


def test_list_prints_every_preset_of_every_family_a_line_each_its_name_first():
    result = run_cli("config", "--list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == preset_lines() and [line.split()[0] for line in lines] == list(PRESETS)
    families = {architecture_of(c).name for c in PRESETS.values()}
    assert len(families) >= 10 and all(any(f" {family} (" in line for line in lines) for family in families)
    line = next(line for line in lines if line.startswith("qwen3.5-397b-a17b "))
    assert "qwen3_5 (qwen3_5_moe_text)" in line and "60 layers, d_model 4,096, 396 G parameters, 17.3 G active" in line


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_s_config_json_reads_back_as_the_preset(name):
    config = PRESETS[name]
    hf = json.loads(json.dumps(config.to_hf_dict()))  # as a file holds it
    back = config_from_hf_dict(hf, name)
    differ = {f.name for f in fields(config) if getattr(config, f.name) != getattr(back, f.name)}
    # a multimodal preset (Gemma 3 4B's gemma3) is written as its text model's config.json, which reads back as such
    assert differ == set() or (differ == {"model_type"} and back.model_type == hf["model_type"] != config.model_type)


def test_preset_prints_the_config_json_transformers_reads():
    result = run_cli("config", "--preset", "qwen3.5-27b")
    assert result.returncode == 0, result.stderr
    hf = json.loads(result.stdout)
    assert hf == PRESETS["qwen3.5-27b"].to_hf_dict()
    assert (hf["model_type"], hf["hidden_size"], hf["num_hidden_layers"], hf["linear_num_value_heads"]) == (
        "qwen3_5_text", 5120, 64, 48)  # fmt: skip
    assert hf["layer_types"][:4] == ["linear_attention"] * 3 + ["full_attention"]


@pytest.mark.parametrize(
    "args, message",
    [((), "one of the arguments --list --preset is required"),
     (("--list", "--preset", "gpt2"), "not allowed with argument"),
     (("--preset", "gpt-5"), "unknown preset 'gpt-5'; `minitransformer config --list` lists them"),
     (("--preset",), "expected one argument")],
)  # fmt: skip
def test_errors_are_one_line_and_exit_2(args, message):
    result = run_cli("config", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr
