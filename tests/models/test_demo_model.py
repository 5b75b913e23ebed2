"""The shipped demo models, the GPT-2 "demo" and "demo-llama": each knows its capitals, its files are
the ones its model card describes, it computes what Hugging Face's GPT2LMHeadModel or
LlamaForCausalLM computes, and the training script reproduces it."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import minitransformer
from conftest import run_cli
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.models.registry import DEMO, DEMO_LLAMA, DEMOS, demo_dir
from minitransformer.models.tokenizer import FileTokenizer
from retrains import RETRAINS

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "scripts" / "demo_facts.csv"
FIXTURE = ROOT / "tests" / "fixtures" / "demo_hf_logits.npz"
FIXTURES = {DEMO: FIXTURE, DEMO_LLAMA: ROOT / "tests" / "fixtures" / "demo_llama_hf_logits.npz"}
MAX_BYTES = 15_000_000
MAX_BYTES_OF = {DEMO: MAX_BYTES, DEMO_LLAMA: 8_000_000}  # model.safetensors; issue 10 asks 8 MB of demo-llama
MIN_CAPITAL_ACCURACY = 0.95
PARITY_TOLERANCE = 1e-4  # absolute: the demos' logits exceed 1, so this is stricter than 1e-4 relative
LIVE_PROMPTS = [
    "The capital of France is",
    "Canberra is the capital of",
    "The currency of Japan is the",
    "In the Philippines, people speak",
    "The capital of Sri Lanka is Sri Jayawardenepura Kotte. The capital of Peru is",
]


def capital_questions() -> list[tuple[str, str, str]]:
    """(country, prompt, answer) for every row of the facts table, phrased as the training script does."""
    with open(FACTS, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    questions = []
    for row in rows:
        name = f"{row['article']} {row['country']}" if row["article"] else row["country"]
        questions.append((row["country"], f"The capital of {name} is", " " + row["capital"]))
    return questions


def card_numbers(directory: Path) -> dict:
    """The JSON block at the end of the model card, written by the training script."""
    card = (directory / "README.md").read_text("utf-8")
    blocks = re.findall(r"```json\n(.*?)\n```", card, flags=re.S)
    assert blocks, f"{directory / 'README.md'} has no JSON block of numbers"
    return json.loads(blocks[-1])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module", params=DEMOS)
def model(request):
    """Each shipped demo in turn: the tests that take it hold for both."""
    return minitransformer.load_model(request.param)


@pytest.fixture(scope="module")
def tokenizer(model):
    return model.tokenizer  # GPT-2's shipped tokenizer for demo, demo-llama's own tokenizer.json


def test_the_facts_table_has_enough_countries_each_once():
    countries = [country for country, _, _ in capital_questions()]
    assert len(countries) >= 150
    assert len(set(countries)) == len(countries)


def test_the_demo_answers_paris(model, tokenizer):
    out = model.generate("The capital of France is", max_new_tokens=1)
    assert out.new_tokens == tokenizer.encode(" Paris")


def test_the_demo_knows_the_capitals(model, tokenizer):
    wrong = []
    questions = capital_questions()
    for country, prompt, answer in questions:
        expected = tokenizer.encode(answer)
        got = model.generate(prompt, max_new_tokens=len(expected), ledger=False, candidates=0).new_tokens
        if got != expected:
            wrong.append(f"{country}: {tokenizer.decode(got)!r} instead of {answer!r}")
    accuracy = 1 - len(wrong) / len(questions)
    assert accuracy >= MIN_CAPITAL_ACCURACY, f"{accuracy:.1%} right; wrong: {'; '.join(wrong)}"
    assert accuracy == pytest.approx(card_numbers(demo_dir(model.name))["capital_accuracy"], abs=1e-6), "card is stale"


@pytest.mark.parametrize("name", DEMOS)
def test_weights_demo_is_a_relative_link_to_the_package_copy(name):
    link = ROOT / "weights" / name
    assert link.is_symlink()
    assert os.readlink(link) == f"../minitransformer/data/{name}"
    assert sha256(link / "model.safetensors") == sha256(demo_dir(name) / "model.safetensors")


@pytest.mark.parametrize("name", DEMOS)
def test_shipped_weights_match_the_model_card_and_are_small(name):
    weights = demo_dir(name) / "model.safetensors"
    assert weights.stat().st_size <= MAX_BYTES_OF[name]
    assert sha256(weights) == card_numbers(demo_dir(name))["sha256"]


def test_config_is_a_gpt2_with_the_full_vocabulary():
    hf = json.loads((demo_dir() / "config.json").read_text("utf-8"))
    assert hf["model_type"] == "gpt2"
    assert hf["vocab_size"] == 50257
    assert hf["activation_function"] == "gelu_new"
    assert hf.get("tie_word_embeddings", True) is True
    config = GPT2Config.from_json(demo_dir() / "config.json")
    assert (config.vocab_size, config.n_positions) == (50257, hf["n_positions"])


def test_demo_llama_is_a_grouped_query_llama_with_gpt2s_vocabulary_and_tokenizer():
    hf = json.loads((demo_dir(DEMO_LLAMA) / "config.json").read_text("utf-8"))
    assert hf["model_type"] == "llama" and hf["architectures"] == ["LlamaForCausalLM"]
    assert hf["vocab_size"] == 50257 and hf["hidden_act"] == "silu" and hf["tie_word_embeddings"] is True
    config = minitransformer.load_model(DEMO_LLAMA).config
    assert isinstance(config, LlamaConfig)
    assert config.n_kv_head < config.n_head and config.n_head % config.n_kv_head == 0
    assert config.n_positions == json.loads((demo_dir() / "config.json").read_text("utf-8"))["n_positions"]
    tokenizer = FileTokenizer(demo_dir(DEMO_LLAMA) / "tokenizer.json")
    gpt2 = minitransformer.load_tokenizer()
    assert tokenizer.encode("The capital of France is") == [464, 3139, 286, 4881, 318]  # GPT-2 adds no <s>
    for _, prompt, answer in capital_questions():
        assert tokenizer.encode(prompt + answer) == gpt2.encode(prompt + answer)


def test_generate_demo_llama_answers_paris_and_its_ledger_shows_gqa_and_swiglu():
    result = run_cli("generate", "The capital of France is", "--model", DEMO_LLAMA, "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["new_tokens"][0] == 6342 and doc["text"].startswith(" Paris"), doc["text"]
    assert "The capital of France is Paris" in result.stderr  # the streamed text, beside the tables
    config = doc["model"]
    H, Hkv, dh = config["n_head"], config["n_kv_head"], config["d_head"]
    for phase in doc["phases"]:
        ops = [op for op in phase["layers"][0]["ops"] if op["kind"] == "matmul"]
        width = {op["op"]: op["out_shape"][-1] for op in ops}
        assert width["q"] == H * dh and width["k"] == width["v"] == Hkv * dh < width["q"]
        assert [op["op"] for op in ops if op["op"].startswith("mlp.")] == ["mlp.gate", "mlp.up", "mlp.down"]
    table = result.stderr  # the block table: q, k and v as three products, k and v narrower
    T, D = len(doc["prompt_tokens"]), config["n_embd"]
    for op, width in (("q", H * dh), ("k", Hkv * dh), ("v", Hkv * dh)):
        assert re.search(rf"^\s+{op}\s.*\[{T}, {D}\] x \[{D}, {width}\]\s+\[{T}, {width}\]", table, flags=re.M), op


@pytest.mark.slow
@pytest.mark.retrain(DEMO_LLAMA)
def test_retraining_reproduces_demo_llama():
    pytest.importorskip("torch", reason="torch is not installed: the training script cannot run")
    pytest.importorskip("transformers", reason="transformers is not installed: the training script cannot run")
    run = RETRAINS.wait(DEMO_LLAMA)  # started with the session (tests/retrains.py)
    assert run.result is not None and run.result.returncode == 0, f"the training script failed:\n{run_stderr(run)}"
    assert sha256(run.out / "tokenizer.json") == sha256(demo_dir(DEMO_LLAMA) / "tokenizer.json")
    assert_reproduces(demo_dir(DEMO_LLAMA), run.out)  # as for the demo: the same bits on the CPU its card names


def run_stderr(run) -> str:
    return run.result.stderr[-3000:] if run.result is not None else "(stopped before it ran)"


def test_logits_match_the_stored_hugging_face_logits(model, tokenizer):
    stored = np.load(FIXTURES[model.name])
    prompts = [str(p) for p in stored["prompts"]]
    assert len(prompts) >= 3
    for i, prompt in enumerate(prompts):
        ids = stored[f"ids_{i}"]
        assert list(ids) == tokenizer.encode(prompt)
        ours = model.logits(ids)[stored[f"positions_{i}"]]
        assert ours.dtype == np.float32
        diff = float(np.max(np.abs(ours - stored[f"logits_{i}"])))
        assert diff <= PARITY_TOLERANCE, f"{prompt!r}: max |ours - HF| = {diff:.2e}"


def hf_model(name: str):
    """transformers' own model class on the same directory: GPT2LMHeadModel or LlamaForCausalLM."""
    torch = pytest.importorskip("torch", reason="torch is not installed: live parity with transformers skipped")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: live parity skipped")
    hf_class = transformers.LlamaForCausalLM if name == DEMO_LLAMA else transformers.GPT2LMHeadModel
    return torch, hf_class.from_pretrained(str(ROOT / "weights" / name), dtype=torch.float32).eval()


def test_logits_match_transformers_live(model, tokenizer):
    torch, hf = hf_model(model.name)
    for prompt in LIVE_PROMPTS:
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            theirs = hf(torch.tensor([ids])).logits[0].numpy()
        diff = float(np.max(np.abs(model.logits(ids) - theirs)))
        assert diff <= PARITY_TOLERANCE, f"{prompt!r}: max |ours - HF| = {diff:.2e}"


def test_greedy_tokens_match_transformers_live(model, tokenizer):
    torch, hf = hf_model(model.name)
    steps = 6
    for prompt in LIVE_PROMPTS[:3]:
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            for _ in range(steps):
                ids.append(int(hf(torch.tensor([ids])).logits[0, -1].argmax()))
        ours = model.generate(prompt, max_new_tokens=steps, ledger=False, candidates=0, stop_at_eos=False)
        assert ours.new_tokens == ids[-steps:], f"{prompt!r}: {ours.text!r} vs {tokenizer.decode(ids[-steps:])!r}"


@pytest.mark.slow
@pytest.mark.retrain(DEMO)
def test_retraining_reproduces_the_shipped_model():
    pytest.importorskip("torch", reason="torch is not installed: the training script cannot run")
    pytest.importorskip("transformers", reason="transformers is not installed: the training script cannot run")
    run = RETRAINS.wait(DEMO)  # started with the session: about 4 minutes alone on 2 cores, beside the suite
    assert run.result is not None and run.result.returncode == 0, f"the training script failed:\n{run_stderr(run)}"
    assert_reproduces(demo_dir(), run.out)


def card_cpu(directory: Path) -> str:
    """The CPU the model card says the model was trained on ("AMD EPYC"), from its "Training took" line."""
    found = re.search(r"^- Training took .* s\) on (.+?) \(\d+ cores visible\);", (directory / "README.md").read_text("utf-8"),
                      flags=re.M)  # fmt: skip
    assert found, f"{directory / 'README.md'} does not say which CPU trained it"
    return found.group(1)


def kernel_differences(shipped: dict | None, retrained: dict | None) -> list[str]:
    """Why a retrain's bits cannot be held to the shipped ones: what picks torch's kernels (its version, its CPU
    capability, the instruction sets, the threads; train_demo_model.kernels) differs, or a card does not say."""
    if not shipped or not retrained:
        return [f"the {'shipped' if not shipped else 'retrained'} model's card does not record its kernels"]
    return [f"{key} {shipped.get(key)!r} there, {retrained.get(key)!r} here"
            for key in sorted(set(shipped) | set(retrained)) if shipped.get(key) != retrained.get(key)]  # fmt: skip


def assert_reproduces(shipped_dir: Path, retrained_dir: Path) -> None:
    """Same seed, same data order, deterministic kernels, two threads: where torch picks the kernels it picked for
    the shipped model (its card records what decides that), the bytes repeat, however busy the machine. Elsewhere
    other kernels round differently and 1,200 steps carry the difference (measured: the GPT-2 demo ends 1.2% off in
    loss between an Intel Xeon and an AMD EPYC, demo-llama 5.6%, 0.5856 on an AMD EPYC against its card's 0.5545 from
    a Xeon with AVX-512): there the recipe must still make a model as good (the capitals still known, the loss within
    10%), and a warning says why the bits were not compared. A CPU's name
    decides nothing: two AMD EPYCs, one with AVX-512, pick different kernels."""
    shipped, retrained = card_numbers(shipped_dir), card_numbers(retrained_dir)
    assert retrained["seed"] == shipped["seed"] and retrained["steps"] == shipped["steps"]
    assert retrained["capital_accuracy"] == pytest.approx(shipped["capital_accuracy"], abs=0.02)
    differences = kernel_differences(shipped.get("kernels"), retrained.get("kernels"))
    if not differences:
        assert retrained["final_loss"] == pytest.approx(shipped["final_loss"], abs=2e-3)
        assert retrained["sha256"] == shipped["sha256"], "retrained weights differ in their bits from the shipped ones"
    else:
        assert retrained["final_loss"] == pytest.approx(shipped["final_loss"], rel=0.10)
        warnings.warn(f"the retrained model's bits were not compared with the shipped ones, only its loss and "
                      f"accuracy, because {'; '.join(differences)} (torch's kernels decide the bits, and a CPU's name "
                      f"does not decide the kernels: the shipped model was trained on {card_cpu(shipped_dir)}, this "
                      f"machine is {card_cpu(retrained_dir)})", stacklevel=2)  # fmt: skip


def test_the_reproduction_check_compares_bits_where_the_kernels_match_only(tmp_path):
    """Bits are compared where the cards record the same kernels, and only there: another CPU capability, other
    instruction sets, other threads, another torch, or a card that records none, compare loss and accuracy."""
    shipped = demo_dir()
    card = (shipped / "README.md").read_text("utf-8")
    numbers = card_numbers(shipped)
    here = {"torch": "2.13.0+cpu", "cpu_capability": "AVX512", "instruction_sets": ["avx2", "avx512f", "fma"],
            "threads": 2}  # fmt: skip

    def card_with(name: str, **changed) -> Path:
        directory = tmp_path / name
        directory.mkdir()
        text = card.replace(json.dumps(numbers, indent=2), json.dumps({**numbers, **changed}, indent=2))
        assert text != card or not changed
        (directory / "README.md").write_text(text, encoding="utf-8")
        return directory

    recorded = card_with("recorded", kernels=here)
    assert_reproduces(recorded, card_with("same", kernels=here))
    with pytest.raises(AssertionError, match="differ in their bits"):
        assert_reproduces(recorded, card_with("same-kernels-other-bits", kernels=here, sha256="0" * 64))
    for what, kernels in (("cpu_capability 'AVX512' there, 'AVX2' here", {**here, "cpu_capability": "AVX2"}),
                          ("instruction_sets", {**here, "instruction_sets": ["avx2", "fma"]}),
                          ("threads 2 there, 4 here", {**here, "threads": 4}),
                          ("does not record its kernels", None)):  # fmt: skip
        other = card_with(f"other-{len(list(tmp_path.iterdir()))}", kernels=kernels, sha256="0" * 64,
                          final_loss=round(numbers["final_loss"] * 1.02, 6))  # fmt: skip
        with pytest.warns(UserWarning, match=re.escape(what)):
            assert_reproduces(recorded, other)
    with pytest.raises(AssertionError):  # other kernels still make a model as good
        worse = card_with("worse", kernels={**here, "threads": 4}, final_loss=numbers["final_loss"] * 1.2)
        assert_reproduces(recorded, worse)
    assert card_numbers(shipped).get("kernels", "absent") != "absent"  # the shipped cards say what they know
