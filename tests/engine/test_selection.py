"""The one rule every top-k follows (engine/selection.py), on hand-made rows: the k largest, equal scores the lowest
index first, highest first or in index order; what a choice decided (exact ties, near ties, none where k = n or where
a row sees no more than k); the tape writing it in the pass's ledger, and a shape-only pass writing nothing; and no
top-k anywhere in the package that does not go through the one function."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import minitransformer
from minitransformer.engine.ledger import Phase
from minitransformer.engine.precision import precision_of
from minitransformer.engine.selection import NEAR_TIE, Tie, boundary, top_k
from minitransformer.engine.shapes import ShapeOnly
from minitransformer.engine.tape import Dims, Tape

PACKAGE = Path(minitransformer.__file__).parent
EPS32 = float(np.finfo(np.float32).eps)  # 2^-23


def chosen(scores, k: int, order: str = "score") -> list:
    return top_k(np.asarray(scores, np.float32), k, order).tolist()


def test_equal_scores_go_to_the_lowest_index_where_torch_topk_takes_others():
    # torch.topk([0, 0, 0, 1, 0], 3) gives [3, 2, 4] on a CPU (issue 34): its order among ties is its own
    assert chosen([0, 0, 0, 1, 0], 3) == [3, 0, 1]
    assert chosen([0, 0, 0, 1, 0], 3, order="index") == [0, 1, 3]
    assert chosen([0.5, 0.2, 0.2, 0.2, 0.1], 2) == [0, 1]  # the tie at the 2nd place: the first of the three
    assert chosen([0.2, 0.5, 0.2, 0.5], 3) == [1, 3, 0]  # highest first, each tie in index order
    assert chosen([0.2, 0.5, 0.2, 0.5], 3, order="index") == [0, 1, 3]
    assert chosen([-0.0, 0.0, 0.0], 2) == [0, 1]  # -0 equals 0: a tie like any other
    assert chosen([np.nan, 1.0, -np.inf, 2.0], 3) == [3, 1, 0]  # NaN ranks as -inf, and first of the two by index


def test_k_of_1_and_k_of_n():
    assert chosen([3, 1, 4, 1, 5, 9, 2, 6], 1) == [5]
    assert chosen([2, 2, 2], 1) == [0]
    assert chosen([3, 1, 4, 1, 5], 5) == [4, 2, 0, 1, 3]  # every index, highest first, the two 1s in index order
    assert chosen([3, 1, 4, 1, 5], 5, order="index") == [0, 1, 2, 3, 4]
    for k in (0, 6):
        with pytest.raises(ValueError, match="k must be 1..5"):
            top_k(np.zeros(5, np.float32), k)


def test_each_row_chooses_for_itself_and_agrees_with_a_stable_sort():
    rows = np.array([[[1, 3, 3, 0], [5, 5, 5, 5]], [[0, 1, 2, 3], [9, 0, 9, 1]]], np.float32)  # [2, 2, 4]
    assert top_k(rows, 2).tolist() == [[[1, 2], [0, 1]], [[3, 2], [0, 2]]]
    rng = np.random.default_rng(0)
    many = rng.integers(0, 4, size=(6, 50, 12)).astype(np.float32)  # small integers: ties everywhere
    for k in range(1, 13):
        stable = np.argsort(-many, axis=-1, kind="stable")[..., :k]  # the rule, as a full stable sort states it
        assert (top_k(many, k) == stable).all(), k
        assert (top_k(many, k, order="index") == np.sort(stable, axis=-1)).all(), k


def test_the_boundary_says_which_rows_tied_exactly_near_or_not_at_all():
    scale = 2.0
    near = NEAR_TIE * EPS32 * scale  # the near-tie margin of a row whose largest |score| is 2, in float32
    rows = np.array([
        [2.0, 1.0, 1.0, 0.0],  # the 2nd and 3rd equal: an exact tie at k = 2
        [2.0, 1.0, 1.0 - near / 2, 0.0],  # a margin of half the near-tie margin
        [2.0, 1.0, 1.0 - 2 * near, 0.0],  # twice it: decided
        [2.0, 1.0, -np.inf, -np.inf],  # a query that sees 2 keys chooses both: it decides nothing
        [-2.0, 0.5, -2.0, -3.0],  # a tie between negative scores, the largest |score| 3
    ])  # fmt: skip
    edge = boundary(rows, 2)
    assert edge.decides.tolist() == [True, True, True, False, True]
    np.testing.assert_array_equal(edge.margin, [0.0, near / 2, 2 * near, np.inf, 0.0])
    np.testing.assert_array_equal(edge.scale, [2.0, 2.0, 2.0, 2.0, 3.0])
    assert edge.ties(EPS32).tolist() == [True, True, False, False, True]
    assert edge.ties(0.0).tolist() == [True, False, False, False, True]  # with no rounding only the exact ones
    all_of_them = boundary(rows, 4)  # k = n chooses every one: no boundary
    assert not all_of_them.decides.any() and not all_of_them.ties(1.0).any()


def tape(phase: Phase | None, T: int, past: int = 0, precision=None, batch=()) -> Tape:
    dims = Dims(T=T, t=past + T, D=4, H=1, F=4, V=4, R=1, batch=batch)
    return Tape(dims, phase, layer_index=3, precision=precision)


def test_the_tape_writes_each_choice_s_ties_in_the_ledger_at_its_positions():
    phase = Phase("decode", 2, 3, 7)
    scores = np.array([[1, 1, 0], [3, 2, 1], [1, 1, 1]], np.float32)  # positions 4, 5, 6
    assert tape(phase, 3, past=4).top_k("router.topk", scores, 1).tolist() == [[0], [0], [0]]
    (s,) = phase.selections
    assert (s.layer, s.stage, s.k, s.n, s.held, s.epsilon) == (3, "router.topk", 1, 3, "float32", EPS32)
    assert phase.ties == [Tie(3, "router.topk", 0, 4, 0.0, 1.0), Tie(3, "router.topk", 0, 6, 0.0, 1.0)]
    assert phase.decided(s) == 3
    assert phase.selections_dict(3) == [{"stage": "router.topk", "k": 1, "of": 3, "made": 3, "exact_ties": 2,
                                         "near_ties": 0}]  # fmt: skip
    assert phase.ties_dict() == [
        {"layer": 3, "stage": "router.topk", "position": 4, "margin": 0.0, "scale": 1.0},
        {"layer": 3, "stage": "router.topk", "position": 6, "margin": 0.0, "scale": 1.0},
    ]


def test_near_is_measured_in_the_format_the_scores_are_held_in():
    # a margin of 2^-7 at a scale of 1: below 4 epsilons of bfloat16 (2^-5), not of float16 (2^-8) or float32;
    # fp8's values are held in bfloat16 (engine/precision.py)
    scores = np.array([[1.0, 1.0 - 2**-7, 0.0]], np.float32)
    for precision, held, near in (("float32", "float32", False), ("bfloat16", "bfloat16", True),
                                  ("float16", "float16", False), ("fp8_e4m3", "bfloat16", True)):  # fmt: skip
        phase = Phase("prefill", 0, 1, 1)
        tape(phase, 1, precision=precision_of(precision)).top_k("router.topk", scores, 1)
        assert (phase.selections[0].held, [t.margin for t in phase.ties]) == (held, [2**-7] if near else []), precision
    phase = Phase("prefill", 0, 1, 1)  # 2^-9: below float16's 2^-8
    tape(phase, 1, precision=precision_of("float16")).top_k("router.topk", np.array([[1.0, 1 - 2**-9]], np.float32), 1)
    assert [t.margin for t in phase.ties] == [2**-9]


def test_a_batch_s_pad_slots_and_finished_rows_decide_nothing_anyone_reads():
    phase = Phase("prefill", 0, 3, 3, batch=2, pads=(1, 0), finished=(False, False))
    scores = np.zeros((2, 3, 4), np.float32)  # every row ties: row 0's slot 0 is padding
    tape(phase, 3, batch=(2,)).top_k("index.topk", scores, 2)
    assert [(t.row, t.position) for t in phase.ties] == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]  # row 0 from its token
    assert phase.decided(phase.selections[0]) == 5
    assert phase.ties_dict()[0] == {"row": 0, "layer": 3, "stage": "index.topk", "position": 0, "margin": 0.0,
                                    "scale": 0.0}  # fmt: skip
    done = Phase("decode", 1, 1, 4, batch=2, pads=(1, 0), finished=(True, False))
    tape(done, 1, past=3, batch=(2,)).top_k("index.topk", np.zeros((2, 1, 4), np.float32), 2)
    assert [(t.row, t.position) for t in done.ties] == [(1, 3)]  # row 0 had finished


def test_a_shape_only_pass_k_of_k_and_a_pass_without_a_ledger_record_nothing():
    phase = Phase("prefill", 0, 5, 5)
    out = tape(phase, 5).top_k("router.topk", ShapeOnly((5, 8)), 2)
    assert isinstance(out, ShapeOnly) and out.shape == (5, 2) and phase.selections == []
    assert tape(None, 2).top_k("router.topk", np.zeros((2, 3), np.float32), 1).tolist() == [[0], [0]]
    everything = tape(phase, 5).top_k("router.groups", np.zeros((5, 1), np.float32), 1)  # one group of one: no choice
    assert everything.tolist() == [[0]] * 5 and phase.selections == []


def test_every_top_k_in_the_package_goes_through_the_one_function():
    """No argsort or argpartition (the sorts that return indices) anywhere but engine/selection.py: a router's or an
    indexer's choice made another way would follow another rule among ties. (torch.topk in a family's reference.py
    is transformers' side of a comparison.)"""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "selection.py" and path.parent.name == "engine":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("argsort", "argpartition"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.attr}")
    assert not found, found


def test_sampling_s_top_k_keeps_exactly_k_equal_ones_the_lower_id_first():
    """top_k=1 is greedy even where the largest logits tie (a bfloat16 pass ties often): the sampler keeps exactly k
    tokens by the one rule, not every token equal to the k-th."""
    from minitransformer.verbs.generate import next_token

    logits = np.array([1, 3, 3, 3, 0], np.float32)
    rng = np.random.default_rng(0)
    for k, allowed in ((1, {1}), (2, {1, 2}), (3, {1, 2, 3}), (4, {0, 1, 2, 3})):
        drawn = {next_token(logits, 1.0, k, rng) for _ in range(400)}
        assert drawn == allowed, (k, sorted(drawn), sorted(allowed))
    assert next_token(logits, 1.0, 1, rng) == int(np.argmax(logits)) == 1  # greedy's choice
    masked = np.array([0, -np.inf, 0, 0], np.float32)  # a token masked out: sampled as never, the rest still sampled
    assert {next_token(masked, 1.0, None, rng) for _ in range(400)} == {0, 2, 3}
    assert {next_token(masked, 1.0, 2, rng) for _ in range(400)} == {0, 2}


def test_sampling_draws_the_tail_as_often_as_its_probability():
    """One logit of 0 among 50,000 of -17: the others hold 0.207% of the mass (transformers' softmax), 41 of 20,000
    draws. The running sum in float32 never moved past the leading 1 (each weight 4e-8 is below half its step): 0
    draws. The count is binomial: 41 +- 6.4; 4 standard deviations either side."""
    from minitransformer.verbs.generate import next_token

    logits = np.full(50_001, -17.0, np.float32)
    logits[0] = 0.0
    tail = 50_000 * np.exp(-17.0) / (1 + 50_000 * np.exp(-17.0))
    rng = np.random.default_rng(0)
    drawn = sum(next_token(logits, 1.0, None, rng) != 0 for _ in range(20_000))
    expected, spread = 20_000 * tail, np.sqrt(20_000 * tail * (1 - tail))
    assert abs(drawn - expected) < 4 * spread, (drawn, expected, spread)
