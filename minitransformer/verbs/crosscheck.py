"""Our ledger beside torch's own counters, on transformers' forward of the same model and the same ids.

One forward pass over every position (the logits of each), counted three ways:

- **the ledger**: our forward pass's products, as computed (attention in row chunks past 128 positions, each chunk
  against only the keys it can see) and in their dense form (every T x t score, as transformers' eager attention);
- **dispatch**: every matrix product torch dispatches while transformers' eager forward runs (aten mm, addmm, bmm,
  baddbmm, _grouped_mm, mv, dot, convolution: what `matmul`, `linear` and `einsum` decompose into), each counted by
  the rule of the ledger, m p n MACs, read by a TorchDispatchMode: what the CPU was asked to multiply;
- **FlopCounterMode** (torch.utils.flop_counter): torch's own FLOP count of the same forward, with eager attention and
  with SDPA (its scaled_dot_product_attention), halved to MACs.

Each product is put in a group by its operands, the same way on both sides: a product that reads the output embedding
makes the logits; one that reads another parameter is a product with weights (a record whose B is a weight:
Record.b_operand); the others multiply what the pass computed (attention's scores and mix, a scan's products). What
FlopCounterMode counted of each product is what its total grew by while that product ran. Every difference between
the columns is then named with its reason (reasons()), from what torch dispatched; a hybrid's recurrent layers, which
transformers' pure-PyTorch fallbacks compute otherwise than our engine, by the closed forms of crosscheck_scans.py
(a triangular solve, which no product kernel runs, is counted beside the products: Tally.solves).

Needs torch and transformers (the `hf` extra); they are imported here, when it runs, never with the package.
"""

from __future__ import annotations

import importlib.util
import traceback
import weakref
from dataclasses import dataclass, field
from math import prod

import numpy as np

from ..engine.ledger import Phase
from ..engine.stages import UNEMBEDDING
from ..errors import UserError
from ..models.model import Model
from ..models.options import RunOptions
from ..text import plural
from .validate import EXPERTS_PATH, from_pretrained, reference_class

GROUPS = ("products with weights", "products of activations", "logits")
WEIGHTS, ACTIVATIONS, LOGITS = GROUPS
# SDPA's kernels as torch dispatches them (the fused attention that FlopCounterMode has a formula for on GPUs only).
SDPA_KERNELS = (
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_attention_math",
)


def _macs(name: str, args: tuple, out) -> int | None:
    """MACs of one dispatched aten op by the ledger's rule (every output element a dot product of the shared inner
    length), or None for an op that is not a product."""
    if name in ("mm", "bmm", "_grouped_mm", "mv", "_scaled_mm"):
        return out.numel() * args[0].shape[-1]
    if name in ("addmm", "baddbmm", "addmv"):
        return out.numel() * args[1].shape[-1]
    if name == "addbmm":  # the batch's products summed into one [n, p]
        return args[1].shape[0] * out.numel() * args[1].shape[-1]
    if name in ("dot", "vdot"):
        return args[0].numel()
    if name in ("convolution", "_convolution"):  # each output element: in_channels / groups x the kernel
        return out.numel() * prod(args[1].shape[1:])
    return None


def _forward_substitution_macs(system, solution) -> int:
    """MACs of solving a triangular C x C system for a [..., C, n] right-hand side, row by row: row i takes i MACs a
    column (the rows before it), C (C - 1) / 2 a column; a diagonal that is not one adds divisions, not MACs."""
    C = system.shape[-1]
    return solution.numel() // C * C * (C - 1) // 2


@dataclass
class Tally:
    """What one forward counted, group by group: dispatched products' MACs, FlopCounterMode's, and the ops seen."""

    dispatch: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    flop_counter: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    ops: dict[str, dict[str, int]] = field(default_factory=lambda: {g: {} for g in GROUPS})  # group -> aten op -> MACs
    # FLOPs FlopCounterMode counted on ops that are not products (SDPA's kernels on GPUs), and calls of SDPA's kernels
    unattributed_flops: int = 0
    sdpa_calls: dict[str, int] = field(default_factory=dict)
    # Products written as an elementwise multiply and a sum along a dimension (aten.mul, then aten.sum of its output):
    # the multiplies, one MAC each, which no product counter sees
    multiply_sum: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    # Triangular solves (aten.linalg_solve_triangular, the delta rule's chunks): no product kernel, so in no counter
    # of products; their forward substitution's MACs, C (C - 1) / 2 a right-hand column (unit diagonal), kept beside
    solves: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))

    @property
    def dispatch_macs(self) -> int:
        return sum(self.dispatch.values())

    @property
    def flop_counter_macs(self) -> int:
        return sum(self.flop_counter.values()) + self.unattributed_flops // 2


def _tally(torch, reference, ids: list[int]) -> Tally:
    """One forward of transformers' model, watched by a dispatch mode inside FlopCounterMode."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    parameters = {p.untyped_storage().data_ptr() for p in reference.parameters()}
    output = reference.get_output_embeddings()
    unembedding = output.weight.untyped_storage().data_ptr() if output is not None else None
    counter = FlopCounterMode(display=False)
    tally = Tally()

    def group_of(args) -> str:
        storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        return LOGITS if unembedding in storages else WEIGHTS if storages & parameters else ACTIVATIONS

    multiplied: dict[int, tuple] = {}  # id of a multiply's output -> (a weak reference to it, its group, its elements)

    class Products(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = counter.get_total_flops()
            out = func(*args, **(kwargs or {}))  # FlopCounterMode, below this mode, counts it
            counted = counter.get_total_flops() - before
            name = func.overloadpacket.__name__
            macs = _macs(name, args, out)
            if name == "mul" and all(isinstance(a, torch.Tensor) and a.dim() for a in args[:2]):
                multiplied[id(out)] = (weakref.ref(out), group_of(args), out.numel())
            elif name == "sum" and len(args) > 1 and args[1] and id(args[0]) in multiplied:
                kept, group, elements = multiplied.pop(id(args[0]))
                if kept() is args[0]:
                    tally.multiply_sum[group] += elements
            if name == "linalg_solve_triangular":
                tally.solves[group_of(args)] += _forward_substitution_macs(args[0], out)
            if macs is not None:
                group = group_of(args)
                tally.dispatch[group] += macs
                tally.ops[group][name] = tally.ops[group].get(name, 0) + macs
                tally.flop_counter[group] += counted // 2
            else:
                tally.unattributed_flops += counted
                if name in SDPA_KERNELS:
                    tally.sdpa_calls[name] = tally.sdpa_calls.get(name, 0) + 1
            return out

    with torch.no_grad(), counter, Products():
        reference(torch.tensor([ids]))
    return tally


@dataclass
class Crosscheck:
    """The three counts of one forward over `ids`, group by group (see the module docstring)."""

    model: Model
    reference_class: str
    versions: dict[str, str]
    ids: list[int]
    phase: Phase  # our pass, as computed
    dense: bool  # our pass computed every T x t score (--dense-attention)
    eager: Tally
    sdpa: Tally | None  # None: transformers offers no SDPA for this class
    experts_one_by_one: bool = False  # transformers' experts ran eager: its grouped_mm refused their widths

    def ledger(self, group: str, dense_form: bool = False) -> int:
        return sum(r.dense_macs if dense_form else r.macs for r in self.phase.records if group_of_record(r) == group)

    def ledger_ops(self, group: str) -> list[str]:
        return list(dict.fromkeys(r.op for r in self.phase.records if group_of_record(r) == group))

    @property
    def ledger_macs(self) -> int:
        return self.phase.macs

    @property
    def ledger_dense_macs(self) -> int:
        return self.phase.dense_macs

    def groups(self) -> list[dict]:
        rows = []
        for g in GROUPS:
            row = {
                "group": g,
                "ops": self.ledger_ops(g),
                "ledger_macs": self.ledger(g),
                "ledger_dense_macs": self.ledger(g, dense_form=True),
                "dispatch_macs": self.eager.dispatch[g],
                "flop_counter_macs": self.eager.flop_counter[g],
                "flop_counter_sdpa_macs": None if self.sdpa is None else self.sdpa.flop_counter[g],
                "dispatch_sdpa_macs": None if self.sdpa is None else self.sdpa.dispatch[g],
                "torch_ops": dict(self.eager.ops[g]),
                "multiply_sum_macs": self.eager.multiply_sum[g],
                "solve_macs": self.eager.solves[g],
            }
            row["reasons"] = reasons(row, self)
            rows.append(row)
        return rows

    def to_dict(self) -> dict:
        return {
            "model": self.model.describe(),
            "reference": self.reference_class,
            "versions": self.versions,
            "tokens": len(self.ids),
            "dense_attention": self.dense,
            "ledger_macs": self.ledger_macs,
            "ledger_dense_macs": self.ledger_dense_macs,
            "dispatch_macs": self.eager.dispatch_macs,
            "flop_counter_macs": self.eager.flop_counter_macs,
            "flop_counter_sdpa_macs": None if self.sdpa is None else self.sdpa.flop_counter_macs,
            "groups": self.groups(),
            "sdpa_kernels": None if self.sdpa is None else dict(self.sdpa.sdpa_calls),
            "experts_one_by_one": self.experts_one_by_one,
        }


def group_of_record(r) -> str | None:
    """Our side of the grouping: the logits, the products whose B is a weight, the others (None: not a product)."""
    if r.kind != "matmul":
        return None
    if r.stage.group == UNEMBEDDING:
        return LOGITS
    return WEIGHTS if r.b_operand == "weight" else ACTIVATIONS


def reasons(row: dict, check: Crosscheck) -> list[str]:
    """Why the columns of one group differ, each difference named from what torch dispatched (and "the same" where
    they do not); a difference no known reason explains is said to be unexplained, with its size."""
    records = [r for r in check.phase.records if group_of_record(r) == row["group"]]
    said = _computed_less(records, check) + _dispatched(row, check) + _flop_counted(row, check)
    if check.experts_one_by_one and row["group"] == WEIGHTS:
        said.append(
            "transformers' experts ran one by one (experts_implementation='eager'): its default, torch's grouped_mm, "
            "refuses these widths (rows not a multiple of 16 bytes)"
        )
    return said or ["the same"]


def fused_kernels(calls: dict[str, int]) -> str:
    """The SDPA kernels torch ran and how often: "aten.k (1 call), aten.j (4 calls)"."""
    return ", ".join(f"aten.{kernel} ({plural(n, 'call')})" for kernel, n in calls.items())


def _computed_less(records: list, check: Crosscheck) -> list[str]:
    """Where our ledger computed less than its dense form: attention in row chunks or over an indexer's chosen keys,
    a product computed in pieces."""
    said = []
    attention = [r for r in records if r.attention]
    skipped = sum(r.dense_macs - r.macs for r in attention)
    if skipped:
        # A chunk computes its own rows' block whole, the masked scores above its diagonal too: it skips the keys
        # after its last row, not the causal half (at T = 160, 16% of the dense form).
        keys = (
            "its attention chunk's keys"
            if any(r.chunked is not None for r in attention)
            else "the keys from its first row's sliding window"
            if any(r.window is not None for r in attention)
            else "the keys"
        )
        ways = []
        if _row_chunk(check):
            ways.append(
                f"in row chunks of {_row_chunk(check)} query rows, each chunk against {keys} up to its last row (its "
                f"own rows' block whole, the masked scores in it too)"
            )
        if any(r.selected is not None for r in attention):  # sparse attention (DeepSeek-V3.2's)
            ways.append("each query over the keys its indexer chose alone")
        said.append(
            f"ours computed attention {', and '.join(ways)}: {skipped:,} MACs of the dense form skipped; "
            f"--dense-attention computes every T x t score, as transformers' eager attention does"
        )
    for op in dict.fromkeys(r.op for r in records if not r.attention and r.macs != r.dense_macs):
        mine = [r for r in records if r.op == op]
        done, whole = sum(r.macs for r in mine), sum(r.dense_macs for r in mine)
        how = " (a triangular solve, row by row: row i a product of i numbers)" if op == "delta.solve" else ""
        said.append(
            f"ours computes {op} in pieces{how}: {done:,} MACs as computed, {whole:,} in its dense form, "
            f"one full product"
        )
    return said


def _dispatched(row: dict, check: Crosscheck) -> list[str]:
    """Where the products torch dispatched differ from our dense form: a hybrid's scans (each difference with its
    closed form), products transformers writes as a multiply and a sum, or what no known reason explains."""
    from .crosscheck_scans import scan_differences  # here: it reads the hybrids' configs, and loading their families
    # is what a command that runs one model no longer waits for (families/table.py)

    dense, dispatch = row["ledger_dense_macs"], row["dispatch_macs"]
    differences = [d for d in scan_differences(check.model.config, len(check.ids)) if d.group == row["group"]]
    if differences:
        return _named(row, differences)
    if dispatch == dense:
        return []
    grouped = row["torch_ops"].get("_grouped_mm", 0)
    written = row["multiply_sum_macs"]
    if dispatch < dense and dense - dispatch == written:
        return [
            f"transformers writes {written:,} MACs of these products as an elementwise multiply and a sum "
            f"(aten.mul, then aten.sum of it), which no counter of products sees"
        ]
    if dispatch < dense:
        return [
            f"UNEXPLAINED: torch dispatched {dense - dispatch:,} MACs fewer than our dense form as matrix "
            f"products ({written:,} written as a multiply and a sum)"
        ]
    return [
        f"UNEXPLAINED: torch dispatched {dispatch - dense:,} MACs more than our dense form"
        + (" (its experts' grouped product)" if grouped else "")
    ]


def _flop_counted(row: dict, check: Crosscheck) -> list[str]:
    """Where FlopCounterMode counts other than what torch dispatched: a product it has no formula for (the experts'
    grouped product; SDPA's fused kernel on a CPU), or no SDPA column at all."""
    said = []
    eager_fc, sdpa_fc = row["flop_counter_macs"], row["flop_counter_sdpa_macs"]
    missing = row["dispatch_macs"] - eager_fc
    grouped = row["torch_ops"].get("_grouped_mm", 0)
    if missing and missing == grouped:
        said.append(
            f"FlopCounterMode has no formula for aten._grouped_mm, the product transformers' experts run as: "
            f"the experts' {grouped:,} MACs are not counted"
        )
    elif missing:
        said.append(f"UNEXPLAINED: FlopCounterMode counted {missing:,} MACs fewer than torch dispatched")
    if check.sdpa is None:
        if row["group"] == ACTIVATIONS and not any(r.attention == "scores" for r in check.phase.records):
            said.append(
                f"{check.reference_class} has no attention layer (its layers are state-space ones), so there "
                f"is no SDPA column"
            )
        elif row["group"] == ACTIVATIONS:
            said.append(
                f"transformers offers no SDPA for {check.reference_class} (its attention is not what SDPA "
                f"computes), so there is no SDPA column"
            )
    elif sdpa_fc != eager_fc:
        kernels = fused_kernels(check.sdpa.sdpa_calls)
        if row["group"] == ACTIVATIONS and kernels and sdpa_fc == row["dispatch_sdpa_macs"]:
            said.append(
                f"with SDPA, attention runs in one fused kernel, {kernels}, for which FlopCounterMode has "
                f"no formula on a CPU: {eager_fc - sdpa_fc:,} MACs of scores and mix count 0 (on a GPU its "
                f"formula counts the dense T x t, with no causal half)"
            )
        else:
            said.append(f"UNEXPLAINED: FlopCounterMode counted {eager_fc - sdpa_fc:,} MACs fewer with SDPA")
    elif row["group"] == ACTIVATIONS and not check.sdpa.sdpa_calls:
        said.append(
            "with SDPA too, torch ran attention as plain products (no fused kernel took these shapes), "
            "which FlopCounterMode counts as in eager"
        )
    return said


def _named(row: dict, differences: list) -> list[str]:
    """A hybrid's differences from our dense form (crosscheck_scans), each with its closed form; what they leave
    unexplained, if anything, with its size."""
    said = [d.reason for d in differences]
    dispatch, dense = row["dispatch_macs"], row["ledger_dense_macs"]
    left = dispatch - dense - sum(d.macs for d in differences)
    if left:
        said.append(
            f"UNEXPLAINED: torch dispatched {left:,} MACs {'more' if left > 0 else 'fewer'} than our dense form "
            f"and the differences named here"
        )
    else:
        said.append(
            f"so torch dispatched {dispatch:,} = our dense form {dense:,} "
            + " ".join(f"{'+' if d.macs > 0 else '-'} {abs(d.macs):,}" for d in differences if d.macs)
            + " MACs, exactly"
        )
    multiplies = sum(d.multiplies for d in differences)
    if multiplies != row["multiply_sum_macs"]:
        said.append(
            f"UNEXPLAINED: transformers wrote {row['multiply_sum_macs']:,} multiplies as a multiply and a sum, "
            f"not the {multiplies:,} named here"
        )
    return said


def _row_chunk(check: Crosscheck) -> int:
    return next((r.row_chunk for r in check.phase.records if r.row_chunk is not None), 0)


def crosscheck(model: Model, ids: list[int], dense_attention: bool = False) -> Crosscheck:
    """The three counts of one forward over every position of `ids` (module docstring)."""
    if not isinstance(model, Model):  # an AttributeError on shape_only before
        raise UserError(f"crosscheck counts a Model's forward (load_model(...)), not {model!r:.60}")
    if model.shape_only:
        raise UserError("a shape-only model has no weights to run transformers' forward on; give --model DIR")
    checked = model.check_ids(ids)
    if checked.ndim != 1:  # the three counters are set against one sequence's positions
        raise UserError(f"crosscheck reads one prompt's token ids [T], not a batch of shape {list(checked.shape)}")
    ids = checked.tolist()
    torch, transformers = _import_hf()  # after the refusals that need neither: importing them takes seconds
    name = reference_class(model)
    if not hasattr(transformers, name):
        raise UserError(
            f"transformers {transformers.__version__} has no {name}, which crosscheck runs; upgrade "
            f"transformers (pip install -U transformers)"
        )
    phase = Phase("prefill", 0, len(ids), len(ids))
    model.run(ids, all_positions=True, phase=phase, options=RunOptions(dense_attention=dense_attention))
    reference = _load(transformers, name, model.source)
    torch.manual_seed(0)
    one_by_one = False
    try:
        eager = _tally(torch, reference, ids)
    except RuntimeError as error:  # grouped_mm, transformers' default experts path, refused the widths (EXPERTS_PATH)
        if not model.config.routes or not _raised_in_grouped_mm(error):
            raise
        reference, one_by_one = _load(transformers, name, model.source, **EXPERTS_PATH), True
        torch.manual_seed(0)
        eager = _tally(torch, reference, ids)
    try:
        reference.set_attn_implementation("sdpa")
    except ValueError:  # a class that offers no SDPA (Gemma 2's soft-capped scores, gpt-oss's sinks)
        sdpa = None
    else:
        sdpa = _tally(torch, reference, ids)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    return Crosscheck(model, name, versions, ids, phase, dense_attention, eager, sdpa, one_by_one)


def _raised_in_grouped_mm(error: RuntimeError) -> bool:
    """Whether transformers' grouped_mm experts path raised `error` (torch's messages name neither it nor the
    widths: "strides should be multiple of 16 bytes"), not some other part of the forward."""
    return any("grouped_mm" in frame.name for frame in traceback.extract_tb(error.__traceback__))


def default_ids(model: Model, tokens: int | None) -> list[int]:
    """`tokens` seeded random ids (default: 160, past the 128-row chunk, or the whole context if it is shorter)."""
    n = min(160, model.config.n_positions) if tokens is None else tokens
    if n < 1 or n > model.config.n_positions:
        raise UserError(f"--tokens must be 1 to {model.config.n_positions:,} (the context), not {n}")
    return np.random.default_rng(0).integers(0, model.config.vocab_size, n).tolist()


def require_hf() -> None:
    """A UserError saying what to install where torch or transformers is missing, found without importing them (6 to
    8 seconds here), so that a refusal of the arguments comes at once; a broken install fails at `_import_hf`."""
    if any(importlib.util.find_spec(name) is None for name in ("torch", "transformers")):
        _import_hf()


def _import_hf():
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError(
            "crosscheck runs transformers' forward: pip install 'minitransformer[hf]' (torch, transformers)"
        ) from None
    return torch, transformers


def transformers_float32():
    import torch

    return torch.float32


def _load(transformers, name: str, source: str, **options):
    """transformers' model of the same weights, float32, eager attention (SDPA is set on it for the second run);
    `options`, from_pretrained's others."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model_class = getattr(transformers, name)
        return from_pretrained(
            model_class, source, dtype=transformers_float32(), attn_implementation="eager", **options
        )
    finally:
        if shown:
            hf_logging.enable_progress_bar()
