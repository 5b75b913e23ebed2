"""Shared test fixtures: small GPT-2 checkpoints written with NumPy, and where the HF fixtures live."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from retrains import MARKER, RETRAINS

# The checks the test modules share are asserted in these modules: pytest rewrites their asserts as a test module's,
# so that a failing one shows the values it compared beside its message.
pytest.register_assert_rewrite("family_checks", "shared_checks")

ROOT = Path(__file__).resolve().parent.parent
HF_FIXTURES = ROOT / "tests" / "fixtures" / "hf"
REAL_GPT2 = ROOT / "weights" / "gpt2"


def pytest_configure(config: pytest.Config) -> None:
    """transformers computes the suite's references on models of a few thousand weights, where torch's second thread
    only waits: beside the suite's own NumPy and the retrains, its spinning made each of those tiny passes up to ten
    times slower (a validate of DeepSeek-V3.2's random model on a loaded machine: 12.6 s with two threads, 1.3 s with
    one, back to back). MKL_NUM_THREADS sets torch's threads in this process and in every command a test starts
    (validate, the transformers checks of the CLI); NumPy's OpenBLAS and so our engine do not read it, and the demo
    retrains set their own two threads."""
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if "torch" in sys.modules:  # imported before this hook: the variable came too late for it
        sys.modules["torch"].set_num_threads(int(os.environ["MKL_NUM_THREADS"]))
    share_compiled_modules()


CORES_MARKER = "cores"  # the marker of a test module whose commands run as many at a time as the cores

# The folder where the commands the suite starts keep their compiled modules, where the environment said to write none
COMPILED: list[Path] = []


def share_compiled_modules() -> None:
    """Where the environment says not to write compiled modules (PYTHONDONTWRITEBYTECODE, as in CI's container), every
    command the suite starts (hundreds: the CLI's tests, every pasted output of the docs) compiled the package's
    modules anew before it began, about 0.55 s of its 1.2 s start on the Intel Xeon here (0.64 s from compiled
    modules); tests/cli/test_cli.py and tests/views/test_output_files.py took 117 s against 71. They share one compiled
    copy instead, written into a folder of the session's own outside the tree (PYTHONPYCACHEPREFIX), removed when the
    session ends: the checkout stays as the environment asked."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    COMPILED.append(Path(tempfile.mkdtemp(prefix="minitransformer-suite-pycache-")))
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(COMPILED[0])


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """The retrains' tests last: they wait for the retrains, which the rest of the suite overlaps (with torch's
    references on one thread the rest finished first, and a retrain's test in tests/models held every later test
    back by three minutes). Before them, the tests marked `cores`, which run commands as many at a time as the cores:
    by then the retrains have left the cores to them (tests/project/test_docs.py's pasted outputs, two at a time in
    their place in the suite, beside a retrain: 147 s against 152 one at a time; after the rest, 91)."""

    def rank(item) -> int:
        return 2 if item.get_closest_marker(MARKER) else 1 if item.get_closest_marker(CORES_MARKER) else 0

    items.sort(key=rank)  # a stable sort: the rest keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the selected demo retrains in the background: they overlap the suite instead of adding minutes to it."""
    RETRAINS.start([mark.args[0] for item in session.items for mark in item.iter_markers(MARKER)])


def pytest_sessionfinish(session: pytest.Session) -> None:
    RETRAINS.stop()
    for folder in COMPILED:
        shutil.rmtree(folder, ignore_errors=True)


def gpt2_tensors(n_layer: int, n_embd: int, n_inner: int, n_positions: int, vocab_size: int, seed: int,
                 prefix: str = "transformer.") -> dict[str, np.ndarray]:  # fmt: skip
    """Random weights laid out as transformers saves a GPT2LMHeadModel (Conv1D weights are [in, out])."""
    rng = np.random.default_rng(seed)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    D, F = n_embd, n_inner
    t = {"wte.weight": rand(vocab_size, D), "wpe.weight": rand(n_positions, D)}
    for i in range(n_layer):
        t |= {
            f"h.{i}.ln_1.weight": 1 + rand(D), f"h.{i}.ln_1.bias": rand(D),
            f"h.{i}.attn.c_attn.weight": rand(D, 3 * D), f"h.{i}.attn.c_attn.bias": rand(3 * D),
            f"h.{i}.attn.c_proj.weight": rand(D, D), f"h.{i}.attn.c_proj.bias": rand(D),
            f"h.{i}.ln_2.weight": 1 + rand(D), f"h.{i}.ln_2.bias": rand(D),
            f"h.{i}.mlp.c_fc.weight": rand(D, F), f"h.{i}.mlp.c_fc.bias": rand(F),
            f"h.{i}.mlp.c_proj.weight": rand(F, D), f"h.{i}.mlp.c_proj.bias": rand(D),
        }  # fmt: skip
    t |= {"ln_f.weight": 1 + rand(D), "ln_f.bias": rand(D)}
    return {prefix + k: v for k, v in t.items()}


def write_gpt2(directory: Path, n_layer=2, n_head=2, n_embd=16, n_inner=None, n_positions=64, vocab_size=50257,
               seed=0, **config) -> Path:  # fmt: skip
    """A GPT-2 checkpoint directory (config.json + model.safetensors) with random weights."""
    directory.mkdir(parents=True, exist_ok=True)
    hf_config = {"model_type": "gpt2", "n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_inner": n_inner,
                 "n_positions": n_positions, "vocab_size": vocab_size, **config}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(hf_config))
    tensors = gpt2_tensors(n_layer, n_embd, n_inner or 4 * n_embd, n_positions, vocab_size, seed)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


@pytest.fixture(scope="session")
def small_gpt2_dir(tmp_path_factory) -> Path:
    """A 2-layer GPT-2 with the full 50,257-token vocabulary: takes any text the tokenizer makes."""
    return write_gpt2(tmp_path_factory.mktemp("models") / "small-gpt2")


@pytest.fixture(scope="session")
def small_gpt2(small_gpt2_dir):
    from minitransformer import load_model

    return load_model(small_gpt2_dir)


def hf_fixture_dirs() -> list[Path]:
    return sorted(p for p in HF_FIXTURES.iterdir() if (p / "config.json").is_file())


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m minitransformer ARGS` in a fresh process, as a user would."""
    import os

    return subprocess.run([sys.executable, "-m", "minitransformer", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)  # fmt: skip


# --- the Llama family ---------------------------------------------------------------------------------
HF_LLAMA_FIXTURES = ROOT / "tests" / "fixtures" / "hf_llama"


def hf_llama_fixture_dirs() -> list[Path]:
    """Llama, Mistral and Qwen2 models written by transformers, with its logits (scripts/make_hf_llama_fixtures.py)."""
    return sorted(p for p in HF_LLAMA_FIXTURES.iterdir() if (p / "config.json").is_file())


def write_llama(directory: Path, n_layer=2, n_head=4, n_kv_head=2, n_embd=16, n_inner=32, n_positions=64,
                vocab_size=50257, seed=0, tie_word_embeddings=True, model_type="llama", **config) -> Path:  # fmt: skip
    """A Llama-family checkpoint directory (config.json + model.safetensors) with random weights, written
    without torch, in the layout transformers saves (nn.Linear weights [out, in], "model." prefix)."""
    rng = np.random.default_rng(seed)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    directory.mkdir(parents=True, exist_ok=True)
    hf_config = {"model_type": model_type, "num_hidden_layers": n_layer, "num_attention_heads": n_head,
                 "num_key_value_heads": n_kv_head, "hidden_size": n_embd, "intermediate_size": n_inner,
                 "max_position_embeddings": n_positions, "vocab_size": vocab_size,
                 "tie_word_embeddings": tie_word_embeddings, **config}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(hf_config))
    D, F, dh = n_embd, n_inner, config.get("head_dim") or n_embd // n_head
    t = {"embed_tokens.weight": rand(vocab_size, D), "norm.weight": 1 + rand(D)}
    for i in range(n_layer):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        t |= {
            f"layers.{i}.input_layernorm.weight": 1 + rand(D), f"layers.{i}.post_attention_layernorm.weight": 1 + rand(D),
            f"{a}.q_proj.weight": rand(n_head * dh, D), f"{a}.k_proj.weight": rand(n_kv_head * dh, D),
            f"{a}.v_proj.weight": rand(n_kv_head * dh, D), f"{a}.o_proj.weight": rand(D, n_head * dh),
            f"{m}.gate_proj.weight": rand(F, D), f"{m}.up_proj.weight": rand(F, D), f"{m}.down_proj.weight": rand(D, F),
        }  # fmt: skip
        if model_type == "qwen2":
            t |= {f"{a}.{p}.bias": rand(n * dh) for p, n in (("q_proj", n_head), ("k_proj", n_kv_head),
                                                              ("v_proj", n_kv_head))}  # fmt: skip
    tensors = {"model." + k: v for k, v in t.items()}
    if not tie_word_embeddings:
        tensors["lm_head.weight"] = rand(vocab_size, D)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


def with_weights_viewed_as(model, array_class):
    """The same model with every weight viewed as `array_class` (an ndarray subclass that watches the
    arithmetic done with it, e.g. one that raises when a float of the wrong width takes part)."""
    from minitransformer.models.model import Model
    from minitransformer.models.weights import as_tree

    flat = {}

    def walk(node, prefix):
        for key, value in vars(node).items():
            if isinstance(value, np.ndarray):
                flat[prefix + key] = value.view(array_class)
            elif isinstance(value, list):
                for i, child in enumerate(value):
                    walk(child, f"{prefix}{key}.{i}.")
            else:
                walk(value, f"{prefix}{key}.")

    walk(model.params, "")
    return Model(model.config, as_tree(flat, model.config), source=model.source, tokenizer=model._tokenizer)


@pytest.fixture(scope="module")
def made(request, tmp_path_factory):
    """name -> (directory, our model, transformers' model) of the test module's FAMILY: the conformance suite's random
    models (tests/families/conformance_configs.py), each saved once a session."""
    # Imported here, not above: it imports torch and transformers, which the tests that do not ask for it go without.
    from conformance_configs import made as made_in

    return lambda name: made_in(tmp_path_factory, request.module.FAMILY, name)
