"""Count any GPT-2- or Llama-shaped model without its weights: the ledger of a generation, from shapes alone.

The counts come from running the model's own forward code on shape-only stand-ins (shapes.py):
the same code as a real run, so the same ledger, with no arithmetic and no weights. A GPT-3 175B
with a 1,000-token prompt counts in a fraction of a second.

Every block of a model has the same shapes, so its records are the same in every layer but for
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
from fractions import Fraction
from pathlib import Path

from ..models.config import PRESETS, Config, GPT2Config, LlamaConfig, load_config
from ..errors import UserError
from ..engine.ledger import Ledger, Phase, Record, Totals, cache_comparison, cache_steps
from .memory import memory_dict
from ..models.model import Model
from .passes import forward_passes
from ..engine.stages import ATTENTION_SCORES, Family, family_of

STEPS_SHOWN = 10  # decode steps shown (and written in full to JSON) before the middle ones are summarised


# --- which model ----------------------------------------------------------------------------------------
def select_config(model: str | None = None, preset: str | None = None, config: str | None = None,
                  layers: int | None = None, d_model: int | None = None, heads: int | None = None,
                  d_ff: int | None = None, vocab: int | None = None, ctx: int | None = None,
                  kv_heads: int | None = None, head_dim: int | None = None,
                  gated_mlp: bool = False) -> Config:  # fmt: skip
    """The shapes of the model to count: by name or directory (its config.json only: no weights are read),
    by preset, from a config.json, or from sizes. Default: the gpt2 preset.

    Sizes make a GPT-2 block, unless kv_heads, head_dim or gated_mlp is given: then a Llama block
    (RMSNorm, rotary positions, q, k, v as three products with kv_heads key/value heads, a gated MLP,
    no biases).
    """
    sizes = {"--layers": layers, "--d-model": d_model, "--heads": heads, "--d-ff": d_ff, "--vocab": vocab, "--ctx": ctx,
             "--kv-heads": kv_heads, "--head-dim": head_dim}  # fmt: skip
    chosen = (("--model", model), ("--preset", preset), ("--config", config))
    given = [flag for flag, value in chosen if value is not None]
    by_sizes = gated_mlp or any(v is not None for v in sizes.values())
    if by_sizes:
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
    if by_sizes:
        return _config_from_sizes(sizes, gated_mlp)
    return PRESETS["gpt2"]


def _config_of_model(name: str) -> Config:
    from ..models.registry import DEMO, demo_dir, known_names

    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{name} has no config.json to read the model's shapes from")
        return _config_from_file(path / "config.json", name=path.resolve().name)
    if name in PRESETS:  # a hub name or a preset: its shapes are known, no download needed
        return PRESETS[name]
    if name == DEMO:
        return _config_from_file(demo_dir() / "config.json", name=DEMO)
    raise UserError(f"unknown model {name!r}; known models: {', '.join(known_names())}, or a directory "
                    f"(presets: {', '.join(PRESETS)})")  # fmt: skip


def _config_from_file(path: Path, name: str | None = None) -> Config:
    """A config.json of any supported family (gpt2, llama, mistral, qwen2)."""
    if path.is_dir():
        raise UserError(f"{path} is a directory; --config takes a config.json file (--model takes a directory)")
    try:
        return load_config(path, name=name)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None


def gated_mlp_width(d_model: int) -> int:
    """Llama's rule for the MLP width when none is given: 2/3 of 4 D (a gated MLP's three matrices then hold
    what a 4 D two-matrix MLP holds), rounded up to a multiple of 256: 11,008 for D = 4,096."""
    return 256 * -(-(8 * d_model // 3) // 256)


def _config_from_sizes(sizes: dict[str, int | None], gated_mlp: bool) -> Config:
    missing = [flag for flag in ("--layers", "--d-model", "--heads") if sizes[flag] is None]
    if missing:
        raise UserError(f"a model given by its sizes needs --layers, --d-model and --heads "
                        f"(missing {', '.join(missing)})")  # fmt: skip
    for flag, value in sizes.items():
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, not {value}")
    D, L, H = sizes["--d-model"], sizes["--layers"], sizes["--heads"]
    kv, dh = sizes["--kv-heads"], sizes["--head-dim"]
    vocab, ctx = sizes["--vocab"] or 50257, sizes["--ctx"] or 1024
    if not (gated_mlp or kv is not None or dh is not None):
        if D % H:
            raise UserError(f"--d-model {D} is not divisible by --heads {H}")
        return GPT2Config(n_layer=L, n_head=H, n_embd=D, n_inner=sizes["--d-ff"], vocab_size=vocab, n_positions=ctx,
                          name=f"custom-{L}x{D}")  # fmt: skip
    if kv is not None and H % kv:
        raise UserError(f"--kv-heads {kv} does not divide --heads {H}: each key/value head serves a whole group "
                        f"of query heads")  # fmt: skip
    if dh is None:
        if D % H:
            raise UserError(f"--d-model {D} is not divisible by --heads {H}; give --head-dim for heads of another size")
        if (D // H) % 2:
            raise UserError(f"--d-model {D} / --heads {H} = {D // H} is an odd head size; rotary embeddings turn "
                            f"pairs of numbers (give an even --head-dim)")  # fmt: skip
    elif dh % 2:
        raise UserError(f"--head-dim {dh} is odd; rotary embeddings turn pairs of numbers")
    return LlamaConfig(n_layer=L, n_head=H, n_embd=D, n_inner=sizes["--d-ff"] or gated_mlp_width(D), vocab_size=vocab,
                       n_kv_head=kv, head_dim=dh, n_positions=ctx, name=f"custom-llama-{L}x{D}")  # fmt: skip


# The shape-only stand-ins are NumPy arrays without data, and NumPy still counts their elements in a
# signed 64-bit integer: a count whose tensors would be larger cannot be run, even with no values.
LARGEST_TENSOR = 2**62


def check_run(config: Config, n_prompt: int, n_new: int, batch: int = 1) -> None:
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
        """op -> (dot products, MACs) over the whole pass (all layers), for the matrix products, in the order they run."""
        totals = {r.op: (0, 0) for r in self.before + self.block + self.after if r.kind == "matmul"}
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

    @property
    def attended(self) -> int:
        """Keys each block's scores were computed against (t, or fewer where a sliding window cut the oldest)."""
        return self.find("scores").out_shape[-1]

    def attention_vs_weights(self) -> "AttentionVsWeights":
        """The MACs of attention (Q K^T and A V) against those of the products with weights, per layer and in all."""
        attention = sum(r.macs for r in self.block if r.stage.group == ATTENTION_SCORES)
        weights = sum(r.macs for r in self.block if r.kind == "matmul" and r.stage.group != ATTENTION_SCORES)
        outside = sum(r.macs for r in self.before + self.after if r.kind == "matmul")
        return AttentionVsWeights(self, attention, weights, outside)

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


@dataclass(frozen=True)
class AttentionVsWeights:
    """One pass's attention (scores and mix: they grow with the context) against its products with weights
    (q, k, v or qkv, out, the MLP: the same at every context), per layer; `outside` is the logits."""

    step: Pass
    attention: int  # MACs, one layer
    weights: int  # MACs, one layer
    outside: int  # MACs of the products outside the blocks (the logits): weights too

    @property
    def layer_ratio(self) -> Fraction:
        return Fraction(self.attention, self.weights)

    @property
    def all_attention(self) -> int:
        return self.step.n_layer * self.attention

    @property
    def all_weights(self) -> int:
        """Every product with weights in the pass: the blocks' and the logits."""
        return self.step.n_layer * self.weights + self.outside

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.all_attention, self.all_weights)


def count_passes(model: Model, n_prompt: int, n_new: int, use_cache: bool = True, batch: int = 1) -> Ledger:
    """The ledger of generating n_new tokens after an n_prompt-token prompt, whatever the tokens are.

    The counts depend on shapes only, so placeholder token ids do; on a shape-only model
    (Model.without_weights) this costs no arithmetic at all.
    """
    book = Ledger(model.config.to_dict())
    lead = (batch,) if batch > 1 else ()
    placeholder_new: list[int] = []
    for _ in forward_passes(model, [0] * n_prompt, placeholder_new, n_new, use_cache, book, lead):
        placeholder_new.append(0)
    return book


def count_folded(config: Config, n_prompt: int, n_new: int, use_cache: bool = True, batch: int = 1) -> list[Pass]:
    """Every pass of the generation, run through a one-block shape-only twin of the model."""
    twin = Model.without_weights(replace(config, n_layer=1))
    return [Pass(phase, config.n_layer) for phase in count_passes(twin, n_prompt, n_new, use_cache, batch).phases]


def decode_at(config: Config, context: int, batch: int = 1) -> Pass:
    """A decode step with the KV cache at `context`: one new position after context - 1 cached ones (at context 1,
    the one-token prefill, which has the same shapes)."""
    if context == 1:
        return count_folded(config, 1, 1, True, batch)[0]
    return count_folded(config, context - 1, 2, True, batch)[1]



@dataclass
class Count:
    """The ledger of a generation counted from shapes alone, and the same generation the other way round
    (without the cache if this one has it, and vice versa): what the cache saves."""

    config: Config
    n_prompt: int
    n_new: int
    batch: int
    cached: bool
    passes: list[Pass]
    other_way: list[Pass]

    @property
    def family(self) -> Family:
        """The model's stage table (stages.py): its op names, their equations and groups."""
        return family_of(self.config)

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
        steps = cache_steps(self.cached, [(p.step, p.macs) for p in self.passes], [p.macs for p in self.other_way])
        return cache_comparison(self.cached, self.totals, self.other_totals, steps)

    def ops(self) -> dict[str, tuple[int, int]]:
        """op -> (dot products, MACs) over the whole generation."""
        totals = {op: (0, 0) for op in self.family.matmul_ops}
        for p in self.passes:
            for op, (dots, macs) in p.ops().items():
                totals[op] = (totals[op][0] + dots, totals[op][1] + macs)
        return totals

    def ledger(self) -> Ledger:
        """The full Ledger, every block of every pass expanded (as count_passes on the whole model gives)."""
        return Ledger(self.config.to_dict(), [p.expand() for p in self.passes], other_way=self.other_totals,
                      other_way_macs=[p.macs for p in self.other_way])  # fmt: skip

    # Jupyter draws a count inline through `_repr_html_`, which views/html_report.py gives this class at its import
    # (register_notebook_display): the data does not import the views that show it, layers above.

    def comparison_step(self) -> Pass:
        """The decode step whose attention is set against its products with weights: the last one with the cache
        (counted the other way if this count has no cache), or, without decode steps, one at context = the prompt."""
        cached = self.passes if self.cached else self.other_way
        if len(cached) > 1:
            return cached[-1]
        return decode_at(self.config, self.n_prompt, self.batch)

    def decode_example(self) -> Pass | None:
        """A decode step with the cache (T = 1) of this generation, for intensity: the last one counted with the
        cache (from the other-way run if this one had none), or the first step after the prompt if there is none
        (None if the context has no room for it)."""
        cached = self.passes if self.cached else self.other_way
        if len(cached) > 1:
            return cached[-1]
        if self.n_prompt + 2 > self.config.n_positions:
            return None
        return count_folded(self.config, self.n_prompt, 2, True, self.batch)[1]

    def shown_steps(self, limit: int = STEPS_SHOWN) -> list[int]:
        """The decode steps shown in full: all of them, or the first limit - 2 and the last 2."""
        steps = [p.step for p in self.decodes]
        return steps if len(steps) <= limit else [*steps[: limit - 2], *steps[-2:]]


def count_generation(config: Config, n_prompt: int, n_new: int = 1, use_cache: bool = True,
                     batch: int = 1) -> Count:  # fmt: skip
    """Count 1 prefill over n_prompt tokens and n_new - 1 decode steps, with a batch of `batch` sequences."""
    check_run(config, n_prompt, n_new, batch)
    passes = count_folded(config, n_prompt, n_new, use_cache, batch)
    other_way = count_folded(config, n_prompt, n_new, not use_cache, batch)
    check_folding(config, passes, n_prompt, use_cache, batch)
    return Count(config, n_prompt, n_new, batch, use_cache, passes, other_way)


def check_folding(config: Config, passes: list[Pass], n_prompt: int, use_cache: bool, batch: int) -> None:
    """The folded prefill and first decode step must be exactly what the whole model's forward code records."""
    whole = count_passes(Model.without_weights(config), n_prompt, min(len(passes), 2), use_cache, batch).phases
    for folded, phase in zip(passes, whole):
        expanded = folded.expand()
        if expanded.records != phase.records or (expanded.tokens, expanded.context) != (phase.tokens, phase.context):
            raise AssertionError(
                f"the one-block count of {phase.phase} step {phase.step} differs from the whole model's"
            )


def sweep_per_token(config: Config, points: int = 24) -> dict[str, list[int]]:
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
def json_chunks(count: Count, balance: float, all_steps: bool = False, dtype: str = "float32"):
    """The JSON document in pieces (a long generation is written without holding it all in memory).

    The schema is generate --json's, without the text: "prompt_tokens" and "new_tokens" are counts
    (a count has no tokens). The prefill and the decode steps the table shows are in full (Phase.to_dict);
    the other decode steps carry their totals only, unless all_steps. "detailed_steps" lists the full ones.
    """
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
        "memory": memory_dict(count, balance, dtype),
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
    "dense_dot_products", "dense_macs", "all_layers_dot_products", "all_layers_macs", "share_of_pass",
)  # fmt: skip


def csv_chunks(count: Count):
    """One row per matrix product per forward pass; block products once with `layers` = n_layer, since every
    layer has the same shapes: dot_products, macs, flops, causal_*, dense_* (on scores and mix: the dense form's
    cost, where row chunks computed less) are per layer, all_layers_* are x layers."""
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
                r.macs, r.flops, _blank(r.causal_dot_products), _blank(r.causal_macs),
                *((r.dense_dot_products, r.dense_macs) if r.causal_macs is not None else ("", "")), layers * r.dot_products,
                layers * r.macs, f"{layers * r.macs / pass_macs:.6f}",
            ])  # fmt: skip
        yield buffer.getvalue()
        buffer.seek(0), buffer.truncate()


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape)


def _blank(value) -> str | int:
    return "" if value is None else value
