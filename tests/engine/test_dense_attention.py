"""Dense and chunked attention, both first-class: --dense-attention computes (or counts) every T x t score as
transformers' eager attention does, so that the textbook figures are the block's total; the default computes in
row chunks and shows the dense form beside what it computed, and no note claims a dense computation that did not
happen."""

from __future__ import annotations

import json

import numpy as np

from conftest import run_cli
from minitransformer import load_model
from minitransformer.engine import row_chunks
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.models.options import RunOptions
from minitransformer.verbs.count import count_generation

# The seeds' walkthrough: 48 layers of 4,096 (32 heads, F = 4D), a 1,000-token prompt. Per layer, in closed form:
# T (12 D^2) + 2 T^2 D MACs and T (6 D + F) + H T^2 dot products.
L, D, H, T = 48, 4096, 32, 1000
SEED_MACS = T * 12 * D * D + 2 * T * T * D
SEED_DOTS = T * (6 * D + 4 * D) + H * T * T


def test_the_seeds_block_figures_are_the_dense_block_total():
    assert (SEED_MACS, SEED_DOTS) == (209_518_592_000, 72_960_000)
    config = GPT2Config(n_layer=L, n_head=H, n_embd=D)
    dense = count_generation(config, T, 1, dense_attention=True).prefill
    assert (dense.block_macs, dense.block_dot_products) == (SEED_MACS, SEED_DOTS)
    assert dense.macs == L * SEED_MACS + D * 50257 and dense.dense_macs == dense.macs
    chunked = count_generation(config, T, 1).prefill
    assert chunked.block_macs < SEED_MACS  # row chunks computed less ...
    assert sum(r.dense_macs for r in chunked.block) == SEED_MACS  # ... and say what the dense form costs
    assert chunked.dense_macs == dense.macs


def test_count_prints_and_writes_the_seeds_figures_with_dense_attention():
    args = ["count", "--layers", "48", "--d-model", "4096", "--heads", "32", "--tokens", "1000"]
    dense = run_cli(*args, "--dense-attention", "--json", "-")
    document = json.loads(dense.stdout)
    layer = document["phases"][0]["layers"][0]
    assert (layer["macs"], layer["dot_products"]) == (SEED_MACS, SEED_DOTS)
    assert "209,518,592,000" in dense.stderr and "72,960,000" in dense.stderr
    assert "Dense, as computed here" in dense.stderr and "Dense form:" not in dense.stderr
    chunked = run_cli(*args)
    assert "Dense, as computed here" not in chunked.stdout  # the default computed in chunks: the note says so
    assert f"Computed in chunks of\n  {row_chunks.ROW_CHUNK} query rows" in chunked.stdout
    assert "209,518,592,000 MACs" in chunked.stdout  # the block line's dense form, beside what was computed
    total = json.loads(run_cli(*args, "--json", "-").stdout)["totals"]
    assert total["dense_macs"] == document["totals"]["macs"] > total["macs"]
    assert f"Dense form: {total['dense_dot_products']:,} dot products, {total['dense_macs']:,} MACs" in chunked.stdout


def test_dense_and_chunked_runs_give_the_same_logits_and_each_its_own_ledger(small_gpt2_dir):
    model = load_model(small_gpt2_dir)  # a context of 64: chunks of 16 rows make a 60-token prompt chunked
    ids = list(np.random.default_rng(3).integers(0, 50257, 60))
    from minitransformer.engine.ledger import Phase

    runs = {}
    for dense in (False, True):
        phase = Phase("prefill", 0, 60, 60)
        old, row_chunks.ROW_CHUNK = row_chunks.ROW_CHUNK, 16
        try:
            logits = model.run(ids, all_positions=True, phase=phase, options=RunOptions(dense_attention=dense))
            runs[dense] = (logits, phase)
        finally:
            row_chunks.ROW_CHUNK = old
    (chunked, chunked_phase), (dense, dense_phase) = runs[False], runs[True]
    assert np.abs(chunked - dense).max() <= 1e-5 * max(1.0, np.abs(dense).max())
    assert dense_phase.macs == dense_phase.dense_macs == chunked_phase.dense_macs > chunked_phase.macs
    assert all(r.row_chunk is None for r in dense_phase.records)
    assert {r.row_chunk for r in chunked_phase.records if r.op in ("scores", "mix")} == {16}


def test_generate_takes_dense_attention(small_gpt2_dir, monkeypatch):
    monkeypatch.setattr(row_chunks, "ROW_CHUNK", 4)
    model = load_model(small_gpt2_dir)
    prompt = list(range(100, 112))
    chunked = model.generate(prompt, max_new_tokens=3, stop_at_eos=False)
    dense = model.generate(prompt, max_new_tokens=3, stop_at_eos=False, dense_attention=True)
    assert dense.new_tokens == chunked.new_tokens
    assert dense.ledger.totals.macs == chunked.ledger.totals.dense_macs > chunked.ledger.totals.macs
    out = run_cli("generate", "--ids", ",".join(map(str, prompt)), "--model", str(small_gpt2_dir),
                  "--dense-attention", "--max-new-tokens", "2", "--json", "-")  # fmt: skip
    assert out.returncode == 0 and json.loads(out.stdout)["totals"]["macs"] > 0
