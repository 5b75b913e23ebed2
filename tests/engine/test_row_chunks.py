"""Attention in chunks of query rows (engine/row_chunks.py): the same logits, fewer dot products, a true ledger.

Each chunk of C query rows is computed against only the keys it can see (none of its future; with a
sliding window, none before its first row's window). The ledger counts what was computed and keeps
the dense form's cost beside it: both are checked here against closed forms written from the
positions alone, for several chunk sizes, prompts after a cached past, and windows; the logits
against the dense pass and against transformers; the shape-only count against the real run.
"""

from __future__ import annotations

import numpy as np
import pytest
from shared_checks import assert_same_phases, random_llama, random_model

from minitransformer.engine import row_chunks
from minitransformer.engine.ledger import Phase
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.table import PRESETS
from minitransformer.models.model import Model
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes


def chunked_pairs(T: int, past: int, window: int | None, C: int) -> int:
    """(query, key) pairs one head computes: chunk [r0, r1) sees keys from its first row's window start to
    its last row (positions past + r1 - 1 and before)."""
    pairs = 0
    for r0 in range(0, T, C):
        r1 = min(T, r0 + C)
        first_key = 0 if window is None else max(0, past + r0 - window + 1)
        pairs += (r1 - r0) * (past + r1 - first_key)
    return pairs


def prefill_after(model: Model, ids: list[int], past: int, phase: Phase | None = None):
    """All-position logits of the pass over ids[past:], after the first `past` ids went through the cache."""
    cache = model.new_cache(capacity=len(ids))
    if past:
        model.run(ids[:past], cache=cache)
    return model.run(ids[past:], cache=cache, all_positions=True, phase=phase)


def gpt2_model():
    return random_model(n_layer=2, n_head=3, d_head=4, n_inner=20, vocab=50, n_positions=40, seed=3)


def mistral_model(window):
    config = LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=24, head_dim=6, n_inner=40, vocab_size=50,
                         n_positions=40, sliding_window=window, name="random")  # fmt: skip
    return random_llama(config, seed=5)


@pytest.mark.parametrize("C", [1, 3, 4, 7])
@pytest.mark.parametrize("past", [0, 5])
@pytest.mark.parametrize("family,window", [("gpt2", None), ("llama", None), ("llama", 6), ("llama", 13)])
def test_the_chunked_counts_equal_their_closed_forms_and_the_logits_the_dense_pass(monkeypatch, family, window,
                                                                                    past, C):  # fmt: skip
    model = gpt2_model() if family == "gpt2" else mistral_model(window)
    ids = list(np.random.default_rng(C).integers(0, 50, 30))
    dense = prefill_after(model, ids, past)
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", C)
    phase = Phase("prefill", 0, 30 - past, 30)
    chunked = prefill_after(model, ids, past, phase)
    np.testing.assert_allclose(chunked, dense, rtol=0, atol=2e-5)

    H, dh, T = model.config.n_head, model.config.d_head, 30 - past
    t = 30 - (0 if window is None else max(0, past - window + 1))  # keys of the whole pass (the cache's view)
    pairs = chunked_pairs(T, past, window, C)
    for layer in range(model.config.n_layer):
        scores, mix = phase.find("scores", layer), phase.find("mix", layer)
        assert (scores.dot_products, scores.macs) == (H * pairs, H * pairs * dh)
        assert (mix.dot_products, mix.macs) == (H * T * dh, H * pairs * dh)  # one per output, shorter ones
        assert (scores.dense_dot_products, scores.dense_macs) == (H * T * t, H * T * t * dh)
        assert (mix.dense_dot_products, mix.dense_macs) == (H * T * dh, H * T * t * dh)
        assert scores.out_shape[-2:] == (T, t) and scores.heads == H and scores.dot_length == dh and mix.dot_length == t
        # What the mask keeps <= what the chunks computed <= the dense form.
        assert scores.causal_macs <= scores.macs <= scores.dense_macs
        assert mix.causal_macs <= mix.macs <= mix.dense_macs
        d = scores.to_dict()
        assert (d["dot_products"], d["macs"], d["dense_dot_products"], d["dense_macs"]) == (
            H * pairs,
            H * pairs * dh,
            H * T * t,
            H * T * t * dh,
        )
    assert phase.macs == sum(r.macs for r in phase.records)  # the totals are what was computed
    assert [r.op for r in phase.layer_records(0)] == [r.op for r in _dense_phase(model, ids, past).layer_records(0)]


def _dense_phase(model, ids, past):
    phase = Phase("prefill", 0, len(ids) - past, len(ids))
    prefill_after(model, ids, past, phase)
    return phase


def test_a_pass_no_longer_than_a_chunk_and_every_decode_step_run_dense(monkeypatch):
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 4)
    result = gpt2_model().generate(list(range(4)), max_new_tokens=3, stop_at_eos=False, candidates=0)
    for phase in result.ledger.phases:
        for r in phase.records:
            assert r.computed is None and r.macs == r.dense_macs
            if r.op == "scores":
                assert r.to_dict()["dense_macs"] == r.to_dict()["macs"]


def test_a_watched_pass_runs_dense_and_captures_the_full_tensors(monkeypatch):
    """Captures and hooks see the documented [H, T, t] tensors: a watched pass does not chunk (the ledger says so)."""
    model = gpt2_model()
    ids = list(range(20))
    plain = model.run(ids, all_positions=True)
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 3)
    phase = Phase("prefill", 0, 20, 20)
    logits, cache = model.run_with_cache(ids, "blocks.*.attn.weights", phase=phase)
    assert cache["blocks.1.attn.weights"].shape == (3, 20, 20)
    assert phase.find("scores", 0).macs == phase.find("scores", 0).dense_macs == 3 * 20 * 20 * 4
    np.testing.assert_allclose(logits, plain, rtol=0, atol=2e-5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_the_shape_only_count_models_the_chunks_as_the_real_run_does(monkeypatch, use_cache):
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 3)
    real = gpt2_model()
    for batch in (1, 2):
        assert_same_phases(
            count_passes(real, 11, 3, use_cache, batch).phases,
            count_passes(Model.without_weights(real.config), 11, 3, use_cache, batch).phases,
        )
    prefill = count_passes(real, 11, 1, use_cache, 2).phases[0].find("scores", 0)
    assert prefill.macs == 2 * real.config.n_head * chunked_pairs(11, 0, None, 3) * real.config.d_head
    llama = mistral_model(window=4)
    result = llama.generate(list(range(10)), max_new_tokens=4, use_cache=use_cache, stop_at_eos=False, candidates=0)
    counted = count_generation(llama.config, 10, 4, use_cache=use_cache)
    assert_same_phases(result.ledger.phases, counted.ledger().phases)
    assert result.ledger.cache_comparison() == counted.cache_comparison()


def test_a_long_prompt_with_the_real_chunk_size_equals_transformers(tmp_path):
    """Past ROW_CHUNK positions (300 > 128), chunked prefills of GPT-2 and of a windowed Mistral match transformers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from conftest import write_gpt2, write_llama
    from minitransformer import load_model

    T = 300
    assert T > row_chunks.ROW_CHUNK
    ids = list(np.random.default_rng(0).integers(0, 300, T))
    for directory in (write_gpt2(tmp_path / "g", n_positions=320, vocab_size=300),
                      write_llama(tmp_path / "m", n_positions=320, vocab_size=300, model_type="mistral",
                                  sliding_window=50)):  # fmt: skip
        ours = load_model(directory)
        phase = Phase("prefill", 0, T, T)
        logits = ours.run(ids, all_positions=True, phase=phase)
        assert phase.find("scores", 0).macs < phase.find("scores", 0).dense_macs  # it did chunk
        theirs = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
        with torch.no_grad():
            expected = theirs(torch.tensor([ids])).logits[0].numpy()
        np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-4)


def test_gpt3_prefill_of_1000_tokens_counts_the_chunks_and_keeps_the_textbook_dense_form():
    """GPT-3 175B over 1,000 tokens: 12 T D^2 + 2 T^2 D a layer dense (the textbook), of which the chunks compute
    2 D x the closed-form pairs in attention."""
    D, L, T = 12288, 96, 1000
    prefill = count_generation(PRESETS["gpt3-175b"], T, 1).prefill
    dense = sum(r.dense_macs for r in prefill.block)
    assert dense == T * 12 * D * D + 2 * T * T * D
    assert prefill.block_macs == T * 12 * D * D + 2 * D * chunked_pairs(T, 0, None, row_chunks.ROW_CHUNK)
    assert prefill.macs == L * prefill.block_macs + D * 50257


@pytest.mark.parametrize("C", [1, 2, 5, 128])
def test_the_closed_form_of_the_computed_pairs_is_the_sum_over_chunks(C):
    """formulas.computed_pairs (p T + C^2 m (m + 1) / 2 + (T - m C) T without a window; with one, the keys behind each
    chunk's window taken off in closed form too) against the chunk-by-chunk sum."""
    for T in (1, 2, C, C + 1, 3 * C, 3 * C + 2, 300, 1000):
        for past in (0, 1, 7, 450):
            dense = T * (past + T)
            assert formulas.computed_pairs(T, past + T, None, C) == (
                chunked_pairs(T, past, None, C) if T > C else dense
            )
            for W in (1, 3, 50, 129, 700, 2000):
                keys = min(past + T, W + T - 1)
                expected = chunked_pairs(T, past, W, C) if T > C else T * keys
                assert formulas.computed_pairs(T, past + T, W, C) == expected
    assert formulas.computed_pairs(1024, 1024, None, 128) == 589_824  # of the dense 1,048,576


def test_the_csv_gives_the_dense_form_beside_what_was_computed(monkeypatch):
    import csv

    from minitransformer.views.export import csv_chunks

    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 4)
    config = gpt2_model().config
    rows = list(csv.DictReader("".join(csv_chunks(count_generation(config, 10, 2))).splitlines()))
    scores = [r for r in rows if r["op"] == "scores"]
    H, dh = config.n_head, config.d_head
    pairs = chunked_pairs(10, 0, None, 4)  # the prefill: 4 x 4 + 4 x 8 + 2 x 10 = 68 of 100
    assert pairs == 68
    assert [(int(r["macs"]), int(r["dense_macs"])) for r in scores] == [(H * 68 * dh, H * 100 * dh),
                                                                     (H * 11 * dh, H * 11 * dh)]  # fmt: skip
    assert all(r["dense_macs"] == "" for r in rows if r["op"] not in ("scores", "mix"))


def test_the_terminal_and_html_reports_say_what_the_dense_form_would_have_cost(monkeypatch):
    from minitransformer.views.html_report import ledger_fragment
    from minitransformer.views.report import block_table
    from minitransformer.views.report import count as n

    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 4)
    result = gpt2_model().generate(list(range(10)), max_new_tokens=2, stop_at_eos=False, candidates=0)
    prefill, decode = result.ledger.phases
    H, dh = 3, 4
    dense, computed = H * 10 * 10 * dh, H * 68 * dh  # chunks of 4, 4 and 2 rows see 4, 8 and 10 keys
    assert prefill.find("scores", 0).macs == computed
    table = block_table(prefill)
    assert f"dense: {n(H * 100)} ({n(dense)} MACs)" in table and f"dense: {n(H * 10 * dh)} ({n(dense)} MACs)" in table
    assert "dense:" not in block_table(decode)  # nothing skipped, nothing said
    assert f"dense: {n(dense)} MACs" in ledger_fragment(result.ledger)


@pytest.mark.parametrize("window", [None, 3, 9])
@pytest.mark.parametrize("pads", [None, [0, 4, 7]])
def test_a_mask_added_in_place_only_where_it_hides_keys_gives_the_whole_sum_bit_for_bit(window, pads):
    """Unwatched, the mask is added in place and only over the keys some query of the chunk cannot see (the rest
    would get zeros added); the scores must be exactly those of adding the whole bias, chunk by chunk."""
    from minitransformer.engine.ops import add_mask, attention_bias, mask_future

    rng = np.random.default_rng(7)
    past, T, C = 6, 14, 4
    t = past + T
    bias = attention_bias(past, 0, T, t, window, np.float32, pads)
    scores = rng.standard_normal((3, 2, T, t)).astype(np.float32)  # [B, H, T, t]
    for r0 in range(0, T, C):
        rows, keys = slice(r0, r0 + C), slice(0, past + min(T, r0 + C))  # a chunk sees up to its last row
        s = scores[..., rows, keys]
        whole = s + bias[..., rows, keys]
        in_place = s.copy()
        assert add_mask(in_place, bias[..., rows, keys], out=in_place) is in_place
        assert np.array_equal(in_place, whole)
        if window is None and pads is None:  # GPT-2's causal mask, cut from its [n_positions]^2 table
            causal = s.copy()
            assert mask_future(causal, past + r0, 64, out=causal) is causal
            assert np.array_equal(causal, whole)
    every_key_seen = np.zeros((1, 5), np.float32)
    s = rng.standard_normal((2, 1, 5)).astype(np.float32)
    seen = s.copy()
    assert add_mask(seen, every_key_seen, out=seen) is seen and np.array_equal(seen, s)
