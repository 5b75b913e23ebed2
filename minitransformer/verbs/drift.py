"""The drift ledger: what a narrower precision costs, stage by stage, measured against the float64 truth.

The same token ids run twice over every position of the prompt: through the model at its precision (bfloat16,
float16, fp8: engine/precision.py), and through the same weights in float64. For every stage both passes show
to their watchers, the difference, relative to the truth's own scale:

- max rel: max |ours - truth| / max |truth| over the stage's tensor (relative to the tensor's largest value, so
  that a value near zero does not make a small error look large);
- rms rel: rms(ours - truth) / rms(truth);
- max |x|: the largest magnitude the truth reaches there, and whether the precision's own pass left the format's
  range there (overflow: a finite value rounded to inf, or clamped where the format saturates; underflow: values
  flushed to zero that matter, Precision.underflow_matters), read from the rounding's log as it happened.

At the end, the next-token distributions at every position: KL(truth || ours), averaged over the positions (and
the largest), and how often the two agree on the likeliest token (top-1 agreement).

And where the model chooses (a router's experts, an indexer's keys: stages of kind "select" whose output is indices),
every choice that differs from the truth's: which layer and stage, which token's position, what each pass chose, and
our pass's margin there where it tied or near-tied at the k-th place (engine/selection.py).

A float64 model measured against itself drifts by zero everywhere. The weights are those of the precision run's
source directory, read again in float64: its rounding to the format is part of what is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..engine.ledger import Phase
from ..engine.precision import RangeEvent
from ..errors import UserError
from ..models.model import Model
from ..models.options import LoadOptions


@dataclass
class StageDrift:
    """One stage's drift: its full name ("blocks.2.attn.q"), its block (None outside the blocks) and its name in
    the block ("attn.q"), the relative differences, the truth's largest magnitude, and what left the range."""

    name: str
    layer: int | None
    stage: str
    max_rel: float
    rms_rel: float
    max_abs: float
    overflow: bool = False
    underflow: bool = False
    nonfinite: int = 0  # values inf or NaN in our pass where the truth is finite


@dataclass
class SelectionDrift:
    """One choice that differs from the truth's: its layer, stage ("router.topk", "index.topk", ...) and position,
    the indices chosen here and in float64 (each in increasing order), and our pass's margin at its k-th place where
    it tied or near-tied (None: it did neither)."""

    layer: int | None
    stage: str
    position: int
    chosen: list[int]
    truth: list[int]
    margin: float | None = None


@dataclass
class Drift:
    precision: str
    model: str
    tokens: list[int]
    stages: list[StageDrift]
    kl: float  # KL(truth || ours) of the next-token distributions, averaged over the positions
    kl_max: float
    top1_agreement: float  # the share of positions where both choose the same likeliest token
    events: list[RangeEvent] = field(default_factory=list)
    # The choices that differ from the truth's; None where the model chooses nothing (no router, no indexer).
    selections: list[SelectionDrift] | None = None
    chosen: dict = field(default_factory=dict)  # (layer, stage) -> how many positions chose there (compared)

    @property
    def layers(self) -> list[int]:
        return sorted({s.layer for s in self.stages if s.layer is not None})

    def worst(self, n: int = 5) -> list[StageDrift]:
        return sorted(self.stages, key=lambda s: (-_ordered(s.max_rel), s.name))[:n]

    def overflows(self) -> list[RangeEvent]:
        return [e for e in self.events if e.overflowed]

    def underflows(self) -> list[RangeEvent]:
        return [e for e in self.events if not e.overflowed]

    def to_dict(self) -> dict:
        """The JSON's `drift`: precision, kl, top1_agreement; layers (each block's stages), the stages outside the
        blocks; overflow and underflow, each a list of {layer, stage, ...} where the precision left its range."""
        layers = []
        for layer in self.layers:
            stages = [_stage_dict(s) for s in self.stages if s.layer == layer]
            layers.append({"layer": layer, "stages": stages})
        return {
            "precision": self.precision,
            "reference": "float64",
            "positions": len(self.tokens),
            "kl": _number(self.kl),
            "kl_max": _number(self.kl_max),
            "top1_agreement": self.top1_agreement,
            "layers": layers,
            "outside": [_stage_dict(s) for s in self.stages if s.layer is None],
            "overflow": [_event_dict(e) for e in self.overflows()],
            "underflow": [_event_dict(e) for e in self.underflows()],
        } | ({} if self.selections is None else {"selections": [_selection_dict(s) for s in self.selections]})


def _ordered(x: float) -> float:
    return np.inf if not np.isfinite(x) else x


def _number(x: float) -> float | None:
    """JSON holds no inf or NaN: None stands for them (a stage whose values overflowed)."""
    return float(x) if np.isfinite(x) else None


def _stage_dict(s: StageDrift) -> dict:
    d = {"stage": s.stage, "max_rel": _number(s.max_rel), "rms_rel": _number(s.rms_rel), "max_abs": s.max_abs}
    if s.overflow:
        d["overflow"] = True
    if s.underflow:
        d["underflow"] = True
    if s.nonfinite:
        d["nonfinite"] = s.nonfinite
    return d


def _selection_dict(s: SelectionDrift) -> dict:
    d = {"layer": s.layer, "stage": s.stage, "position": s.position, "chosen": s.chosen, "float64": s.truth}
    return d | ({} if s.margin is None else {"margin": s.margin})


def split_name(name: str) -> tuple[int | None, str]:
    """ "blocks.2.attn.q" -> (2, "attn.q"); "logits" -> (None, "logits")."""
    parts = name.split(".")
    if parts[0] == "blocks" and len(parts) > 2 and parts[1].isdigit():
        return int(parts[1]), ".".join(parts[2:])
    return None, name


def _event_dict(e: RangeEvent) -> dict:
    layer, stage, where = placed(e)
    d = {"layer": layer, "stage": stage, "max_abs": e.max_abs, "where": where, "format": e.format}
    if e.overflowed:
        d["values"] = e.overflowed
    else:
        d |= {"flushed": e.flushed, "of": e.size, "flushed_share": e.flushed_share}
    return d


def layer_of_weight(name: str) -> int | None:
    """ "model.layers.1.mlp.up_proj.weight" -> 1; None for a tensor outside the blocks."""
    parts = name.split(".")
    return next((int(b) for a, b in zip(parts, parts[1:]) if a in ("layers", "h") and b.isdigit()), None)


def placed(e: RangeEvent) -> tuple[int | None, str, str]:
    """Where a value left the range: (layer, stage, which of its values): a stage's output or a product's operand,
    or a tensor of the checkpoint, by its name, as it was rounded at load."""
    layer, stage = (layer_of_weight(e.name), e.name) if e.role == "weight" else split_name(e.name)
    return layer, stage, {"out": "output", "A": "operand A", "B": "operand B", "weight": "weight, at load"}[e.role]


def reference_of(model: Model) -> Model:
    """The same weights in float64, read again from the model's directory."""
    from ..models.registry import from_directory

    if model.shape_only or not Path(model.source).is_dir():
        raise UserError(
            f"drift reads the weights again in float64 from the model's directory; {model.name}'s come "
            f"from {model.source}"
        )
    return from_directory(Path(model.source), model.name, LoadOptions(dtype="float64"))


def drift(model: Model, prompt, truth: Model | None = None) -> Drift:
    """The drift ledger of `model`'s precision over the prompt (text or ids), against `truth` (default: the same
    weights in float64)."""
    if not isinstance(model, Model) or not isinstance(truth, (Model, type(None))):
        raise UserError(f"drift measures a Model (load_model(...)) against a Model, not {model!r:.40}, {truth!r:.40}")
    if truth is not None and truth.config != model.config:
        raise UserError("the truth must be the same model (its config) in float64: load_model(..., dtype='float64')")
    ids = model.prompt_rows([prompt], 0, "measure")[0]
    truth = reference_of(model) if truth is None else truth
    if truth.dtype != np.float64:
        raise UserError(f"the truth a drift is measured against computes in float64, not {truth.dtype}")
    truth_logits, truth_values = truth.run_with_cache(ids)
    precision = model.precision
    logged = None if precision is None or precision.values is None else precision.logged()
    rows: list[StageDrift] = []
    differ: list[SelectionDrift] = []
    chosen: dict = {}

    def compare(name: str, tensor, record):
        if name in truth_values and isinstance(tensor, np.ndarray) and tensor.dtype.kind == "f":
            rows.append(_stage_drift(name, tensor, truth_values[name]))
        elif name in truth_values and record.kind == "select" and np.asarray(tensor).dtype.kind in "iu":
            differ.extend(_choices_differ(record.layer, record.op, tensor, truth_values[name]))
            chosen[record.layer, record.op] = chosen.get((record.layer, record.op), 0) + len(tensor)
        return tensor

    model.precision = logged or precision
    phase = Phase("prefill", 0, len(ids), len(ids), cached=False)  # for our pass's ties at the choices
    try:  # an overflow's inf becomes NaN downstream (inf - inf in a norm): what is measured, not a warning
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            logits = model.run(ids, all_positions=True, watcher=compare, phase=phase)
    finally:
        model.precision = precision
    margins = {(t.layer, t.stage, t.position): t.margin for t in phase.ties}
    for choice in differ:
        choice.margin = margins.get((choice.layer, choice.stage, choice.position))
    events = list(model.weight_events) + ([] if logged is None else _merged(logged.log or []))
    for row in rows:
        row.overflow = any(e.name == row.name and e.overflowed for e in events)
        row.underflow = any(e.name == row.name and not e.overflowed for e in events)
    kl, kl_max, top1 = next_token_drift(np.asarray(logits, np.float64), truth_logits)
    name = "float32" if precision is None else precision.name
    if model.dtype == np.float64:
        name = "float64"
    return Drift(name, model.name, ids, rows, kl, kl_max, top1, events, differ if chosen else None, chosen)


def _choices_differ(layer: int | None, stage: str, ours: np.ndarray, truth: np.ndarray) -> list[SelectionDrift]:
    """The positions whose chosen indices (ours and the truth's [T, k]: each position's row) differ as sets."""
    out = []
    for position, (mine, theirs) in enumerate(zip(np.asarray(ours), np.asarray(truth))):
        if set(mine.tolist()) != set(theirs.tolist()):
            out.append(SelectionDrift(layer, stage, position, sorted(mine.tolist()), sorted(theirs.tolist())))
    return out


def _stage_drift(name: str, ours: np.ndarray, truth: np.ndarray) -> StageDrift:
    layer, stage = split_name(name)
    t = np.asarray(truth, np.float64)
    o = np.asarray(ours, np.float64)
    same = (o == t) | (np.isnan(o) & np.isnan(t))  # equal infinities (a mask's -inf) differ by nothing
    finite = np.isfinite(t)
    nonfinite = int(np.count_nonzero(~np.isfinite(o) & finite))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(o - t))
    if not finite.any():
        return StageDrift(name, layer, stage, 0.0 if same.all() else np.inf, 0.0 if same.all() else np.inf, 0.0)
    scale = float(np.abs(t[finite]).max())
    rms_truth = float(np.sqrt(np.mean(np.square(t[finite]))))
    worst = float(diff.max())
    max_rel = worst / scale if scale else (0.0 if worst == 0 else np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        rms_diff = float(np.sqrt(np.mean(np.square(diff))))
    rms_rel = rms_diff / rms_truth if rms_truth else (0.0 if rms_diff == 0 else np.inf)
    return StageDrift(name, layer, stage, max_rel, rms_rel, scale, nonfinite=nonfinite)


def _merged(events: list[RangeEvent]) -> list[RangeEvent]:
    """One event per stage, role and kind: row chunks and a mixture's experts round a stage's values in pieces."""
    merged: dict[tuple, RangeEvent] = {}
    for e in events:
        key = (e.name, e.role, e.overflowed > 0)
        if key not in merged:
            merged[key] = replace(e)
        else:
            m = merged[key]
            m.max_abs, m.overflowed, m.flushed = (
                max(m.max_abs, e.max_abs),
                m.overflowed + e.overflowed,
                m.flushed + e.flushed,
            )
            m.flushed_share, m.size = max(m.flushed_share, e.flushed_share), m.size + e.size
    return list(merged.values())


def top_agreement(ours: np.ndarray, theirs: np.ndarray) -> float:
    """The share of positions (rows of logits [..., V]) whose likeliest tokens are the same: a row with a NaN has none
    (argmax would take the first NaN's index, so two rows of NaN "agreed")."""
    both = ~(np.isnan(ours).any(axis=-1) | np.isnan(theirs).any(axis=-1))
    return float(np.mean(both & (np.argmax(ours, axis=-1) == np.argmax(theirs, axis=-1))))


def next_token_drift(ours: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    """(mean KL(truth || ours) over the positions, its largest, the share of positions whose likeliest tokens agree),
    from logits [..., T, V]: the next-token distribution at every position."""
    ours = ours.reshape(-1, ours.shape[-1])
    truth = truth.reshape(-1, truth.shape[-1])
    log_p = truth - _logsumexp(truth)
    top1 = top_agreement(ours, truth)
    if not np.isfinite(ours).all():
        return np.inf, np.inf, top1
    log_q = ours - _logsumexp(ours)
    kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
    kl = np.maximum(kl, 0.0)  # float64 rounding can leave -1e-17 where the two agree
    return float(kl.mean()), float(kl.max()), top1


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=-1, keepdims=True)
    return top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))
