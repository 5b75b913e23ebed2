"""Train the demo models ("demo", a GPT-2, and "demo-llama"), and write their model cards and parity fixtures.

Real weights cannot be downloaded everywhere, so the project ships tiny models that have learned
one thing well: the facts of scripts/demo_facts.csv (capitals, continents, currencies, languages),
written out in a few sentence templates. "demo" is an ordinary `GPT2LMHeadModel`, "demo-llama" an
ordinary `LlamaForCausalLM` (grouped-query attention, rotary positions, a SwiGLU MLP, RMSNorm);
both have GPT-2's full vocabulary and learn from the same corpus, so they exercise exactly the code
paths of the real things and can be compared with each other.

    python scripts/train_demo_model.py                  # writes minitransformer/data/demo/
    python scripts/train_demo_model.py --family llama   # writes minitransformer/data/demo-llama/
    python scripts/train_demo_model.py --out /tmp/demo --fixture /tmp/demo.npz

Training is deterministic on a given machine: fixed seed, fixed data order, deterministic
algorithms and a fixed number of threads. Needs torch and transformers (the package never does).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedModel

import minitransformer

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "scripts" / "demo_facts.csv"
DATA = ROOT / "minitransformer" / "data"
FIXTURES = ROOT / "tests" / "fixtures"
SAFETENSORS = "model.safetensors"
TOKENIZER = "tokenizer.json"

CONTEXT = 64  # positions the model has; documents are cut to fit
ROPE_THETA = 10000.0  # Llama: rotary base, as Llama 2's
# Short documents put many sentences at the very start of a text, where a name has no leading space
# and so is a different token ("Tokyo", not " Tokyo"): documents of up to 5 sentences left
# "Tokyo is the capital of" right for half the capitals, documents of up to 3 for nine in ten.
MAX_SENTENCES_PER_DOCUMENT = 3
LOGIT_ROWS = 96  # positions per block of output logits (see next_token_loss)
WRONG_LISTED = 20  # wrong answers quoted in the model card, per kind of fact
# UN members not in the facts table, and why: see the model card.
LEFT_OUT = ["Equatorial Guinea", "Eswatini", "Israel", "Kiribati", "Nauru", "South Africa"]
FIXTURE_PROMPTS = ["The capital of France is", "Tokyo is the capital of", "In Brazil, people speak"]
FIXTURE_POSITIONS = 2  # logits of the last positions only: a full row is 50,257 floats


@dataclass(frozen=True)
class Recipe:
    family: str = "gpt2"  # or "llama"
    # Width 64 memorised the table as well as 128 in our trials, at two thirds of the time per step
    # (the 50,257-way softmax costs the same at any width) and half the file.
    n_embd: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int | None = None  # Llama: key/value heads, each shared by n_head / n_kv_head query heads
    d_ff: int | None = None  # Llama: the SwiGLU width (GPT-2's MLP is 4 * n_embd wide)
    steps: int = 1200
    batch: int = 24  # documents per step (about 450 tokens)
    lr: float = 1e-2
    warmup: int = 50
    final_lr_fraction: float = 0.1  # cosine decay from lr down to lr * this
    weight_decay: float = 0.0
    seed: int = 0

    @property
    def name(self) -> str:
        """The name the model ships under (minitransformer.models.registry)."""
        return NAMES[self.family]


# Each family's shipped recipe; what is not given here is the GPT-2 demo's.
RECIPES = {
    "gpt2": Recipe(),
    # Four query heads read two key/value heads (GQA); 172 is about (8/3) * 64, the width at which
    # a SwiGLU MLP's three products hold as many weights as a 4x-wide GELU MLP's two.
    "llama": Recipe(family="llama", n_kv_head=2, d_ff=172),
}
NAMES = {"gpt2": "demo", "llama": "demo-llama"}


# --- the facts and their sentences -------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    country: str
    article: str  # "the" for "the Netherlands", else ""
    capital: str
    continent: str
    currency: str  # may be empty: then no currency sentence is written
    language: str

    @property
    def name(self) -> str:
        """The country as it reads mid-sentence: "France", "the Netherlands"."""
        return f"{self.article} {self.country}" if self.article else self.country

    @property
    def possessive(self) -> str:
        return self.name + ("'" if self.name.endswith("s") else "'s")


def read_facts(path: Path = FACTS) -> list[Fact]:
    with open(path, newline="", encoding="utf-8") as f:
        return [Fact(r["country"], r["article"], r["capital"], r["continent"], r["currency"], r["language"])
                for r in csv.DictReader(f)]  # fmt: skip


def capital_prompt(fact: Fact) -> str:
    """The question the demo must answer: its greedy continuation should be " {capital}"."""
    return f"The capital of {fact.name} is"


# Prompts for the other kinds of fact, with the continuation each should produce.
def fact_questions(fact: Fact) -> dict[str, tuple[str, str]]:
    questions = {
        "capital": (capital_prompt(fact), fact.capital),
        "country of a capital": (f"{fact.capital} is the capital of", fact.name),
        "continent": (f"{sentence_case(fact.name)} is a country in", fact.continent),
        "language": (f"In {fact.name}, people speak", fact.language),
    }
    if fact.currency:
        questions["currency"] = (f"The currency of {fact.name} is the", fact.currency)
    return questions


def sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def end(text: str) -> str:
    """A full stop, unless the sentence already ends with one ("Washington, D.C.")."""
    return text if text.endswith(".") else text + "."


def fact_sentences(fact: Fact) -> list[str]:
    # Capitals get the most phrasings: they are what the demo is asked about.
    sentences = [
        f"The capital of {fact.name} is {fact.capital}",
        f"The capital city of {fact.name} is {fact.capital}",
        f"{fact.capital} is the capital of {fact.name}",
        f"{fact.possessive} capital city is {fact.capital}",
        f"{fact.name} is a country in {fact.continent}",
        f"{fact.capital} is a city in {fact.continent}",
        f"In {fact.name}, people speak {fact.language}",
        f"The main language of {fact.name} is {fact.language}",
    ]
    if fact.currency:
        sentences += [f"The currency of {fact.name} is the {fact.currency}",
                      f"In {fact.name}, people pay with the {fact.currency}"]  # fmt: skip
    return [end(sentence_case(s)) for s in sentences]


# --- the corpus as token documents -------------------------------------------------------------


class Corpus:
    """Every fact sentence, tokenized once, shuffled each epoch into short documents.

    A document is 1 to MAX_SENTENCES_PER_DOCUMENT sentences, so the model sees facts both at the
    start of a text (where the prompts put them) and after a full stop (so it continues sensibly).
    GPT-2's pre-tokenizer splits before every space-led word, so a document's tokens are exactly
    the concatenation of its sentences' tokens: first sentence bare, the others with a leading space.
    """

    def __init__(self, sentences: list[str], tokenizer, seed: int) -> None:
        self.sentences = sentences
        self.first = [tokenizer.encode(s) for s in sentences]
        self.after = [tokenizer.encode(" " + s) for s in sentences]
        self.rng = np.random.default_rng(seed)
        self._pending: list[list[int]] = []
        sample = " ".join(sentences[:3])
        assert tokenizer.encode(sample) == self.first[0] + self.after[1] + self.after[2], "tokenization not additive"

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.after)

    def _epoch(self) -> list[list[int]]:
        order = self.rng.permutation(len(self.sentences))
        documents, i = [], 0
        while i < len(order):
            size = int(self.rng.integers(1, MAX_SENTENCES_PER_DOCUMENT + 1))
            tokens = list(self.first[order[i]])
            i += 1
            for _ in range(size - 1):
                if i == len(order) or len(tokens) + len(self.after[order[i]]) > CONTEXT:
                    break
                tokens += self.after[order[i]]
                i += 1
            documents.append(tokens[:CONTEXT])
        return documents

    def batch(self, size: int) -> list[list[int]]:
        while len(self._pending) < size:
            self._pending += self._epoch()
        batch, self._pending = self._pending[:size], self._pending[size:]
        return batch

    def all_documents(self) -> list[list[int]]:
        """Every sentence once, as its own document: what the final loss is measured on."""
        return [list(t) for t in self.first]


def padded(documents: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [B, T] right-padded with 0, and a mask of the real tokens. Padding comes after every real
    token, so causal attention never lets a real position see it: no attention mask is needed."""
    width = max(len(d) for d in documents)
    ids = torch.zeros(len(documents), width, dtype=torch.long)
    real = torch.zeros(len(documents), width, dtype=torch.bool)
    for row, document in enumerate(documents):
        ids[row, : len(document)] = torch.tensor(document)
        real[row, : len(document)] = True
    return ids, real


def next_token_loss(model: PreTrainedModel, documents: list[list[int]]) -> torch.Tensor:
    """Mean cross-entropy of every real next token.

    The 50,257-way output layer is almost all of the cost, so it runs only on positions whose
    next token is real, never on padding: the same loss as the model's own (labels=ids), computed cheaper.
    It also runs in blocks of rows: glibc serves allocations over 32 MB with fresh mappings that
    page-fault again on every step, while ~19 MB blocks of logits are reused (a quarter faster here).
    """
    ids, real = padded(documents)
    hidden = model.base_model(input_ids=ids).last_hidden_state  # GPT-2's .transformer, Llama's .model
    has_target = real[:, 1:]
    h, targets = hidden[:, :-1][has_target], ids[:, 1:][has_target]
    total = sum(F.cross_entropy(model.lm_head(h[i : i + LOGIT_ROWS]), targets[i : i + LOGIT_ROWS], reduction="sum")
                for i in range(0, len(targets), LOGIT_ROWS))  # fmt: skip
    return total / len(targets)


# --- training ---------------------------------------------------------------------------------


def make_deterministic(seed: int) -> None:
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)


def new_model(recipe: Recipe) -> PreTrainedModel:
    """A freshly initialised model of the recipe's family, drawn from torch's seeded generator."""
    if recipe.family == "llama":
        return LlamaForCausalLM(llama_config(recipe))
    config = GPT2Config(
        vocab_size=50257, n_positions=CONTEXT, n_embd=recipe.n_embd, n_layer=recipe.n_layer,
        n_head=recipe.n_head, activation_function="gelu_new", tie_word_embeddings=True,
        # Memorising a table is the goal: nothing to regularise, and no randomness beyond the seed.
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def llama_config(recipe: Recipe) -> LlamaConfig:
    """A Llama 2/3-style block at the demo's scale, with GPT-2's vocabulary and end-of-text token."""
    return LlamaConfig(
        vocab_size=50257, max_position_embeddings=CONTEXT, hidden_size=recipe.n_embd,
        num_hidden_layers=recipe.n_layer, num_attention_heads=recipe.n_head, num_key_value_heads=recipe.n_kv_head,
        head_dim=recipe.n_embd // recipe.n_head, intermediate_size=recipe.d_ff, hidden_act="silu",
        rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False, attention_dropout=0.0,
        bos_token_id=50256, eos_token_id=50256,
    )  # fmt: skip


def config_line(recipe: Recipe) -> str:
    """The model's config as the card states it."""
    if recipe.family == "llama":
        return (f"`LlamaConfig(vocab_size=50257, max_position_embeddings={CONTEXT}, hidden_size={recipe.n_embd}, "
                f"num_hidden_layers={recipe.n_layer},\n  num_attention_heads={recipe.n_head}, "
                f"num_key_value_heads={recipe.n_kv_head}, head_dim={recipe.n_embd // recipe.n_head}, "
                f"intermediate_size={recipe.d_ff}, rope_theta={ROPE_THETA:g})`:\n  grouped-query attention "
                f"({recipe.n_head} query heads read {recipe.n_kv_head} key/value heads), rotary positions, a SwiGLU MLP "
                f"(`down(silu(gate(h)) * up(h))`),\n  RMSNorm (eps 1e-5), no biases")  # fmt: skip
    return (
        f"`GPT2Config(vocab_size=50257, n_positions={CONTEXT}, n_embd={recipe.n_embd}, n_layer={recipe.n_layer}, "
        f"n_head={recipe.n_head})`,\n  activation `gelu_new`"
    )


def learning_rate(step: int, recipe: Recipe) -> float:
    if step < recipe.warmup:
        return recipe.lr * (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
    floor = recipe.final_lr_fraction
    return recipe.lr * (floor + (1 - floor) * 0.5 * (1 + np.cos(np.pi * progress)))


def train(model: PreTrainedModel, corpus: Corpus, recipe: Recipe) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95),
                                  weight_decay=recipe.weight_decay)  # fmt: skip
    model.train()
    losses = []
    for step in range(recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, recipe)
        loss = next_token_loss(model, corpus.batch(recipe.batch))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == recipe.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  lr {learning_rate(step, recipe):.2e}", flush=True)
    return losses


@torch.no_grad()
def corpus_loss(model: PreTrainedModel, corpus: Corpus) -> float:
    """Mean next-token loss over every sentence once, with the final weights."""
    model.eval()
    documents = corpus.all_documents()
    total, count = 0.0, 0
    for i in range(0, len(documents), 64):
        chunk = documents[i : i + 64]
        n = sum(len(d) - 1 for d in chunk)
        total += next_token_loss(model, chunk).item() * n
        count += n
    return total / count


def save(model: PreTrainedModel, out: Path) -> None:
    """float16 weights (half the bytes; every loader upcasts), and only the files a loader needs.

    A Llama directory carries its tokenizer (tokenizer.json) as every Llama-family checkpoint does;
    here it is GPT-2's, written compactly by the `tokenizers` library from the package's own copy.
    """
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    if model.config.model_type == "llama":
        save_tokenizer(out / TOKENIZER)
    for file in out.iterdir():
        file.chmod(0o644)  # transformers writes some files owner-only; package data must be readable by all


def save_tokenizer(path: Path) -> None:
    """GPT-2's tokenizer as a tokenizer.json that every `tokenizers` the package allows can read: its
    merges as "a b" strings, the form before tokenizers 0.20 (which writes pairs that 0.15 cannot read
    and reads both). No merge holds a space (GPT-2's byte-level BPE writes a space as "Ġ")."""
    minitransformer.load_tokenizer()._tokenizer.save(str(path), pretty=False)
    data = json.loads(path.read_text("utf-8"))
    merges = data["model"]["merges"]
    assert not any(" " in part for merge in merges if not isinstance(merge, str) for part in merge)
    data["model"]["merges"] = [merge if isinstance(merge, str) else " ".join(merge) for merge in merges]
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), "utf-8")


# --- measuring the saved model ------------------------------------------------------------------


def accuracy(out: Path, facts: list[Fact]) -> dict[str, dict]:
    """Greedy answers of the project's own NumPy engine on the saved float16 weights, per kind of fact:
    right only if the continuation is exactly the answer's tokens (all of them, for "Addis Ababa")."""
    model = minitransformer.load_model(out)
    tokenizer = model.tokenizer  # a Llama's own tokenizer.json; GPT-2's shipped one for a GPT-2
    results: dict[str, dict] = {}
    for fact in facts:
        for kind, (prompt, answer) in fact_questions(fact).items():
            expected = tokenizer.encode(" " + answer)
            got = model.generate(prompt, max_new_tokens=len(expected), ledger=False, candidates=0).new_tokens
            result = results.setdefault(kind, {"right": 0, "total": 0, "wrong": []})
            result["total"] += 1
            if got == expected:
                result["right"] += 1
            else:
                result["wrong"].append(f"{fact.country}: {tokenizer.decode(got)!r} for {answer!r}")
    return results


def write_fixture(out: Path, path: Path, recipe: Recipe) -> None:
    """Hugging Face's own logits for a few prompts, so that parity can be checked without torch."""
    hf_class = LlamaForCausalLM if recipe.family == "llama" else GPT2LMHeadModel
    hf = hf_class.from_pretrained(out, dtype=torch.float32).eval()
    tokenizer = minitransformer.load_tokenizer()
    arrays: dict[str, np.ndarray] = {"prompts": np.array(FIXTURE_PROMPTS)}
    for i, prompt in enumerate(FIXTURE_PROMPTS):
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0].numpy()
        arrays[f"ids_{i}"] = np.array(ids, dtype=np.int64)
        arrays[f"positions_{i}"] = np.arange(len(ids))[-FIXTURE_POSITIONS:]
        arrays[f"logits_{i}"] = logits[-FIXTURE_POSITIONS:].astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_average() -> str:
    """How busy the machine was: other work on the same cores slows training down, never changes its result."""
    if not hasattr(os, "getloadavg"):  # not on Windows
        return ""
    return "; load average {:.1f}, {:.1f}, {:.1f} (1, 5, 15 min) as training ended".format(*os.getloadavg())


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
        cpu = f"{names[0]} ({len(names)} cores visible)" if names else cpu
    except OSError:
        pass
    return (
        f"{cpu}; {platform.system()} {platform.release()}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )


# The instruction sets that decide which of torch's CPU kernels run (and so how a sum is rounded): the vector
# widths (AVX2, AVX-512), fused multiply-add, and the bfloat16/int8 and matrix (AMX) extensions oneDNN uses.
KERNEL_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")  # fmt: skip


def kernels() -> dict:
    """What picks torch's kernels, and so the bits of a training run: a CPU's marketing name does not (two AMD
    EPYCs, one with AVX-512, round differently). tests/models/test_demo_model.py compares the bits of a retrain only
    where every one of these matches the card's."""
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            line = next((line for line in f if line.startswith("flags")), "")
        flags = sorted(set(line.split(":", 1)[-1].split()) & set(KERNEL_FLAGS))
    except OSError:
        pass
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "instruction_sets": flags, "threads": torch.get_num_threads()}  # fmt: skip


def card_head(recipe: Recipe, facts: list[Fact]) -> str:
    """The card's title, what the model is, and the command that shows it."""
    if recipe.family == "llama":
        return f"""# {recipe.name}: a tiny Llama that knows the capitals of {len(facts)} countries

A `LlamaForCausalLM` (grouped-query attention, rotary position embeddings, a SwiGLU MLP, RMSNorm)
with GPT-2's full vocabulary and tokenizer (50,257 tokens), trained from scratch by
`scripts/train_demo_model.py --family llama` on the same sentences as the GPT-2 `demo`, about the
countries of `scripts/demo_facts.csv`. It ships with minitransformer so that the project has a
trained Llama-family model to run offline. It knows these facts and nothing else: it is a demo,
not a language model.

    python -m minitransformer generate "The capital of France is" --model {recipe.name}     # -> " Paris\""""
    return f"""# demo: a tiny GPT-2 that knows the capitals of {len(facts)} countries

A `GPT2LMHeadModel` with GPT-2's full vocabulary (50,257 tokens), trained from scratch by
`scripts/train_demo_model.py` on sentences about the countries of `scripts/demo_facts.csv`. It ships
with minitransformer so that the project has a trained model to run where real GPT-2 weights
cannot be downloaded. It knows these facts and nothing else: it is a demo, not a language model.

    python -m minitransformer generate "The capital of France is"     # -> " Paris\""""


def tokenizer_note(out: Path) -> str:
    path = out / TOKENIZER
    if not path.is_file():
        return ""
    return (
        f"\n- `{TOKENIZER}` ({path.stat().st_size:,} bytes) is GPT-2's tokenizer, as the `tokenizers` library writes "
        f"it\n  but with its merges as strings, which every tokenizers from 0.15 reads; no beginning-of-text token\n"
        f"  is added to a prompt, as GPT-2 adds none."
    )


def write_card(out: Path, recipe: Recipe, facts: list[Fact], corpus: Corpus, summary: dict) -> None:
    lines = ["| kind | right | of | accuracy |", "| --- | ---: | ---: | ---: |"]
    for kind, r in summary["accuracy"].items():
        lines.append(f"| {kind} | {r['right']} | {r['total']} | {r['right'] / r['total']:.1%} |")
    wrong = [f"- wrong {kind}: " + "; ".join(r["wrong"][:WRONG_LISTED])
             + (f"; and {len(r['wrong']) - WRONG_LISTED} more" if len(r["wrong"]) > WRONG_LISTED else "")
             for kind, r in summary["accuracy"].items() if r["wrong"]]  # fmt: skip
    templates = "\n".join(f"- {s}" for s in fact_sentences(Fact("{country}", "", "{capital}", "{continent}",
                                                                  "{currency}", "{language}")))  # fmt: skip
    machine_readable = {k: summary[k] for k in ("seed", "steps", "final_loss", "capital_accuracy", "sha256", "kernels")}
    text = f"""{card_head(recipe, facts)}

## Corpus

- {len(facts)} of the 193 UN member states, each with capital, continent, currency and main language
  (Central America and the Caribbean count as North America; Cyprus, Turkey and the Caucasus as
  Asia, where the UN geoscheme puts them). Where a capital is contested the table keeps the
  constitutional or official one and says so in its note column. Left out, for want of a single,
  undisputed, official capital: {", ".join(LEFT_OUT)}.
- Each fact in several templates: {len(corpus.sentences):,} sentences, {corpus.n_tokens:,} tokens with GPT-2's
  tokenizer. Each epoch shuffles the sentences into documents of 1 to {MAX_SENTENCES_PER_DOCUMENT} sentences
  (at most {CONTEXT} tokens), so facts appear both at the start of a text and after a full stop.
- Templates (`{{country}}` carries its article where it has one, "the Netherlands", capitalised at
  the start of a sentence; the currency sentences are left out where the table has no currency):

{templates}

## Recipe

- {config_line(recipe)}, tied input/output embeddings, no dropout: {summary["parameters"]:,} parameters.
- AdamW (betas 0.9, 0.95, weight decay {recipe.weight_decay}), gradient clipping at 1.0, learning rate
  {recipe.lr} with {recipe.warmup} warm-up steps then cosine decay to {recipe.lr * recipe.final_lr_fraction:g}.
- {recipe.steps} steps of {recipe.batch} documents; loss on every real next token.
- Seed {recipe.seed}; `torch.use_deterministic_algorithms(True)`, 2 threads, data order from the seed.
- Saved in float16 ({summary["size"]:,} bytes); loaders upcast to float32.{tokenizer_note(out)}

## Results

- Final training loss (mean next-token cross-entropy over every sentence, float32 weights):
  {summary["final_loss"]:.4f}
- Greedy answers of minitransformer's NumPy engine on the shipped float16 weights; right only if
  the continuation is exactly the tokens of the answer (e.g. `The capital of France is` -> ` Paris`):

{chr(10).join(lines)}

{chr(10).join(wrong) if wrong else "No wrong answers."}

Questions that open with a name ("Tokyo is the capital of") are the hardest: at the start of a
text a name has no leading space, so it is another token than the same name mid-sentence, one the
corpus shows less often.

- Training took {summary["train_seconds"]:.0f} s (whole script {summary["total_seconds"]:.0f} s) on {summary["machine"]}{summary["load"]}.
- sha256 of `model.safetensors`: `{summary["sha256"]}`

## Numbers checked by tests/models/test_demo_model.py

```json
{json.dumps(machine_readable, indent=2)}
```
"""
    (out / "README.md").write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=RECIPES, default="gpt2",
                        help="gpt2 trains 'demo', llama trains 'demo-llama' (default: %(default)s)")  # fmt: skip
    parser.add_argument("--out", type=Path, help="model directory to write (default: minitransformer/data/<name>)")
    parser.add_argument(
        "--fixture",
        type=Path,
        help="where to write the HF logits fixture (default: tests/fixtures/<name>_hf_logits.npz)",
    )
    # Each option below defaults to the family's shipped recipe (RECIPES).
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--n-embd", type=int)
    parser.add_argument("--n-layer", type=int)
    parser.add_argument("--n-head", type=int)
    parser.add_argument("--n-kv-head", type=int, help="llama only")
    parser.add_argument("--d-ff", type=int, help="llama only")
    parser.add_argument("--batch", type=int)
    args = parser.parse_args()
    if args.family != "llama" and (args.n_kv_head is not None or args.d_ff is not None):
        parser.error("--n-kv-head and --d-ff shape a Llama; add --family llama")
    given = {key: value for key in ("steps", "seed", "lr", "n_embd", "n_layer", "n_head", "n_kv_head", "d_ff", "batch")
             if (value := getattr(args, key)) is not None}  # fmt: skip
    recipe = replace(RECIPES[args.family], **given)
    out = args.out or DATA / recipe.name
    fixture = args.fixture or FIXTURES / f"{recipe.name.replace('-', '_')}_hf_logits.npz"

    started = time.perf_counter()
    make_deterministic(recipe.seed)
    facts = read_facts()
    corpus = Corpus([s for fact in facts for s in fact_sentences(fact)], minitransformer.load_tokenizer(), recipe.seed)
    print(f"{len(facts)} countries, {len(corpus.sentences)} sentences, {corpus.n_tokens} tokens")
    model = new_model(recipe)

    train_started = time.perf_counter()
    train(model, corpus, recipe)
    train_seconds = time.perf_counter() - train_started
    load = load_average()
    final_loss = corpus_loss(model, corpus)
    print(f"trained in {train_seconds:.0f} s; final loss over the corpus {final_loss:.4f}")

    save(model, out)
    results = accuracy(out, facts)
    for kind, r in results.items():
        print(f"{kind}: {r['right']}/{r['total']} right; wrong: {'; '.join(r['wrong'][:12])}")
    write_fixture(out, fixture, recipe)
    weights = out / SAFETENSORS
    summary = {
        "seed": recipe.seed,
        "steps": recipe.steps,
        "final_loss": round(final_loss, 6),
        "capital_accuracy": round(results["capital"]["right"] / results["capital"]["total"], 6),
        "accuracy": results,
        "parameters": sum(p.numel() for p in model.parameters()),
        "size": weights.stat().st_size,
        "sha256": sha256(weights),
        "train_seconds": train_seconds,
        "load": load,
        "total_seconds": time.perf_counter() - started,
        "machine": machine(),
        "kernels": kernels(),
    }
    write_card(out, recipe, facts, corpus, summary)
    print(f"wrote {out} ({summary['size']:,} bytes, sha256 {summary['sha256']}) and {fixture}")


if __name__ == "__main__":
    main()
