"""Count any GPT-2-shaped model without its weights: the ledger of a generation, from shapes alone.

The counts come from running the model's own forward code on shape-only stand-ins (shapes.py):
the same code as a real run, so the same ledger, with no arithmetic and no weights. A GPT-3 175B
with a 1,000-token prompt counts in a fraction of a second.

Every block of a GPT-2 has the same shapes, so its records are the same in every layer but for
their name and layer index. A long generation on a deep model would hold millions of identical
records (GPT-3 175B, 1,000 new tokens: 96 blocks x 17 stages x 1,000 passes) and run the same block
code 96,000 times; so each pass here runs the forward code through a one-block twin of the model
and keeps that block's records to stand for all n_layer of them (`Pass`). `Pass.expand()` gives
the full ledger phase, and `count_generation` checks it against a run of the whole model (the
prefill and the first decode step) every time; the tests check whole generations.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from .config import PRESETS, GPT2Config
from .errors import UserError
from .generate import count_passes
from .ledger import Ledger, Phase, Record, Totals, cache_comparison
from .model import Model
from .stages import MATMUL_OPS

STEPS_SHOWN = 10  # decode steps shown (and written in full to JSON) before the middle ones are summarised


# --- which model ----------------------------------------------------------------------------------------
def select_config(model: str | None = None, preset: str | None = None, config: str | None = None,
                  layers: int | None = None, d_model: int | None = None, heads: int | None = None,
                  d_ff: int | None = None, vocab: int | None = None, ctx: int | None = None) -> GPT2Config:  # fmt: skip
    """The shapes of the model to count: by name or directory (its config.json only: no weights are read),
    by preset, from a config.json, or from sizes. Default: the gpt2 preset."""
    sizes = {"--layers": layers, "--d-model": d_model, "--heads": heads, "--d-ff": d_ff, "--vocab": vocab, "--ctx": ctx}
    chosen = (("--model", model), ("--preset", preset), ("--config", config))
    given = [flag for flag, value in chosen if value is not None]
    if any(v is not None for v in sizes.values()):
        given.append("sizes (--layers ...)")
    if len(given) > 1:
        raise UserError(f"choose one way to give the model, not {' and '.join(given)}")
    if preset is not None:
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
        return PRESETS[preset]
    if model is not None:
        return _config_of_model(model)
    if config is not None:
        return _config_from_file(Path(config))
    if any(v is not None for v in sizes.values()):
        return _config_from_sizes(sizes)
    return PRESETS["gpt2"]


def _config_of_model(name: str) -> GPT2Config:
    from .registry import DEMO, demo_dir, known_names

    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{name} has no config.json to read the model's shapes from")
        return _config_from_file(path / "config.json", name=path.resolve().name)
    if name in PRESETS:  # a hub name: its shapes are known, no download needed
        return PRESETS[name]
    if name == DEMO:
        return _config_from_file(demo_dir() / "config.json", name=DEMO)
    raise UserError(f"unknown model {name!r}; known models: {', '.join(known_names())}, or a directory "
                    f"(presets: {', '.join(PRESETS)})")  # fmt: skip


def _config_from_file(path: Path, name: str | None = None) -> GPT2Config:
    if path.is_dir():
        raise UserError(f"{path} is a directory; --config takes a config.json file (--model takes a directory)")
    try:
        return GPT2Config.from_json(path, name=name)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None


def _config_from_sizes(sizes: dict[str, int | None]) -> GPT2Config:
    missing = [flag for flag in ("--layers", "--d-model", "--heads") if sizes[flag] is None]
    if missing:
        raise UserError(f"a model given by its sizes needs --layers, --d-model and --heads "
                        f"(missing {', '.join(missing)})")  # fmt: skip
    for flag, value in sizes.items():
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, not {value}")
    if sizes["--d-model"] % sizes["--heads"]:
        raise UserError(f"--d-model {sizes['--d-model']} is not divisible by --heads {sizes['--heads']}")
    D, L, H = sizes["--d-model"], sizes["--layers"], sizes["--heads"]
    return GPT2Config(n_layer=L, n_head=H, n_embd=D, n_inner=sizes["--d-ff"], vocab_size=sizes["--vocab"] or 50257,
                      n_positions=sizes["--ctx"] or 1024, name=f"custom-{L}x{D}")  # fmt: skip


# The shape-only stand-ins are NumPy arrays without data, and NumPy still counts their elements in a
# signed 64-bit integer: a count whose tensors would be larger cannot be run, even with no values.
LARGEST_TENSOR = 2**62


def check_run(config: GPT2Config, n_prompt: int, n_new: int, batch: int = 1) -> None:
    for what, value in (("tokens", n_prompt), ("new tokens", n_new), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"{what} must be a whole number of at least 1, not {value!r}")
    config.check_fits(n_prompt, n_new)
    c, t = config, n_prompt + n_new
    largest = max(batch * t * max(3 * c.n_embd, c.d_ff, c.vocab_size), batch * c.n_head * t * t,
                  c.n_embd * max(3 * c.n_embd, c.d_ff, c.vocab_size, c.n_positions))  # fmt: skip
    if largest > LARGEST_TENSOR:
        raise UserError(f"this count needs a tensor of {largest:,} elements, more than NumPy can describe even "
                        f"without values (2**62); choose smaller sizes, fewer tokens or a smaller batch")  # fmt: skip


# --- counting ---------------------------------------------------------------------------------------------
@dataclass
class Pass:
    """One forward pass, its blocks folded: `twin` is the phase of a one-block twin of the model (records
    embed, blocks.0.*, ln_f, last, logits), and its block stands for each of the n_layer blocks."""

    twin: Phase
    n_layer: int
    block: list[Record] = field(init=False)
    before: list[Record] = field(init=False)  # the embedding
    after: list[Record] = field(init=False)  # final norm, last position, logits

    def __post_init__(self) -> None:
        records = self.twin.records
        first = next(i for i, r in enumerate(records) if r.layer == 0)
        last = max(i for i, r in enumerate(records) if r.layer == 0)
        self.before, self.block, self.after = records[:first], records[first : last + 1], records[last + 1 :]

    @property
    def phase(self) -> str:  # "prefill" | "decode"
        return self.twin.phase

    @property
    def step(self) -> int:
        return self.twin.step

    @property
    def tokens(self) -> int:
        return self.twin.tokens

    @property
    def context(self) -> int:
        return self.twin.context

    @property
    def batch(self) -> int:
        return self.twin.batch

    @property
    def cached(self) -> bool:
        return self.twin.cached

    def ops(self) -> dict[str, tuple[int, int]]:
        """op -> (dot products, MACs) over the whole pass (all layers), for the matrix products."""
        totals = {op: (0, 0) for op in MATMUL_OPS}
        for r, n in [*((r, 1) for r in self.before + self.after), *((r, self.n_layer) for r in self.block)]:
            if r.kind == "matmul":
                dots, macs = totals[r.op]
                totals[r.op] = (dots + n * r.dot_products, macs + n * r.macs)
        return totals

    @property
    def dot_products(self) -> int:
        return sum(r.dot_products for r in self.before + self.after) + self.n_layer * self.block_dot_products

    @property
    def macs(self) -> int:
        return sum(r.macs for r in self.before + self.after) + self.n_layer * self.block_macs

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def block_dot_products(self) -> int:
        return sum(r.dot_products for r in self.block)

    @property
    def block_macs(self) -> int:
        return sum(r.macs for r in self.block)

    @property
    def causal_macs(self) -> int:
        """The MACs the causal mask keeps: scores and mix counted by the (query, key) pairs it does not hide."""
        block = sum(r.causal_macs if r.causal_macs is not None else r.macs for r in self.block)
        return sum(r.macs for r in self.before + self.after) + self.n_layer * block

    def find(self, op: str) -> Record:
        return next(r for r in self.before + self.block + self.after if r.op == op)

    def expand(self) -> Phase:
        """The full ledger phase: the block's records once per layer, named and numbered as the model does."""
        p = self.twin
        full = Phase(p.phase, p.step, p.tokens, p.context, p.batch, p.cached, list(self.before))
        for i in range(self.n_layer):
            full.records += [replace(r, layer=i) for r in self.block]
        full.records += self.after
        return full

    def summary(self) -> dict:
        """The phase's JSON without the per-layer detail: its place in the generation and its totals."""
        p = self.twin
        return {"phase": p.phase, "step": p.step, "tokens": p.tokens, "context": p.context, "batch": p.batch,
                "cached": p.cached, "dot_products": self.dot_products, "macs": self.macs,
                "flops": self.flops}  # fmt: skip


def count_folded(config: GPT2Config, n_prompt: int, n_new: int, use_cache: bool = True, batch: int = 1) -> list[Pass]:
    """Every pass of the generation, run through a one-block shape-only twin of the model."""
    twin = Model.without_weights(replace(config, n_layer=1))
    return [Pass(phase, config.n_layer) for phase in count_passes(twin, n_prompt, n_new, use_cache, batch).phases]


@dataclass
class Count:
    """The ledger of a generation counted from shapes alone, and the same generation the other way round
    (without the cache if this one has it, and vice versa): what the cache saves."""

    config: GPT2Config
    n_prompt: int
    n_new: int
    batch: int
    cached: bool
    passes: list[Pass]
    other_way: list[Pass]

    @property
    def prefill(self) -> Pass:
        return self.passes[0]

    @property
    def decodes(self) -> list[Pass]:
        return self.passes[1:]

    @property
    def totals(self) -> Totals:
        return Totals(sum(p.dot_products for p in self.passes), sum(p.macs for p in self.passes))

    @property
    def other_totals(self) -> Totals:
        return Totals(sum(p.dot_products for p in self.other_way), sum(p.macs for p in self.other_way))

    def cache_comparison(self) -> dict:
        return cache_comparison(self.cached, self.totals, self.other_totals)

    def ops(self) -> dict[str, tuple[int, int]]:
        """op -> (dot products, MACs) over the whole generation."""
        totals = {op: (0, 0) for op in MATMUL_OPS}
        for p in self.passes:
            for op, (dots, macs) in p.ops().items():
                totals[op] = (totals[op][0] + dots, totals[op][1] + macs)
        return totals

    def ledger(self) -> Ledger:
        """The full Ledger, every block of every pass expanded (as count_passes on the whole model gives)."""
        return Ledger(self.config.to_dict(), [p.expand() for p in self.passes], other_way=self.other_totals)

    def shown_steps(self, limit: int = STEPS_SHOWN) -> list[int]:
        """The decode steps shown in full: all of them, or the first limit - 2 and the last 2."""
        steps = [p.step for p in self.decodes]
        return steps if len(steps) <= limit else [*steps[: limit - 2], *steps[-2:]]


def count_generation(config: GPT2Config, n_prompt: int, n_new: int = 1, use_cache: bool = True,
                     batch: int = 1) -> Count:  # fmt: skip
    """Count 1 prefill over n_prompt tokens and n_new - 1 decode steps, with a batch of `batch` sequences."""
    check_run(config, n_prompt, n_new, batch)
    passes = count_folded(config, n_prompt, n_new, use_cache, batch)
    other_way = count_folded(config, n_prompt, n_new, not use_cache, batch)
    check_folding(config, passes, n_prompt, use_cache, batch)
    return Count(config, n_prompt, n_new, batch, use_cache, passes, other_way)


def check_folding(config: GPT2Config, passes: list[Pass], n_prompt: int, use_cache: bool, batch: int) -> None:
    """The folded prefill and first decode step must be exactly what the whole model's forward code records."""
    whole = count_passes(Model.without_weights(config), n_prompt, min(len(passes), 2), use_cache, batch).phases
    for folded, phase in zip(passes, whole):
        expanded = folded.expand()
        if expanded.records != phase.records or (expanded.tokens, expanded.context) != (phase.tokens, phase.context):
            raise AssertionError(
                f"the one-block count of {phase.phase} step {phase.step} differs from the whole model's"
            )


def sweep_per_token(config: GPT2Config, points: int = 24) -> dict[str, list[int]]:
    """MACs to generate one token at context t, with and without the KV cache, for t across the context window.

    Each point is a counted pass: with the cache, the decode step at context t (T = 1); without it,
    the pass that recomputes all t positions (T = t). At t = 1 both are the one-token prefill.
    """
    n = config.n_positions
    contexts = sorted({max(2, round(2 + (n - 2) * i / (points - 1))) for i in range(points)}) if n > 2 else [n]
    contexts = [t for t in contexts if t >= 2] or [1]
    with_cache, without = [], []
    for t in contexts:
        if t == 1:
            macs = count_folded(config, 1, 1)[0].macs
            with_cache.append(macs), without.append(macs)
            continue
        with_cache.append(count_folded(config, t - 1, 2)[1].macs)
        without.append(count_folded(config, t, 1, use_cache=False)[0].macs)
    return {"context": contexts, "with_cache": with_cache, "without_cache": without}


# --- data out: JSON and CSV -------------------------------------------------------------------------------
def json_chunks(count: Count, balance: float, all_steps: bool = False):
    """The JSON document in pieces (a long generation is written without holding it all in memory).

    The schema is generate --json's, without the text: "prompt_tokens" and "new_tokens" are counts
    (a count has no tokens). The prefill and the decode steps the table shows are in full (Phase.to_dict);
    the other decode steps carry their totals only, unless all_steps. "detailed_steps" lists the full ones.
    """
    from .memory import memory_dict

    detailed = {0, *(range(1, count.n_new) if all_steps else count.shown_steps())}
    head = {
        "model": count.config.to_dict(),
        "counted_from": "shapes only: no weights (a shape-only run of the forward code)",
        "prompt_tokens": count.n_prompt,
        "new_tokens": count.n_new,
        "batch": count.batch,
        "detailed_steps": sorted(detailed),
    }
    tail = {
        "totals": count.totals.to_dict(),
        "cache": count.cache_comparison(),
        "memory": memory_dict(count, balance),
    }
    yield "{\n"
    for key, value in head.items():
        yield f' {json.dumps(key)}: {json.dumps(value, indent=1)},\n'
    yield ' "phases": [\n'
    for i, p in enumerate(count.passes):
        phase = p.expand().to_dict() if p.step in detailed else p.summary()
        yield json.dumps(phase, indent=1) + (",\n" if i < len(count.passes) - 1 else "\n")
    yield " ],\n"
    yield ",\n".join(f" {json.dumps(key)}: {json.dumps(value, indent=1)}" for key, value in tail.items()) + "\n}\n"


CSV_COLUMNS = (
    "phase", "step", "tokens", "context", "batch", "cached", "op", "equation", "layers", "a_shape", "b_shape",
    "out_shape", "heads", "dot_products", "dot_length", "macs", "flops", "causal_dot_products", "causal_macs",
    "all_layers_dot_products", "all_layers_macs", "share_of_pass",
)  # fmt: skip


def csv_chunks(count: Count):
    """One row per matrix product per forward pass; block products once with `layers` = n_layer, since every
    layer has the same shapes: dot_products, macs, flops, causal_* are per layer, all_layers_* are x layers."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in count.passes:
        pass_macs = p.macs
        for r, layers in [*((r, count.config.n_layer) for r in p.block), *((r, 1) for r in p.after)]:
            if r.kind != "matmul":
                continue
            writer.writerow([
                p.phase, p.step, p.tokens, p.context, p.batch, p.cached, r.op, r.equation, layers,
                _dims(r.a_shape), _dims(r.b_shape), _dims(r.out_shape), r.heads or "", r.dot_products, r.dot_length,
                r.macs, r.flops, _blank(r.causal_dot_products), _blank(r.causal_macs), layers * r.dot_products,
                layers * r.macs, f"{layers * r.macs / pass_macs:.6f}",
            ])  # fmt: skip
        yield buffer.getvalue()
        buffer.seek(0), buffer.truncate()


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape)


def _blank(value) -> str | int:
    return "" if value is None else value
