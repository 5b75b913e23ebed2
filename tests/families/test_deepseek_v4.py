"""DeepSeek-V4's quirks (what every family owes runs in test_conformance.py, on the same models): a left-padded batch
refused, and why, with transformers' own numbers; the model card's comparison with DeepSeek-V3.2-Exp at a context of a
million, as docs/families/deepseek_v4.md tables it, in closed form."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.deepseek_v4.config import CSA, PRESETS  # noqa: E402
from minitransformer.families.deepseek_v4.family import ATTENTION_OPS, CARD, DECODER, POOLS, v32_decode_macs  # noqa: E402
from minitransformer.families.deepseek_v32.config import PRESETS as V32_PRESETS  # noqa: E402
from minitransformer.families.deepseek_v32.family import DECODER as V32_DECODER  # noqa: E402
from minitransformer.families.table import architecture_of  # noqa: E402
from minitransformer.verbs.count import decode_at  # noqa: E402

FAMILY = "deepseek_v4"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
ROOT = Path(__file__).resolve().parents[2]
V32 = V32_PRESETS["deepseek-v3.2-exp"]


def test_a_left_padded_batch_is_refused_since_transformers_pools_the_pads_into_a_row_s_windows(made):
    """transformers' compressors cut the batch's columns into windows (modeling_deepseek_v4.py's
    `chunk_kv.view(batch, n_windows, self.compress_rate, -1)`), pads and all, with no attention mask: a padded row's
    logits are not its own alone once a query reads its first entry (position 3 at 4:1), so no batch is right to
    match. Ours refuses it in one line; the unpadded row is its own alone in transformers' batch too."""
    _, ours, hf = made("every-kind")
    rows = [SPEC.prompt_ids("every-kind", n, seed=2 + row) for row, n in enumerate((40, 29))]
    ids, pads, mask, positions = checks.hf_inputs(rows, 0)
    with torch.no_grad():
        batch = hf(torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=torch.tensor(positions)).logits
        alone = [hf(torch.tensor([row])).logits[0].numpy() for row in rows]
    assert checks.worst(batch[0].numpy(), alone[0]) <= 1, checks.differ(batch[0].numpy(), alone[0])
    padded = np.abs(batch[1, pads[1] :].numpy() - alone[1]).max(-1)  # the padded row's worst gap at each position
    assert padded[:3].max() < 1e-4 and round(float(padded[3:].max()), 1) == 4.3, padded  # the family page's 4.3
    with pytest.raises(UserError, match="left-padded batch is not supported by DeepSeek-V4"):
        ours.run(ids, all_positions=True, pads=pads)
    cache = ours.new_cache(batch=2)  # refused before any layer writes: the cache is as it was (it was spoilt)
    with pytest.raises(UserError, match="left-padded batch is not supported by DeepSeek-V4"):
        ours.run(ids, cache=cache, pads=pads)
    assert cache.length == 0 and not cache.spoilt


def test_a_prompt_fed_in_pieces_through_the_cache_is_the_prompt_in_one_pass(made):
    """A first piece shorter than a window (4 positions at 4:1): the indexer, not run before the first entry, kept no
    rows of the open window in its compressor's state, and the pass that closed it pooled zeros (logits 1.2 off on a
    scale of 4.9; a greedy generation from a 2-token prompt left transformers' at token 27)."""
    _, ours, _ = made("every-kind")
    ids = SPEC.prompt_ids("every-kind", 40, seed=10)
    whole = ours.logits(ids)
    for cut in (1, 2, 3, 5):
        cache = ours.new_cache()
        first, rest = (ours.run(piece, cache=cache, all_positions=True) for piece in (ids[:cut], ids[cut:]))
        np.testing.assert_allclose(np.concatenate([first, rest]), whole, rtol=0, atol=1e-4, err_msg=f"cut at {cut}")


@pytest.mark.parametrize("nested", [True, False])
def test_the_compressed_layers_yarn_is_transformers_whatever_its_truncate_says(nested):
    """transformers' YaRN reads truncate from the outer rope_parameters, which DeepSeek-V4 keys by "main" and
    "compress" (a flat one nested on reading): it always truncates. Ours read the file's flag (the compressed layers'
    frequencies up to 0.017 apart)."""
    from transformers import DeepseekV4Config
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from minitransformer.families.rotary import inverse_frequencies
    from minitransformer.families.table import config_from_hf_dict

    yarn = {"rope_type": "yarn", "factor": 16.0, "beta_fast": 32, "beta_slow": 1, "truncate": False,
            "original_max_position_embeddings": 4096, "rope_theta": 160000.0}  # fmt: skip
    given = {"main": {"rope_type": "default", "rope_theta": 10000.0}, "compress": yarn} if nested else yarn
    hf = {**SPEC.hf_config("every-kind").to_dict(), "rope_parameters": given}
    theirs, _ = ROPE_INIT_FUNCTIONS["yarn"](
        DeepseekV4Config(**json.loads(json.dumps(hf))), "cpu", layer_type="compress"
    )
    ours = config_from_hf_dict(hf, "small")
    layer = next(i for i in range(ours.n_layer) if ours.ratio(i))  # a compressed layer
    np.testing.assert_array_equal(inverse_frequencies(ours.rope(layer), np.float32), theirs.numpy())


def test_v3_2_s_decode_step_in_closed_form_is_its_ledger_past_its_top_k():
    """The denominator of the card's comparison: DeepSeek-V3.2-Exp's decode step as count's ledger counts it (row
    chunks, each query's 2,048 chosen keys, the indexer over every key) is v32_decode_macs, at a context past
    index_topk; the million-position step of the family page is the same closed form."""
    step = decode_at(V32, 3000).expand()
    assert step.macs == v32_decode_macs(V32, 3000) == 44_104_005_120, (step.macs, v32_decode_macs(V32, 3000))


def test_the_family_page_s_comparison_at_a_million_is_the_closed_form_s():
    """docs/families/deepseek_v4.md's table (a decode step at context 999,999 and the KV cache, V4-Pro and -Flash
    against DeepSeek-V3.2-Exp, the ratios beside the card's) and the numbers its explanation gives, in closed form:
    V3.2's step mostly its indexer, V4-Pro's its attention (two thirds of it the 4:1 layers' indexer), Flash's
    indexer nearly two thirds of its step, V4-Pro's cache nearly all 4:1 entries and indexer keys."""
    page = (ROOT / "docs" / "families" / "deepseek_v4.md").read_text(encoding="utf-8")
    table = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:-1]]
             for row in page.splitlines() if row.startswith(("| a decode step", "| KV cache"))}  # fmt: skip
    t, v32 = 999_999, replace(V32, n_positions=1_000_000)
    theirs = v32_decode_macs(v32, t), v32.n_layer * t * (v32.kv_lora_rank + v32.qk_rope_head_dim + v32.index_head_dim)
    steps, caches = [f"{theirs[0]:,}"], [f"{theirs[1]:,}"]
    for name in ("deepseek-v4-pro", "deepseek-v4-flash"):
        c = replace(PRESETS[name], n_positions=1_000_000)
        step = architecture_of(c).formulas.pass_macs(c, 1, t - 1)
        cache = sum(c.layer_cache(i).numbers_held(t) for i in range(c.n_layer))
        steps += [f"{step:,}", f"{step / theirs[0]:.1%} ({CARD[name][0]})"]
        caches += [f"{cache:,}", f"{cache / theirs[1]:.1%} ({CARD[name][1]})"]
    assert table == {"a decode step, MACs": steps, "KV cache, numbers": caches}, (table, steps, caches)

    def summed(decoder, c, ops: tuple[str, ...]) -> int:  # the ops' MACs in the decode step, every layer's
        return sum(n * length for i in range(c.n_layer)
                   for op, (n, length) in decoder.block.products(c, 1, t, 1, i).items() if op in ops)  # fmt: skip

    v32_attention = summed(V32_DECODER, v32, ("index.scores", "index.sum", "scores", "mix"))  # the rest: weights
    assert (round(v32_attention / v32.n_layer / 1e8), round(v32_attention / 1e9)) == (83, 509), v32_attention
    assert round((theirs[0] - v32_attention) / 1e8) == 375, theirs[0] - v32_attention
    pro, flash = (replace(PRESETS[n], n_positions=1_000_000) for n in ("deepseek-v4-pro", "deepseek-v4-flash"))
    step, attention = architecture_of(pro).formulas.pass_macs(pro, 1, t - 1), summed(DECODER, pro, ATTENTION_OPS)
    assert summed(DECODER, pro, POOLS) == 0  # no window closes at this step: the rest is the products with weights
    assert (round(attention / 1e8), round((step - attention) / 1e8)) == (987, 489), (attention, step)
    indexers = {}  # the 4:1 layers' indexer over 250,000 entries
    for c, layers, billions in ((pro, 30, 62), (flash, 21, 43)):
        indexers[c.name] = summed(DECODER, c, ("index.scores", "index.sum"))
        assert (c.attention_types.count(CSA), round(indexers[c.name] / 1e9)) == (layers, billions), indexers
    step = architecture_of(flash).formulas.pass_macs(flash, 1, t - 1)
    assert 0.6 < indexers[flash.name] / step < 2 / 3, (indexers, step)  # nearly two thirds of Flash's step
    # --dense-attention: each 4:1 layer's scores and mix over all c entries, where the kc chosen were read
    from minitransformer.models.options import RunOptions

    dense = decode_at(flash, t, running=RunOptions(dense_attention=True)).expand().macs
    c, kc = t // flash.csa_rate, flash.compressed_topk
    assert dense == step + flash.attention_types.count(CSA) * 2 * flash.n_head * (c - kc) * flash.head_dim, dense
    assert f"all {c:,} entries where each query reads its {kc} chosen, {dense:,} MACs" in " ".join(page.split())
    held = [pro.layer_cache(i) for i in range(pro.n_layer)]
    window = sum(h.positions_held(t) * h.numbers_per_position for h in held)
    at_4 = [h.compressed_numbers(t) for h in held if "index" in h.compressed_numbers(t)]  # the 4:1 layers'
    entries, keys = sum(n["compressed"] for n in at_4), sum(n["index"] for n in at_4)
    total = sum(h.numbers_held(t) for h in held)
    assert (f"{window / total:.2%}", round(entries / 1e7), round(keys / 1e7)) == ("0.08%", 384, 96), (window, total)


def test_the_logit_lens_reads_each_layer_s_streams_through_the_model_s_own_head(made):
    """The lens's stream is DeepSeek-V4's N streams [T, N, D]; each entry read through its head (the streams
    collapsed by weights they compute), the final norm and the unembedding: the last entry is the model's logits, and
    the readout's products are the closed form, (L + 1) P (N^2 D + N D + V D) MACs, as count_lens counts them."""
    from minitransformer.verbs.lens import count_lens, logit_lens

    _, ours, _ = made("every-kind")
    c = ours.config
    ids = SPEC.prompt_ids("every-kind", 40, seed=3)
    assert ours.stream_shape == (c.hc_mult, c.n_embd)
    lens = logit_lens(ours, ids, ids[-1], all_positions=True)
    np.testing.assert_allclose(lens.logits[-1], ours.logits(ids), rtol=0, atol=1e-5 * np.abs(lens.logits).max())
    L, P, N, D, V = c.n_layer, len(ids), c.hc_mult, c.n_embd, c.vocab_size
    assert lens.bill.items[1].macs == (L + 1) * P * (N * N * D + N * D + V * D)
    counted = count_lens(c, P, all_positions=True)
    assert [i.to_dict() for i in counted.items] == [i.to_dict() for i in lens.bill.items]


def test_a_pass_resumed_from_its_streams_reads_the_ids_its_hash_layers_route_by(made):
    """run_from on a stream [T, N, D] with the prompt's ids is the whole pass (the hash-routed layers read the ids),
    and says in a line that it needs them without; a batch of one length is each row alone (logits and generate;
    activation patching runs its patched passes as one), a left-padded one refused before any pass; attribute, which
    splits one stream, and patching heads, which this model's sliding layers do not name, refused in a line."""
    from minitransformer.verbs.attribute import attribute
    from minitransformer.verbs.patch import patch

    _, ours, _ = made("every-kind")
    ids = SPEC.prompt_ids("every-kind", 30, seed=4)
    _, cache = ours.run_with_cache(ids, names=["blocks.0.hook_resid_pre"])
    stream = cache["blocks.0.hook_resid_pre"][0]
    np.testing.assert_array_equal(ours.run_from(0, stream, ids=ids, all_positions=True), ours.logits(ids))
    with pytest.raises(UserError, match="run_from needs the ids"):
        ours.run_from(0, stream, all_positions=True)
    for wrong in ([ids[0]], ids[:5], [ids, ids]):
        with pytest.raises(UserError, match="ids must hold the stream's 30 positions"):
            ours.run_from(0, stream, ids=wrong, all_positions=True)
    grid = np.broadcast_to(stream, (2, 3, *stream.shape)).copy()  # two batch axes, each row the same stream
    np.testing.assert_allclose(ours.run_from(0, grid, ids=ids, all_positions=True)[1, 2], ours.logits(ids), atol=1e-4)
    rows = [SPEC.prompt_ids("every-kind", 40, seed=s) for s in (5, 6, 7)]
    batch, alone = ours.logits(rows), [ours.logits(row) for row in rows]
    assert max(float(np.abs(b - a).max()) for b, a in zip(batch, alone)) <= 1e-5 * float(np.abs(batch).max())
    got = [g.new_tokens for g in ours.generate(rows, max_new_tokens=3, stop_at_eos=False)]
    assert got == [ours.generate(row, max_new_tokens=3, stop_at_eos=False).new_tokens for row in rows]
    with pytest.raises(UserError, match="left-padded batch is not supported"):
        ours.generate([rows[0][:4], rows[1][:6]], max_new_tokens=2)
    clean, corrupt = ids[:6], ids[:2] + [ids[7]] + ids[3:6]
    patched = patch(ours, clean, corrupt, ids[8], ids[9])
    same = [p for p in range(6) if clean[p] == corrupt[p]]
    assert np.abs(patched.residual[0, same]).max() < 1e-4, patched.residual[0]  # the same stream: nothing restored
    with pytest.raises(UserError, match="does not name"):
        patch(ours, clean, corrupt, ids[8], ids[9], heads=True)
    longer = SPEC.prompt_ids("every-kind", 40, seed=8)  # past every compressor's ratio: the compressed layers' z is
    with pytest.raises(UserError, match="layer 0 does not name"):  # [1, 4, T, H, dh] (an IndexError once layer 0
        # was let through); refused at the first layer that attends without one head's output a position
        patch(ours, longer, longer[:2] + [ids[7]] + longer[3:], ids[8], ids[9], heads=True)
    with pytest.raises(UserError, match="hyper-connections"):
        attribute(ours, clean, ids[8], ids[9])


def test_the_dense_form_reads_every_4_to_1_entry_and_is_the_default_pass_s_dense_count(made):
    """--dense-attention at 4:1: every entry so far scored and mixed, those the indexer did not choose masked (as
    transformers' eager attention does with its block_bias); the logits transformers', and the ledger's compressed
    scores and mix the default pass's dense form (it counted the kc chosen alone, with no dense form beside them, and
    --dense-attention changed nothing there)."""
    from minitransformer.engine.ledger import Phase
    from minitransformer.models.options import RunOptions
    from minitransformer.verbs.count import count_generation, count_passes

    _, ours, hf = made("every-kind")
    c = ours.config
    P = 40  # 10 entries at 4:1, past index_topk's 6
    ids = SPEC.prompt_ids("every-kind", P, seed=12)
    chosen, dense = Phase("prefill", 0, P, P), Phase("prefill", 0, P, P)
    logits = ours.run(ids, phase=chosen, all_positions=True)
    every_entry = ours.run(ids, phase=dense, all_positions=True, options=RunOptions(dense_attention=True))
    with torch.no_grad():
        theirs = hf(torch.tensor([ids])).logits[0]
    assert checks.worst(every_entry, theirs) <= 1 and checks.worst(logits, theirs) <= 1, checks.differ(
        every_entry, theirs
    )
    layer = c.attention_types.index(CSA)
    entries, read = P // c.csa_rate, c.compressed_topk
    for op, length in (("compressed.scores", c.head_dim), ("compressed.mix", entries)):
        sparse_record, dense_record = chosen.find(op, layer), dense.find(op, layer)
        assert dense_record.macs == c.n_head * P * entries * c.head_dim == sparse_record.dense_macs, (op, dense_record)
        assert sparse_record.macs == c.n_head * P * read * c.head_dim < sparse_record.dense_macs, (op, sparse_record)
        assert (dense_record.dot_length, dense_record.out_shape) == (length, sparse_record.out_shape), op
    assert dense.macs == dense.dense_macs == chosen.dense_macs > chosen.macs
    counted = count_generation(c, P, 3, dense_attention=True).totals
    assert counted.macs == count_passes(ours, P, 3, dense_attention=True).totals.macs
    assert counted.macs == count_generation(c, P, 3).totals.dense_macs > count_generation(c, P, 3).totals.macs
