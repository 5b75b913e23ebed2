"""Batched generation: prompts of different lengths as one left-padded [B, T] batch.

Checked against transformers on the committed GPT-2 and Llama-family fixtures (logits at every real
position with its attention mask and position ids, greedy tokens of its batched generate), against
each prompt generated alone, and the ledger's padding against a closed form from the config.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import hf_fixture_dirs, hf_llama_fixture_dirs, run_cli
from minitransformer import load_model
from minitransformer.engine.ledger import Ledger
from minitransformer.verbs.generate import batch_to_dict, left_padded
from minitransformer.verbs.options import GenerationOptions
from minitransformer.verbs.passes import forward_passes

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

TOLERANCE = 1e-4  # relative to the logits' scale, as validate.py states it
FIXTURES = {d.name: d for d in [*hf_fixture_dirs(), *hf_llama_fixture_dirs()]}
SOME = ["tiny", "odd_heads", "llama_gqa_bias", "llama3_mqa_tied", "mistral_window", "qwen2_bias_bf16"]
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34, 35, 36]]


def theirs(name: str):
    return transformers.AutoModelForCausalLM.from_pretrained(FIXTURES[name], dtype=torch.float32,
                                                             attn_implementation="eager").eval()  # fmt: skip


def hf_inputs(rows, pad_id):
    """input_ids, attention_mask and position_ids as transformers' batched generate makes them (left padding)."""
    ids, pads = left_padded(rows, pad_id)
    mask = (np.arange(ids.shape[1])[None, :] >= pads[:, None]).astype(np.int64)
    positions = mask.cumsum(-1) - 1
    positions[mask == 0] = 1
    return ids, pads, mask, positions


@pytest.mark.parametrize("name", SOME)
def test_batched_logits_equal_transformers_at_every_real_position(name):
    ours, hf = load_model(FIXTURES[name]), theirs(name)
    ids, pads, mask, positions = hf_inputs(PROMPTS, pad_id=1)
    with torch.no_grad():
        reference = hf(torch.tensor(ids), attention_mask=torch.tensor(mask),
                       position_ids=torch.tensor(positions)).logits.numpy()  # fmt: skip
    logits = ours.run(ids, all_positions=True, pads=pads)
    assert np.isfinite(logits).all()  # pad queries too: none has an empty softmax row
    real = mask.astype(bool)
    assert np.abs(logits[real] - reference[real]).max() <= TOLERANCE * max(1.0, np.abs(reference[real]).max())
    for row, prompt in enumerate(PROMPTS):  # and each row is its prompt alone
        alone = ours.logits(prompt)
        assert np.abs(logits[row, pads[row] :] - alone).max() <= TOLERANCE * max(1.0, np.abs(alone).max())


@pytest.mark.parametrize("name", ["tiny", "llama_gqa_bias", "mistral_window"])
def test_batched_greedy_equals_transformers_batched_generate_and_each_prompt_alone(name):
    ours, hf = load_model(FIXTURES[name]), theirs(name)
    n_new = 8  # past the Mistral fixture's window of 6
    pad_id = ours.config.eos_token_ids[0]
    ids, _, mask, _ = hf_inputs(PROMPTS, pad_id)
    with torch.no_grad():
        out = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=n_new, do_sample=False,
                          pad_token_id=pad_id, eos_token_id=None).numpy()[:, ids.shape[1]:]  # fmt: skip
    for use_cache in (True, False):
        batch = ours.generate(PROMPTS, max_new_tokens=n_new, stop_at_eos=False, use_cache=use_cache)
        assert [g.new_tokens for g in batch] == out.tolist()
        assert [g.new_tokens for g in batch] == [
            ours.generate(p, max_new_tokens=n_new, stop_at_eos=False, use_cache=use_cache).new_tokens for p in PROMPTS
        ]
        assert all(g.ledger is batch[0].ledger for g in batch)  # one ledger, the batch's
        assert [g.prompt_tokens for g in batch] == PROMPTS


def test_a_list_of_ints_is_one_prompt_and_a_list_of_lists_a_batch(small_gpt2):
    one = small_gpt2.generate([5, 6, 7], max_new_tokens=2)
    assert one.prompt_tokens == [5, 6, 7]
    batch = small_gpt2.generate([[5, 6, 7], [8]], max_new_tokens=2)
    assert isinstance(batch, list) and [g.prompt_tokens for g in batch] == [[5, 6, 7], [8]]
    assert batch[0].new_tokens == one.new_tokens


def test_sampling_with_a_seed_repeats_per_batch(small_gpt2):
    run = lambda seed: [g.new_tokens for g in small_gpt2.generate(PROMPTS, max_new_tokens=6, temperature=1.5,  # noqa
                                                                   seed=seed, stop_at_eos=False)]  # fmt: skip
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_a_batch_without_the_cache_recomputes_the_same_tokens(small_gpt2):
    """Each uncached pass feeds the whole sequence so far, the tokens chosen before it filled in after each prompt."""
    cached = [g.new_tokens for g in small_gpt2.generate(PROMPTS, max_new_tokens=6, stop_at_eos=False)]
    recomputed = [g.new_tokens for g in small_gpt2.generate(PROMPTS, max_new_tokens=6, stop_at_eos=False,
                                                            use_cache=False)]  # fmt: skip
    assert recomputed == cached, (recomputed, cached)
    assert len({tuple(tokens) for tokens in cached}) > 1, cached  # rows that differ: a mixed-up row would show


def expected_padding(c, phases):
    """The padding of a GPT-2 batch by hand: per pass, per row, pad queries q of the pass's T, pad keys k of its t."""
    D, F, H, dh, V, L = c.n_embd, c.d_ff, c.n_head, c.d_head, c.vocab_size, c.n_layer
    dots = macs = 0
    for T, t, pads, finished in phases:
        for pad, done in zip(pads, finished):
            q = T if done else min(max(pad - (t - T), 0), T)
            k = t if done else min(pad, t)
            # per pad query: qkv, out, mlp.up, mlp.down; scores: its whole row, and a real query's pad keys
            dots += L * (q * (3 * D + D + F + D) + H * (q * t + (T - q) * k) + H * q * dh) + (V if done else 0)
            macs += L * (q * (3 * D * D + D * D + 2 * F * D) + 2 * H * (q * t + (T - q) * k) * dh) + (
                V * D if done else 0
            )
    return dots, macs


@pytest.mark.parametrize("use_cache", [True, False])
def test_padding_in_the_ledger_is_the_closed_form(small_gpt2, use_cache):
    model, c = small_gpt2, small_gpt2.config
    ids, pads = left_padded(PROMPTS, 0)
    book = Ledger(c.to_dict())
    finished = [False] * len(PROMPTS)
    fed, shapes = [], []
    options = GenerationOptions(max_new_tokens=4, use_cache=use_cache)
    for step, logits in enumerate(forward_passes(model, ids, fed, options, pads=pads, finished=finished, book=book)):
        phase = book.phases[-1]
        shapes.append((phase.tokens, phase.context, list(pads), list(finished)))
        assert logits.shape == (len(PROMPTS), c.vocab_size) and phase.find("scores", 0).out_shape[0] == len(PROMPTS)
        fed.append(logits.argmax(-1))
        finished[1] = finished[1] or step == 1  # row 1 ends after the second pass and keeps computing
    padding = book.padding
    assert (padding.dot_products, padding.macs) == expected_padding(c, shapes)
    total = book.to_dict()["totals"]
    assert total["padding"]["macs"] == padding.macs and total["padding"]["share"] == padding.macs / total["macs"]
    done_only = expected_padding(c, [(T, t, [0] * len(p), f) for T, t, p, f in shapes])
    assert (total["padding"]["finished_rows"]["dot_products"], total["padding"]["finished_rows"]["macs"]) == done_only
    assert done_only[1] > 0


@pytest.mark.parametrize("name", ["llama_gqa_bias", "mistral_window"])
def test_llama_padding_counts_the_masked_pairs(name):
    """Scores padding of a Llama-family pass = the pairs the pad mask hides from real queries plus the pad queries' rows."""
    model = load_model(FIXTURES[name])
    c = model.config
    ids, pads = left_padded(PROMPTS, 0)
    book = Ledger(c.to_dict())
    fed, finished = [], [False] * len(PROMPTS)
    for logits in forward_passes(model, ids, fed, GenerationOptions(max_new_tokens=9), pads=pads, finished=finished,
                                 book=book):  # fmt: skip
        fed.append(logits.argmax(-1))
    for phase in book.phases:
        scores = phase.find("scores", 0)
        T, t = scores.out_shape[-2:]
        slots_q, slots_k = phase.context - T + np.arange(T), phase.context - t + np.arange(t)
        pad_q = slots_q[None, :, None] < pads[:, None, None]
        pad_k = slots_k[None, None, :] < pads[:, None, None]
        pairs = int((pad_q | pad_k).sum())  # (pad query, any key) or (real query, pad key), per row
        from minitransformer.engine.ledger import padding_of

        assert padding_of(scores, list(pads), phase.context) == (c.n_head * pairs, c.n_head * pairs * c.d_head)


def test_cli_generates_a_batch_with_one_ledger_and_its_padding_line(tmp_path):
    model = str(FIXTURES["tiny"])
    run = run_cli("generate", "--model", model, "--ids", "5,6,7", "--max-new-tokens", "3")
    assert run.returncode == 0 and "Padding" not in run.stdout  # one prompt: as before
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("ab\n\nabcdef\n", encoding="utf-8")
    out = run_cli("generate", "--model", "demo", "Paris is", "--prompts", str(prompts), "--max-new-tokens", "3",
                  "--json", str(tmp_path / "batch.json"), "--html", str(tmp_path / "batch.html"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n[") == 3 and out.stdout.count("Padding: ") == 1  # empty line skipped
    doc = json.loads((tmp_path / "batch.json").read_text())
    assert [g["prompt"] for g in doc["generations"]] == ["Paris is", "ab", "abcdef"]
    assert doc["phases"][0]["batch"] == 3 and doc["phases"][0]["layers"][0]["ops"][0]["out_shape"][0] == 3
    assert set(doc["totals"]["padding"]) == {"dot_products", "macs", "share", "finished_rows"}
    assert "Paris is" in (tmp_path / "batch.html").read_text()
    api = load_model("demo").generate(["Paris is", "ab", "abcdef"], max_new_tokens=3)
    assert doc == json.loads(json.dumps(batch_to_dict(api)))


@pytest.mark.parametrize("args, says", [
    (["a", "--ids", "1,2"], "not both"),
    (["--prompts", "{bad}"], "not UTF-8"),
    (["--prompts", "{empty}"], "holds no prompt"),
    (["--prompts", "{missing}"], "cannot read"),
    (["--prompts", ""], "--prompts is empty; give the path of a text file, or - for stdin"),  # not "Is a directory"
    (["a", ""], "prompt 2 is empty"),
])  # fmt: skip
def test_cli_refuses_bad_batches_in_one_line(tmp_path, args, says):
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "empty.txt").write_text("\n\n")
    paths = {"bad": tmp_path / "bad.txt", "empty": tmp_path / "empty.txt", "missing": tmp_path / "nope.txt"}
    out = run_cli("generate", "--model", "demo", *[a.format(**paths) for a in args])
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("minitransformer: error: ") and says in out.stderr and out.stderr.count("\n") == 1


def test_a_prompts_file_s_byte_order_mark_is_not_read_as_text(tmp_path):
    """Editors (Notepad) start a UTF-8 file with the mark EF BB BF: it was the first prompt's first three tokens."""
    prompts = tmp_path / "bom.txt"
    prompts.write_bytes(b"\xef\xbb\xbfParis is\r\nab\n")
    out = run_cli("generate", "--model", "demo", "--prompts", str(prompts), "--max-new-tokens", "1", "--json", "-")
    assert out.returncode == 0, out.stderr
    got = [g["prompt_tokens"] for g in json.loads(out.stdout)["generations"]]
    tok = load_model("demo").tokenizer
    print("read:", got, "as typed:", [tok.encode("Paris is"), tok.encode("ab")])
    assert got == [tok.encode("Paris is"), tok.encode("ab")]
    prompts.write_bytes(b"\xef\xbb\xbfab\xff\n")  # a bad byte is still counted from the file's start
    out = run_cli("generate", "--model", "demo", "--prompts", str(prompts))
    print(out.stderr)
    assert out.returncode == 2 and "is not UTF-8 text (byte 5)" in out.stderr


def test_a_batch_of_long_prompts_chunks_its_prefill_and_still_equals_transformers(tmp_path):
    """Rows past row_chunks.ROW_CHUNK (300 and 140 tokens): the pad mask is sliced chunk by chunk as the causal one is."""
    from conftest import write_gpt2, write_llama
    from minitransformer.engine import row_chunks
    from minitransformer.engine.ledger import Phase

    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 300, 300).tolist(), rng.integers(0, 300, 140).tolist()]
    assert min(map(len, rows)) > row_chunks.ROW_CHUNK
    for directory in (write_gpt2(tmp_path / "g", n_positions=320, vocab_size=300),
                      write_llama(tmp_path / "m", n_positions=320, vocab_size=300, model_type="mistral",
                                  sliding_window=50)):  # fmt: skip
        ours = load_model(directory)
        hf = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
        ids, pads, mask, positions = hf_inputs(rows, pad_id=1)
        phase = Phase("prefill", 0, ids.shape[1], ids.shape[1], batch=2)
        logits = ours.run(ids, all_positions=True, pads=pads, phase=phase)
        assert phase.find("scores", 0).macs < phase.find("scores", 0).dense_macs  # it did chunk
        with torch.no_grad():
            reference = hf(torch.tensor(ids), attention_mask=torch.tensor(mask),
                           position_ids=torch.tensor(positions)).logits.numpy()  # fmt: skip
        real = mask.astype(bool)
        assert np.isfinite(logits).all()
        assert np.abs(logits[real] - reference[real]).max() <= TOLERANCE * max(1.0, np.abs(reference[real]).max())


def test_a_batch_runs_in_the_dtype_asked_for(tmp_path):
    out = run_cli("generate", "--model", "demo", "Paris is", "ab", "--max-new-tokens", "2", "--dtype", "float64",
                  "--json", str(tmp_path / "batch.json"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "computed in float64" in out.stdout.splitlines()[0]
    doc = json.loads((tmp_path / "batch.json").read_text())
    assert doc["model"]["dtype"] == "float64"
    api = load_model("demo", dtype="float64").generate(["Paris is", "ab"], max_new_tokens=2)
    assert api[0].ledger.model["dtype"] == "float64" and doc == json.loads(json.dumps(batch_to_dict(api)))
