"""GLM-5's own quirk against transformers (what every family owes runs in test_conformance.py, on the same models):
shared top-k. A layer whose indexer_types is "shared" attends over the keys the last full layer before it chose in the
same pass, as transformers' does; it has no indexer (no tensors, no products, no indexer keys in the cache), records
index.shared instead, and count says whose choice each such layer reads."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.verbs import formulas as closed  # noqa: E402
from minitransformer.verbs.memory import kv_cache_bytes  # noqa: E402

FAMILY = "glm_moe_dsa"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
NAME = "two-shared-yarn-tied"  # full, shared, shared, full


def test_a_shared_layer_attends_over_the_keys_the_last_full_layer_chose_as_transformers_does(made):
    _, ours, hf = made(NAME)
    c = ours.config
    assert c.topk_sources == [None, 0, 0, None]
    ids = SPEC.prompt_ids(NAME, 60, seed=6)
    _, cache = ours.run_with_cache(ids)
    seen: dict = {}
    handles = [layer.self_attn.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out[2]))
               for i, layer in enumerate(hf.model.layers)]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    assert [layer.self_attn.indexer is None for layer in hf.model.layers] == [False, True, True, False]
    for i, source in enumerate(c.topk_sources):
        mine = cache[f"blocks.{i}.attn.index_chosen" if source is None else f"blocks.{i}.attn.index_shared"]
        if source is not None:  # the same array the full layer chose, handed on
            np.testing.assert_array_equal(mine, cache[f"blocks.{source}.attn.index_chosen"])
        theirs = seen[i][0].numpy()
        for query in range(c.index_topk, len(ids)):  # queries that see more keys than they choose
            assert set(mine[query].tolist()) == set(theirs[query].tolist()), (i, query)


def test_a_shared_layer_has_no_indexer_tensors_products_or_keys_in_the_cache(made):
    _, ours, _ = made(NAME)
    c = ours.config
    phase = Phase("prefill", 0, 30, 30)
    ours.run(SPEC.prompt_ids(NAME, 30, seed=7), phase=phase)
    for i, source in enumerate(c.topk_sources):
        ops = [r.op for r in phase.layer_records(i)]
        indexer = [op for op in ops if op.startswith("index.")]
        assert indexer == ["index.shared"] if source is not None else {"index.q", "index.scores"} <= set(indexer), i
        assert "index.shared" not in ops if source is None else "gather" in ops, i
        names = ours.architecture.layout.tensors(c)
        assert any(n.startswith(f"layers.{i}.self_attn.indexer.") for n in names) == (source is None), i
    cache = ours.new_cache(capacity=40)
    assert [bool(cache.layer(i).rows) for i in range(c.n_layer)] == [s is None for s in c.topk_sources]
    assert cache.nbytes == kv_cache_bytes(c, 40) == 40 * closed.kv_cache_bytes_per_token(c)
    assert closed.kv_cache_bytes_per_token(c) == 4 * (c.n_layer * c.n_head * (c.d_head + c.v_head_dim) + 2 * 12)


def test_count_says_whose_choice_each_shared_layer_reads(made):
    _, ours, _ = made("every-other-shared")
    c = ours.config
    assert c.layer_types == ("dense", "moe", "moe_shared_topk", "moe") and c.topk_sources == [None, None, 1, None]
    notes = ours.architecture.formulas.count_notes(c, 100, 2)
    said = (
        "  shared top-k: 3 of 4 layers run their own indexer (its products, its keys cached); the other 1 compute none"
    )
    assert said in notes and "    (indexer_types): layer 2 reads layer 1's" in notes, notes
    assert closed.selection_per_pair(c, 2) == (0, 0) < closed.selection_per_pair(c, 1)
