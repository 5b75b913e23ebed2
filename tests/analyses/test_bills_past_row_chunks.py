"""The analyses' bills from shapes alone past 128 positions, where a plain pass computes attention in row chunks and
a watched one (captures, hooks) every T x t score: each --count-only bill is the real run's, item by item."""

from __future__ import annotations

from shared_checks import random_model

from minitransformer.engine.row_chunks import ROW_CHUNK
from minitransformer.verbs.attribute import attribute, count_attribute
from minitransformer.verbs.count import count_generation
from minitransformer.verbs.lens import count_lens, logit_lens
from minitransformer.verbs.patch import count_patch, patch

T = ROW_CHUNK + 12


def model_and_prompts():
    model = random_model(n_layer=2, n_head=2, d_head=8, n_inner=32, vocab=100, n_positions=T, seed=3)
    return model, [(7 * i) % 100 for i in range(T)], [(11 * i + 5) % 100 for i in range(T)]


def test_each_analysis_bill_from_shapes_is_its_real_runs_past_the_row_chunks():
    """A captured pass computes every score (lens, attribute, patch's clean and corrupted runs and its hooked runs of
    the heads); patch's runs of the stream from a block, unwatched, compute row chunks. The counts said the chunks'
    for all of them: 98,304 MACs short of a lens of this GPT-2 at 140 positions."""
    model, clean, corrupt = model_and_prompts()
    c = model.config
    lens = logit_lens(model, clean, 5)
    assert count_lens(c, T).to_dict() == lens.bill.to_dict()
    every_score = count_generation(c, T, 1, dense_attention=True).totals.macs
    assert lens.bill.items[0].macs == every_score > count_generation(c, T, 1).totals.macs, lens.bill.items[0]
    assert count_attribute(c, T).to_dict() == attribute(model, clean, 5, 6).bill.to_dict()
    patched = patch(model, clean, corrupt, 5, 6, heads=True)
    assert count_patch(c, T, heads=True).to_dict() == patched.bill.to_dict()
    clean_run, _, stream, heads = patched.bill.items
    assert clean_run.macs == every_score and heads.macs > stream.macs * c.n_head, (clean_run, stream, heads)
