"""Choosing the k largest of each row (a router's experts, an indexer's keys): the one rule every top-k of the
package follows, and what each choice decided.

The rule: each row's k largest scores; among equal scores the lowest index first (the earlier expert, the earlier
key); NaN ranks as -inf. The chosen come highest first (`order="score"`, as torch.topk's sorted output) or in index
order (`order="index"`: an indexer's keys, in the order the dense form sums them). torch.topk states no order among
equal scores (on a CPU, topk([0, 0, 0, 1, 0], 3) gives [3, 2, 4]): where scores tie at the k-th place, transformers
may choose another member of the tie than this rule does, and its logits then differ from ours for that reason alone.

What a choice decided, row by row (`boundary`): a row decides where more than k of its scores can be chosen (above
-inf: a query that sees k keys or fewer, the rest masked, decides nothing). Its margin is its k-th largest score less
its (k+1)-th: 0 is an exact tie at the boundary, which the rule alone settles; a margin below NEAR_TIE epsilons of
the format the scores are held in, times the row's largest |score|, is a near tie: the rounding of that format (2 to
4 units in the last place of that score), or the same sums added in another order, could have chosen otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .shapes import ShapeOnly

NEAR_TIE = 4  # a near tie: a margin below 4 epsilons of the scores' format x the row's largest |score|
ORDERS = ("score", "index")


def top_k(scores, k: int, order: str = "score"):
    """The indices [..., k] of each row's k largest scores (scores [..., n], 1 <= k <= n), equal scores the lowest
    index first; highest first (`order="score"`) or in increasing index (`order="index"`)."""
    if isinstance(scores, ShapeOnly):
        return ShapeOnly((*scores.shape[:-1], k), np.int64)
    n = scores.shape[-1]
    if not 1 <= k <= n or order not in ORDERS:
        raise ValueError(f"top_k: k must be 1..{n} and order one of {ORDERS}, not k={k}, order={order!r}")
    ranked = _ranked(scores)
    rows = ranked.reshape(-1, n)
    if k == n:
        kept = np.ones(rows.shape, dtype=bool)
    else:
        kth = -np.partition(-rows, k - 1, axis=-1)[:, k - 1, None]  # each row's k-th largest (NumPy's selection is
        # slow from the low end of rows whose many masked scores are equal, quick from the high end: negated)
        above, at = rows > kth, rows == kth
        kept = above | at
        wanted = k - np.count_nonzero(above, axis=-1)  # how many of those equal to the k-th are chosen
        tied = np.nonzero(np.count_nonzero(at, axis=-1) > wanted)[0]  # rows where more are equal: the first ones
        first = np.cumsum(at[tied], axis=-1, dtype=np.int32) <= wanted[tied, None]
        kept[tied] = above[tied] | (at[tied] & first)
    chosen = (np.flatnonzero(kept) % n).reshape(*ranked.shape[:-1], k)  # each row's k, in increasing index
    if order == "index":
        return chosen
    by_score = np.argsort(-np.take_along_axis(ranked, chosen, axis=-1), axis=-1, kind="stable")  # ties keep index order
    return np.take_along_axis(chosen, by_score, axis=-1)


def _ranked(scores: np.ndarray) -> np.ndarray:
    """The scores as the rule ranks them: NaN as -inf."""
    nan = np.isnan(scores)
    return np.where(nan, scores.dtype.type(-np.inf), scores) if nan.any() else scores


@dataclass(frozen=True)
class Boundary:
    """Each row's boundary between chosen and not ([...]: the scores' rows): whether it decided anything, the margin
    (k-th largest less (k+1)-th) and the row's largest |score| (finite ones), which a near tie is relative to."""

    decides: np.ndarray
    margin: np.ndarray
    scale: np.ndarray

    def ties(self, epsilon: float) -> np.ndarray:
        """The rows that decided with a margin of 0 or below NEAR_TIE epsilons of their scale (a bool per row)."""
        return self.decides & ((self.margin == 0) | (self.margin < NEAR_TIE * epsilon * self.scale))


def boundary(scores: np.ndarray, k: int) -> Boundary:
    """Where each row of scores [..., n] put its boundary when it chose k (k < n; k = n chooses all and decides
    nothing)."""
    n = scores.shape[-1]
    ranked = _ranked(scores)
    if k >= n:
        nothing = np.zeros(ranked.shape[:-1])
        return Boundary(np.zeros(ranked.shape[:-1], dtype=bool), nothing, nothing)
    pair = np.partition(-ranked, (k - 1, k), axis=-1)  # negated, as top_k's
    kth, next_ = -pair[..., k - 1].astype(np.float64), -pair[..., k].astype(np.float64)  # their gap exact
    decides = next_ > -np.inf  # a (k+1)-th that could have been chosen
    magnitude = np.abs(ranked)
    scale = np.max(magnitude, axis=-1, where=np.isfinite(magnitude), initial=0.0).astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where the k-th and (k+1)-th are +inf: no margin to speak of
        margin = np.where(decides, kth - next_, np.inf)
    return Boundary(decides, np.where(np.isnan(margin), np.inf, margin), scale)


@dataclass(frozen=True, slots=True)
class Tie:
    """One choice that tied (margin 0) or near-tied at its k-th place: the layer and selection stage ("router.topk",
    "index.topk", ...), the batch row and the position of its row (as the tape saw it, the slot in the row: in a
    left-padded batch Phase.ties counts it from the row's first token instead), the margin and the row's largest
    |score|."""

    layer: int | None
    stage: str
    row: int
    position: int
    margin: float
    scale: float

    @property
    def exact(self) -> bool:
        return self.margin == 0


@dataclass(frozen=True)
class Selection:
    """One selection stage of one pass (a layer's router, its indexer): k of n chosen for each row of its [*batch, T]
    positions, `decides` [*batch, T] which of them decided anything, and its ties (Tie), near as `held` (the format
    its scores were held in: "float32", "bfloat16", ...) resolves them, whose epsilon is `epsilon`."""

    layer: int | None
    stage: str
    k: int
    n: int
    decides: np.ndarray
    ties: tuple[Tie, ...]
    held: str
    epsilon: float


def selected(
    stage: str, layer: int | None, scores: np.ndarray, k: int, past: int, held: str, epsilon: float
) -> Selection:
    """What the choice of k of each row of scores [*batch, T, n] decided, its rows at positions past .. past + T - 1,
    the scores held in `held`, of epsilon `epsilon`."""
    edge = boundary(scores, k)
    lead = scores.shape[:-1]
    T = lead[-1] if lead else 1
    decides = edge.decides.reshape(-1, T)
    ties = [
        Tie(
            layer,
            stage,
            int(b),
            past + int(i),
            float(edge.margin.reshape(-1, T)[b, i]),
            float(edge.scale.reshape(-1, T)[b, i]),
        )
        for b, i in zip(*np.nonzero(edge.ties(epsilon).reshape(-1, T)))
    ]
    return Selection(layer, stage, k, scores.shape[-1], decides, tuple(ties), held, epsilon)
