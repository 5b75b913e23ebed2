"""Every command's output, written to a folder, so that a refactoring can be held to "nothing a user sees changes".

    scripts/snapshot_outputs.py OUT_DIR [--models DIR]      # run every command, one file of output each
    diff -r BEFORE_DIR AFTER_DIR                            # and compare two runs

Run it on the tree before a change and after it, with the same --models folder (the random models of every family
are made there once, by transformers, from the configs of tests/families/conformance_configs.py, and reused), and compare the
two folders: every file must be the same, byte for byte. It covers count (text, JSON, CSV, HTML) and params of
every preset of every family, generate (text, JSON, HTML, a batch, float64), trace (text, HTML) and count of the
demo models and of a random model of every configuration conformance_configs.py holds, and the logits of each of those
models in float32 and float64 (their bytes' hash), in a batch too. It takes a few minutes; it needs torch and
transformers (the `hf` extra) to make the models.

tests/project/test_frozen_outputs.py holds a few of these outputs as committed files, so that the suite keeps them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "families"), str(ROOT)]


# The families' configs in tests/families/conformance_configs.py, under the names the outputs have always had.
PREFIXES = {"qwen3": "qwen3", "olmo2": "olmo2", "phi3": "phi3", "gemma": "gemma", "neox": "neox", "mixtral": "mixtral",
            "qwen3_moe": "qwen3moe", "gpt_oss": "gptoss", "deepseek_v3": "deepseek", "deepseek_v32": "deepseek_v32",
            "qwen3_5": "qwen35", "mamba2": "mamba2", "nemotron_h": "nemotron_h"}  # fmt: skip
# The hybrids: one random model of each family, the one of its configs with the most kinds of layer (Qwen3.5's experts
# beside its DeltaNet and attention layers; Nemotron-H's four kinds).
ONE_OF = {"qwen3_5": "moe", "mamba2": "groups", "nemotron_h": "every_kind"}


def live_configs() -> dict:
    """name -> (transformers config, seed, spread, saved dtype, moved): the families' configs the conformance suite
    makes (GPT-2's and the Llama family's models are the committed fixtures here)."""
    import torch
    from conformance_configs import FAMILIES

    made: dict = {}
    for family, prefix in PREFIXES.items():
        spec = FAMILIES[family]
        for name, options in spec.configs.items():
            if family in ONE_OF and name != ONE_OF[family]:
                continue
            dtype = getattr(torch, options.get("saved", "float32"))
            made[f"{prefix}-{name}"] = (spec.hf_config(name), options["seed"], spec.spread, dtype, spec.moved)
    return made


def make_models(folder: Path) -> list[Path]:
    """The random models, made in `folder` once (a model's folder with its config.json is kept as it is)."""
    from family_checks import save_random

    folder.mkdir(parents=True, exist_ok=True)
    for name, (config, seed, spread, dtype, moved) in live_configs().items():
        directory = folder / name
        if (directory / "config.json").exists():
            continue
        hf = save_random(directory, config, seed=seed, spread=spread, dtype=dtype)
        if moved is not None:
            moved(hf, seed)
            hf.save_pretrained(directory)
    fixtures = [*sorted((ROOT / "tests/fixtures/hf").iterdir()), *sorted((ROOT / "tests/fixtures/hf_llama").iterdir())]
    return fixtures + sorted(p for p in folder.iterdir() if (p / "config.json").exists())


def model_ids(directory: Path, n: int) -> list[int]:
    """n token ids (fewer where the model's context is shorter, two at least) that every model's vocabulary holds."""
    from minitransformer import load_model

    config = load_model(directory).config
    return [
        3 + (7 * i) % (config.vocab_size - 3)
        for i in range(max(2, min(n, config.n_positions - 14, config.n_positions // 2)))
    ]


def commands(models: list[Path]) -> dict[str, list[str]]:
    """file name -> the command's arguments (after `python -m minitransformer`)."""
    from minitransformer.families.table import PRESETS

    run: dict[str, list[str]] = {}
    for preset in PRESETS:
        run[f"count-{preset}.txt"] = ["count", "--preset", preset, "--tokens", "100"]
        run[f"count-{preset}.json"] = ["count", "--preset", preset, "--tokens", "100", "--new-tokens", "3",
                                       "--json", "-"]  # fmt: skip
        run[f"count-{preset}.csv"] = ["count", "--preset", preset, "--tokens", "20", "--new-tokens", "2", "--csv", "-"]
        worst = ["--routing", "worst"] if PRESETS[preset].n_experts else []  # a mixture of experts' assumed routing
        run[f"count-{preset}-worst-nocache.txt"] = ["count", "--preset", preset, "--tokens", "30", "--new-tokens", "2",
                                                    "--no-cache", "--batch", "2", *worst]  # fmt: skip
        run[f"params-{preset}.txt"] = ["params", "--preset", preset]
        run[f"params-{preset}.json"] = ["params", "--preset", preset, "--json", "-"]
    for preset in ("gpt2", "llama3.2-1b", "qwen3-0.6b", "gemma-3-1b", "olmo-2-7b", "pythia-70m", "phi-3-mini",
                   "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v3", "deepseek-v3.2-exp", "qwen3.5-27b",
                   "mamba-codestral-7b", "nemotron-3-nano-30b-a3b"):  # fmt: skip
        run[f"count-{preset}.html"] = [
            "count",
            "--preset",
            preset,
            "--tokens",
            "40",
            "--new-tokens",
            "2",
            "--html",
            "-",
        ]
    run["count-sizes-gated.txt"] = ["count", "--layers", "2", "--d-model", "64", "--heads", "4", "--kv-heads", "2",
                                    "--gated-mlp", "--tokens", "10"]  # fmt: skip
    prompt = "The capital of France is"
    for model in ("demo", "demo-llama"):
        run[f"generate-{model}.txt"] = ["generate", prompt, "--model", model]
        run[f"generate-{model}.json"] = ["generate", prompt, "--model", model, "--json", "-"]
        run[f"generate-{model}.html"] = ["generate", prompt, "--model", model, "--html", "-"]
        run[f"generate-{model}-batch.txt"] = ["generate", prompt, "Tokyo is the capital of", "--model", model,
                                              "--no-cache"]  # fmt: skip
        run[f"generate-{model}-float64.json"] = ["generate", prompt, "--model", model, "--dtype", "float64",
                                                 "--json", "-"]  # fmt: skip
        run[f"generate-{model}-dense.json"] = ["generate", prompt, "--model", model, "--dense-attention", "--json", "-"]
        run[f"trace-{model}.txt"] = ["trace", prompt, "--model", model, "--layers", "all"]
        run[f"trace-{model}.html"] = ["trace", prompt, "--model", model, "--html", "-"]
        run[f"count-{model}.txt"] = ["count", "--model", f"minitransformer/data/{model}", "--tokens", "12"]
        run[f"params-{model}.txt"] = ["params", "--model", f"minitransformer/data/{model}"]
    for directory in models:
        name = f"{directory.parent.name}-{directory.name}"
        ids = model_ids(directory, 140)  # past the row chunk of 128 where the context has room
        run[f"model-{name}-generate.json"] = ["generate", "--model", str(directory), "--ids", _ids(ids),
                                              "--max-new-tokens", "6", "--json", "-"]  # fmt: skip
        run[f"model-{name}-generate.txt"] = ["generate", "--model", str(directory), "--ids", _ids(ids[:12]),
                                             "--max-new-tokens", "12"]  # fmt: skip
        run[f"model-{name}-trace.txt"] = ["trace", "--model", str(directory), "--ids", _ids(ids[:9]), "--layers", "all",
                                          "--new-tokens", "3"]  # fmt: skip
        run[f"model-{name}-count.txt"] = ["count", "--model", str(directory), "--tokens", str(len(ids) // 2),
                                          "--new-tokens", "2"]  # fmt: skip
        run[f"model-{name}-params.txt"] = ["params", "--model", str(directory)]
    return run


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def logits(models: list[Path]) -> dict:
    """Each model's logits at every position (float32, float64, a batch of two rows, and a step with the cache): the
    sha256 of their bytes."""
    import numpy as np

    from minitransformer import load_model

    out = {}
    for directory in models:
        ids = model_ids(directory, 133)
        row = {}
        for dtype in ("float32", "float64"):
            model = load_model(directory, dtype=dtype)
            half = len(ids) // 2
            values = [model.logits(ids), model.logits([ids[:half], ids[half : 2 * half]])]
            cache = model.new_cache()
            values += [model.run(ids[:-1], cache=cache), model.run(ids[-1:], cache=cache)]
            generation = model.generate(ids[:half], max_new_tokens=4)
            values.append(np.asarray(generation.new_tokens))
            row[dtype] = [hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16] for v in values]
        out[f"{directory.parent.name}-{directory.name}"] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder the outputs are written to (made if missing)")
    parser.add_argument("--models", type=Path, default=Path("/tmp/minitransformer-snapshot-models"),
                        help="where the random models are made once and kept")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="commands run at once")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models = make_models(args.models)

    def run(name: str, arguments: list[str]) -> None:
        done = subprocess.run([sys.executable, "-m", "minitransformer", *arguments], cwd=ROOT, capture_output=True)
        text = done.stdout + b"\n--- stderr\n" + done.stderr + f"\n--- exit status {done.returncode}\n".encode()
        text = text.replace(str(args.models).encode(), b"MODELS").replace(str(ROOT).encode(), b"ROOT")
        (args.out / name).write_bytes(text)

    with ThreadPoolExecutor(args.jobs) as pool:
        for done in [pool.submit(run, name, arguments) for name, arguments in commands(models).items()]:
            done.result()
    (args.out / "logits.json").write_text(json.dumps(logits(models), indent=1) + "\n")
    print(f"{len(list(args.out.iterdir()))} files in {args.out}")


if __name__ == "__main__":
    main()
