"""Every row obeys the rule printed under it: dot products x length = MACs, wherever the row states one length.

A prompt longer than a row chunk computes attention in chunks of query rows (engine/row_chunks.py), each
against only the keys it can see, so the dot products of A V are as long as the keys their chunk sees: there
the row states the range of lengths instead, and its MACs are their sum. Checked on one preset of every family,
the prefill and the decode steps, in the JSON, the CSV and the text, against the chunks' closed form.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest

from minitransformer.engine import row_chunks
from minitransformer.engine.kvcache import KeysValues
from minitransformer.families.table import ARCHITECTURES, PRESETS
from minitransformer.verbs.count import count_generation
from minitransformer.views.count_report import count_report
from minitransformer.views.export import csv_chunks, json_chunks

PROMPT = 300  # past two row chunks of 128: three chunks, the last of 44 rows
# The first preset of each family (the table's order), gpt-oss's, whose window of 128 cuts what chunks see, and
# DeepSeek-V3.2's with an indexer that keeps 64 keys a query, so that attention reads chosen keys (CHOSEN).
ONE_A_FAMILY = sorted({next(n for n, c in PRESETS.items() if c.family == a) for a in ARCHITECTURES} | {"gpt-oss-20b"})
CHOSEN = 64
# The products whose rows may state a range of lengths: A V in row chunks, a triangular solve row by row (a hybrid's
# delta rule over a prompt: rows 1 to C - 1 long, engine/pieces.py), and a lightning layer's products over its blocks'
# positions (A V within a block and the state's write: the last block shorter).
RANGED = ("mix", "delta.solve", "lightning.mix", "lightning.write")
SPARSE = "deepseek-v3.2-exp, 64 keys a query"
CONFIGS = {**{name: PRESETS[name] for name in ONE_A_FAMILY}, SPARSE: replace(PRESETS["deepseek-v3.2-exp"],
                                                                             index_topk=CHOSEN)}  # fmt: skip


def stated_lengths(op: dict) -> tuple[int, int]:
    return op.get("dot_length_min", op["dot_length"]), op.get("dot_length_max", op["dot_length"])


def mix_lengths(T: int, past: int, window: int | None, C: int) -> list[int]:
    """The keys each chunk of C query rows sees, from its first row's window start to its last row."""
    lengths = []
    for r0 in range(0, T, C):
        r1 = min(T, r0 + C)
        first_key = 0 if window is None else max(0, past + r0 - window + 1)
        lengths.append(past + r1 - first_key)
    return lengths


@pytest.fixture(scope="module", params=list(CONFIGS))
def counted(request):
    config = CONFIGS[request.param]
    count = count_generation(config, PROMPT, 3)
    return config, count, json.loads("".join(json_chunks(count, 10.0)))


def test_the_preset_list_holds_every_family():
    assert {config.family for config in CONFIGS.values()} == set(ARCHITECTURES)


def test_every_row_that_states_one_length_multiplies_to_its_macs(counted):
    config, _, doc = counted
    seen = {"prefill": 0, "decode": 0}
    for phase in doc["phases"]:
        records = [op for layer in phase["layers"] for op in layer["ops"]] + [phase["logits"]]
        for op in (r for r in records if r["kind"] == "matmul"):
            seen[phase["phase"]] += 1
            shortest, longest = stated_lengths(op)
            if shortest == longest:
                assert op["dot_products"] * longest == op["macs"], (phase["step"], op["name"])
            else:  # a range: the chunks' lengths, and the MACs their sum
                # dot_length is the dense form's (every key); a window can keep every chunk's shorter
                assert op["op"] in RANGED and phase["phase"] == "prefill" and longest <= op["dot_length"]
                assert shortest * op["dot_products"] < op["macs"] < longest * op["dot_products"], op["name"]
    assert seen["prefill"] and seen["decode"], seen


def test_a_chunked_row_says_so_and_states_the_lengths_its_chunks_computed(counted):
    config, count, doc = counted
    prefill = doc["phases"][0]
    C = row_chunks.ROW_CHUNK
    chunks = -(-PROMPT // C)
    for layer in prefill["layers"]:
        window = config.layer_window(layer["layer"])
        for op in (r for r in layer["ops"] if r["op"] in ("scores", "mix")):
            assert (op["row_chunk"], op["chunks"]) == (C, chunks), op["name"]
            lengths = mix_lengths(PROMPT, 0, window, C) if op["op"] == "mix" else [op["dot_length"]]
            if op["op"] == "mix" and op.get("selected_keys", PROMPT) < PROMPT:  # each query's chosen keys, in any chunk
                assert op["selected_keys"] == CHOSEN
                lengths = [CHOSEN]
            assert stated_lengths(op) == (min(lengths), max(lengths)), op["name"]
            if op["op"] == "mix" and len(lengths) > 1:  # each chunk's rows x dh of each head, of its own length
                H, dh = op["heads"], op["out_shape"][-1]
                rows = [min(C, PROMPT - r0) for r0 in range(0, PROMPT, C)]
                assert op["macs"] == H * dh * sum(n * t for n, t in zip(rows, lengths)), op["name"]
    for phase in doc["phases"][1:]:  # a decode step computes one position: whole, or (sparse) in one chunk
        for op in (r for layer in phase["layers"] for r in layer["ops"]):
            assert op.get("chunks", 1) == 1 and stated_lengths(op)[0] == stated_lengths(op)[1], op["name"]


def test_the_csv_rows_state_the_same_lengths(counted):
    config, count, doc = counted
    rows = list(csv.DictReader(io.StringIO("".join(csv_chunks(count)))))
    for row in rows:
        shortest, longest = int(row["dot_length_min"]), int(row["dot_length_max"])
        if shortest == longest:  # one length, the dense form's (dot_length) unless fewer keys were read
            assert int(row["dot_products"]) * longest == int(row["macs"]), row["op"]
        else:
            assert row["op"] in RANGED and int(row["dot_length"]) >= longest
    # the prefill's chunked A V: a range, or (over chosen keys) shorter than the dense form's; a model without
    # attention (Mamba-2: every layer a state-space mixer) has no A V at all
    mixes = [row for row in rows if row["op"] == "mix"]
    assert bool(mixes) == any(isinstance(config.layer_cache(i), KeysValues) for i in range(config.n_layer))
    assert not mixes or any(row["dot_length_min"] != row["dot_length"] for row in mixes)


def test_the_text_row_of_a_chunked_product_shows_the_range_and_the_chunks():
    count = count_generation(PRESETS["gpt2"], PROMPT, 1)
    text = count_report(count)
    mix = next(line for line in text.splitlines() if line.startswith("  mix "))
    scores = next(line for line in text.splitlines() if line.startswith("  scores "))
    assert "[12, 300, 300] x [12, 300, 64] in 3 row chunks" in mix and " 128-300 " in mix
    assert "[12, 300, 64] x [12, 64, 300] in 3 row chunks" in scores and " 64 " in scores
    assert "A V's dot products are as long as the keys their chunk sees" in text
    dense = count_report(count_generation(PRESETS["gpt2"], PROMPT, 1, dense_attention=True))
    assert "row chunks" not in dense and "-300 " not in dense
