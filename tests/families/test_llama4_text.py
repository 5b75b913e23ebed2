"""Llama 4's own rules (the rest is its conformance entry): chunked attention's closed forms against the pieces the
engine computes and the keys each query reads, a decode step's keys in its chunk, and the published files'
attn_temperature_tuning 4 read as true."""

from __future__ import annotations

from dataclasses import replace

from minitransformer.engine.ledger import keys_in_chunks
from minitransformer.engine.row_chunks import ROW_CHUNK, chunked_pairs, row_pieces
from minitransformer.families.table import PRESETS, config_from_hf_dict
from minitransformer.models.model import Model
from minitransformer.verbs.count import count_passes


def test_the_closed_forms_are_the_sums_over_the_pieces_and_the_queries():
    """keys_in_chunks: the p mod C + 1 keys of each query, summed; chunked_pairs: each piece's rows against its chunk's
    keys from the chunk's first position to the piece's last row, summed; pieces never cross a chunk."""
    for C in (3, 24, ROW_CHUNK, 300):
        for past in (0, 1, C - 1, C, 2 * C + 5, 1000):
            for T in (1, 2, C, C + 1, 3 * C + 7, 400):
                pieces = row_pieces(past, T, C)
                assert [r for piece in pieces for r in range(*piece)] == list(range(T)), (C, past, T)
                assert all((past + r0) // C == (past + r1 - 1) // C and r1 - r0 <= ROW_CHUNK for r0, r1 in pieces)
                summed = sum((r1 - r0) * (past + r1 - (past + r0) // C * C) for r0, r1 in pieces)
                assert chunked_pairs(past, T, C) == summed, (C, past, T, chunked_pairs(past, T, C), summed)
                kept = sum(p % C + 1 for p in range(past, past + T))
                assert keys_in_chunks(past, past + T, C) == kept, (C, past, T)


def test_a_decode_step_reads_the_keys_of_its_chunk_alone():
    """Scout cut to its first four layers, its chunk to 16: a decode step at position p reads p mod 16 + 1 keys in a
    chunked layer (its window holds 16) and p + 1 in the NoPE one; the causal column keeps the same."""
    scout = PRESETS["llama-4-scout-17b-16e"]
    config = replace(scout.prefix(4), attention_chunk_size=16, n_positions=64)
    ledger = count_passes(Model.without_weights(config), 37, 3)
    for step, phase in enumerate(ledger.phases[1:], start=1):
        p = 37 + step - 1  # the decode step's position
        scores = {r.layer: r for r in phase.records if r.op == "scores"}
        H = config.n_head
        assert scores[0].dot_products == H * (p % 16 + 1), (p, scores[0].dot_products)
        assert scores[0].causal_dot_products == H * (p % 16 + 1)
        assert scores[0].dense_dot_products == H * 16  # the window of C the pass reads from
        assert scores[3].dot_products == scores[3].causal_dot_products == H * (p + 1)


def test_a_published_temperature_tuning_of_4_reads_as_true():
    hf = PRESETS["llama-4-scout-17b-16e"].to_hf_dict() | {"attn_temperature_tuning": 4}
    assert config_from_hf_dict(hf, "scout").attn_temperature_tuning is True
