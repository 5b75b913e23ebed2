"""Activation patching (verbs/patch.py) against TransformerLens's generic_activation_patch, its bill, its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from lens_models import MODELS, PROMPT, TOLERANCE, bridged, gap, require_lens

from minitransformer.cli import main
from minitransformer.verbs.patch import count_patch, patch

CORRUPT = [*PROMPT[:2], 30, *PROMPT[3:]]  # one token changed: position 2
TARGET, VERSUS = 7, 3
HEADS = {"gpt2", "llama", "qwen3_5"}  # the models with attention heads (Qwen3.5's in its full-attention layers)
# Qwen3.5's sweep is compared in float64, both sides: in float32 their rounding and ours add up to 1.6e-5 at the worst
# cell (its bridge, asked for float64, still rounds somewhere: 6.8e-6 there)
FLOAT64 = {"qwen3_5"}


def their_patching(bridge, heads_of: list[int]):
    """TransformerLens's sweeps on the same prompts: the patched logit difference per (layer, position) of the stream,
    and per (layer, position, head) of hook_z in the layers `heads_of` (a flat index, as its index_df gives)."""
    import pandas as pd

    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch
    from transformer_lens import patching

    clean, corrupt = torch.tensor([PROMPT]), torch.tensor([CORRUPT])
    _, cache = bridge.run_with_cache(clean)
    metric = lambda logits: logits[0, -1, TARGET] - logits[0, -1, VERSUS]  # noqa: E731
    with torch.no_grad():
        differences = [float(metric(bridge(tokens))) for tokens in (clean, corrupt)]
        stream = patching.get_act_patch_resid_pre(bridge, corrupt, cache, metric)
        cells = [(layer, p, h) for layer in heads_of for p in range(len(PROMPT)) for h in range(bridge.cfg.n_heads)]
        heads = None
        if cells:
            index = pd.DataFrame(cells, columns=["layer", "pos", "head"])
            heads = patching.generic_activation_patch(bridge, corrupt, cache, metric,
                                                      patching.layer_pos_head_vector_patch_setter, "z",
                                                      index_df=index)  # fmt: skip
    return differences, stream, heads


@pytest.mark.parametrize("key", list(MODELS))
def test_patch_equals_transformer_lens(tmp_path_factory, key):
    model, bridge = bridged(tmp_path_factory, key, "float64" if key in FLOAT64 else "float32")
    ours = patch(model, PROMPT, CORRUPT, TARGET, VERSUS, heads=key in HEADS)
    attending = list(ours.head_layers)
    assert attending == [
        i for i in range(model.config.n_layer) if ours.heads is not None and ~np.isnan(ours.heads[i]).all()
    ]
    (clean, corrupt), stream, heads = their_patching(bridge, attending)
    assert abs(ours.clean_difference - clean) <= TOLERANCE * max(1, abs(clean)), (ours.clean_difference, clean)
    assert abs(ours.corrupt_difference - corrupt) <= TOLERANCE * max(1, abs(corrupt)), (
        ours.corrupt_difference,
        corrupt,
    )
    # TransformerLens's cells are the patched differences; ours the share restored: put back on its scale
    scale = ours.clean_difference - ours.corrupt_difference
    assert gap(ours.residual * scale + ours.corrupt_difference, stream) <= TOLERANCE, (ours.residual, stream)
    # Closed forms: the positions before the one changed are the same in both runs (no change), and at block 0 the
    # changed position patched makes the clean run (all of it)
    restored = ours.residual * scale
    assert np.abs(restored[:, :2]).max() <= TOLERANCE * max(1, abs(corrupt)), restored
    assert abs(restored[0, 2] - scale) <= TOLERANCE * max(1, abs(clean)), (restored[0, 2], scale)
    if key in HEADS:
        assert attending, "no layer's heads were patched"
        flat = ours.heads[attending].reshape(-1) * scale + ours.corrupt_difference
        assert gap(flat, heads) <= TOLERANCE, (flat, heads)


def test_heads_asked_of_a_model_without_attention_are_said_to_be_none(tmp_path_factory, capsys):
    """Mamba-2 has no attention heads: --heads gives no head rows, said in words (an empty table was a TypeError)."""
    pytest.importorskip("torch", reason="the model is written by transformers (the [hf] extra)")
    from conformance_configs import made

    from minitransformer.views.html_analyses import patch_section
    from minitransformer.views.patch_report import patch_report

    _, model, _ = made(tmp_path_factory, *MODELS["mamba2"])
    ours = patch(model, PROMPT, CORRUPT, TARGET, VERSUS, heads=True)
    assert ours.head_layers == () and np.isnan(ours.heads).all()
    shown = patch_report(ours, lambda ids: f"<{ids[0]}>")
    assert "each head's output (attn.hook_z): no layer of this model has attention heads to patch" in shown
    document = ours.to_dict()
    assert document["head_layers"] == [] and all(
        cell is None for layer in document["heads"] for row in layer for cell in row
    )
    assert "No layer of this model has attention heads to patch." in patch_section(document)


def test_patching_starts_at_the_layer_and_bills_what_it_recomputed(tmp_path_factory):
    """The bill from the ledger: a run from block l costs blocks l.. and the readout; shapes alone give the same."""
    model, _ = bridged(tmp_path_factory, "llama")
    ours = patch(model, PROMPT, CORRUPT, TARGET, VERSUS, heads=True)
    T, L, H = len(PROMPT), model.config.n_layer, model.config.n_head
    clean, corrupt, stream, heads = ours.bill.items
    assert (clean.passes, corrupt.passes, stream.passes, heads.passes) == (1, 1, L * T, L * T * H)
    logits = T * model.config.vocab_size * model.config.n_embd  # the readout's MACs, once a run at R = 1
    block = (corrupt.macs - model.config.vocab_size * model.config.n_embd) // L  # the blocks are alike: one's MACs
    assert stream.macs == sum(T * ((L - start) * block) + logits for start in range(L)), stream.macs
    assert ours.bill.saved.macs == (L * T + L * T * H) * corrupt.macs - stream.macs - heads.macs > 0
    counted = count_patch(model.config, T, heads=True)
    assert counted.to_dict() == ours.bill.to_dict()  # from shapes alone: the same bill


def test_patch_in_float64_and_the_demo(capsys):
    argv = ["patch", "The capital of France is", "--corrupt", "The capital of Germany is", "--target", " Paris",
            "--versus", " Berlin", "--model", "demo", "--dtype", "float64"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "positions where the prompts differ: ' France' / ' Germany'" in out
    assert "block 0       0.000       0.000       0.000       1.000       0.000" in out  # France carries it all at 0


def test_count_only_is_a_shape_sum_for_any_preset(capsys):
    assert main(["patch", "--count-only", "--preset", "qwen3.5-27b", "--tokens", "200"]) == 0
    out = capsys.readouterr().out
    assert "64 layers x 200 positions, each from its block  12,800 x" in out and "against 12,800 whole" in out


@pytest.mark.parametrize(
    "argv, says",
    [
        (["The capital of France is", "--corrupt", "The capital of the Netherlands is"],
         "the clean prompt is 5 tokens and the corrupted one 6"),
        (["Paris", "--corrupt", "The capital"], "the clean prompt is 1 token and the corrupted one 2"),  # not 1 tokens
        (["The capital of France is", "--target", " Paris", "--versus", " Berlin"], "patch needs --corrupt"),
        (["The capital of France is", "--corrupt", ""], "--corrupt is empty; patch needs some text there"),
        (["The capital of France is", "--corrupt", "The capital of Germany is", "--versus", " Parisian"],
         "--versus ' Parisian' is 2 tokens"),
        (["The capital of France is", "--corrupt", "The capital of Germany is", "--versus", " Paris"],
         "--target and --versus are the same token"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(capsys, argv, says):
    defaults = {"--target": " Paris", "--versus": " Berlin"}
    argv = [*argv, *(x for flag, value in defaults.items() if flag not in argv for x in (flag, value))]
    assert main(["patch", *argv, "--model", "demo"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_the_pages_draw_the_sweep_and_the_lens(tmp_path, capsys):
    """patch --html and lens --html: each its section, its heatmap's cells from the JSON, its bill."""
    import json
    from html import escape

    from minitransformer.text import human
    from minitransformer.views.html_analyses import patch_section

    clean = ["The capital of France is", "--model", "demo"]
    patched = ["patch", *clean, "--corrupt", "The capital of Germany is", "--target", " Paris", "--versus", " Berlin"]
    assert main([*patched, "--json", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html")]) == 0
    assert main(["lens", *clean, "--target", " Paris", "--positions", "--html", str(tmp_path / "l.html")]) == 0
    document, page = json.loads((tmp_path / "p.json").read_text()), (tmp_path / "p.html").read_text()
    assert "<h2>Activation patching</h2>" in page and "Its bill" in page
    saved = document["bill"]["saved"]  # in the terminal's units: "99 K dot products, 7.47 M MACs (7,468,800)"
    assert f"{human(saved['dot_products'])} dot products, {human(saved['macs'])} MACs ({saved['macs']:,})" in page
    assert page.count('<rect class="cell"') == 4 * 5 == len(document["residual"]) * len(document["residual"][0])
    assert escape(f"block 1, ' France' 3: share restored {document['residual'][1][3]:.3f}") in page
    lens = (tmp_path / "l.html").read_text()
    assert "<h2>The logit lens</h2>" in lens and lens.count('<rect class="cell"') == 5 * 5  # entries x positions
    assert "))" not in lens.split("<h2>The logit lens</h2>")[1].split("</p>")[0]  # its note: no nested parenthesis
    # its columns the prompt's tokens, as the sweep's are (they were "pos 0" .. "pos 4")
    assert escape("after block 1, ' France' 3: probability") in lens and "pos 3" not in lens
    ids_only = patch_section({**document, "clean": {"ids": document["clean"]["ids"], "pieces": [None] * 5}})
    assert escape(f"block 1, {document['clean']['ids'][3]} 3: share") in ids_only  # no text: each id (was "None 3")


# A latent attention's heads read by W_O are as wide as its values (v_head_dim), not its queries and keys: 10 against
# 20, and 16 against 12 (DeepSeek-V3's shapes, small)
LATENT = dict(model_type="deepseek_v3", vocab_size=50, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
              num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=24,
              kv_lora_rank=16, max_position_embeddings=64)  # fmt: skip


@pytest.mark.parametrize("rope, nope, values", [(8, 12, 10), (4, 8, 16)], ids=["values-narrower", "values-wider"])
def test_a_latent_attention_s_heads_are_as_wide_as_its_values(rope, nope, values):
    """hook_z is what W_O reads, cut into the H heads whatever their width: a cut by the queries' width gave a
    DeepSeek-V3 of 4 heads 2 heads of 20, and patch --heads an IndexError (a preset's, a reshape error)."""
    from minitransformer.families.table import config_from_hf_dict
    from minitransformer.models.model import Model
    from minitransformer.models.weights import as_tree, expected_shapes

    hf = {**LATENT, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": values}
    config = config_from_hf_dict(hf, "latent")
    rng = np.random.default_rng(5)
    flat = {
        name: (0.3 * rng.standard_normal(shape)).astype(np.float32) for name, shape in expected_shapes(config).items()
    }
    model = Model(config, as_tree(flat, config), source="random")
    T, H = len(PROMPT), config.n_head
    _, cache = model.run_with_cache(PROMPT, names=["blocks.1.attn.hook_z", "blocks.1.attn.mix"])
    z, mix = cache["blocks.1.attn.hook_z"], cache["blocks.1.attn.mix"]  # mix [H, T, dv]
    assert z.shape == (1, T, H, values), (z.shape, (1, T, H, values))
    assert np.array_equal(z[0], mix.swapaxes(0, 1)), abs(z[0] - mix.swapaxes(0, 1)).max()
    ours = patch(model, PROMPT, CORRUPT, TARGET, VERSUS, heads=True)
    assert ours.heads.shape == (config.n_layer, T, H) and ours.head_layers == (0, 1), (
        ours.heads.shape,
        ours.head_layers,
    )
    assert np.isfinite(ours.heads).all(), ours.heads
    assert Model.without_weights(config).run_with_cache(PROMPT)[1].lens()["blocks.0.attn.hook_z"].shape == (
        1,
        T,
        H,
        values,
    )


def test_the_pages_of_a_run_that_met_nan_are_written_its_cells_grey():
    """A model whose arithmetic overflows: lens's and attribute's pages failed on NaN (its colour and its bar's width
    rounded a NaN: ValueError), and with them the --json beside the page; generate's candidate bars were 'width:nan%'
    (the whole cell). NaN is grey, and a bar of no width; the page says the run met NaN, as the terminal does."""
    from shared_checks import random_model

    from minitransformer.verbs.attribute import attribute
    from minitransformer.verbs.lens import logit_lens
    from minitransformer.views.html_report import NONFINITE_NOTE, _bar, analysis_data, page

    model = random_model(n_layer=2, n_head=2, d_head=8, n_inner=32, vocab=100, n_positions=16, seed=2)
    for block in model.params.h:
        block.mlp.c_fc.weight *= np.float32(1e30)  # the MLP overflows: inf - inf, NaN from there on
        block.mlp.c_proj.weight *= np.float32(1e30)
    ids = [3, 14, 15, 92, 65]
    with np.errstate(all="ignore"):
        lens, parts = logit_lens(model, ids, 7), attribute(model, ids, 7, 8)
    assert np.isnan(lens.logits[-1]).any() and np.isnan(parts.difference), parts.difference
    decode = model.tokenizer.decode
    for kind, analysis in (("lens", lens), ("attribute", parts)):
        html = page(analysis_data(kind, {"model": model.describe(), **analysis.to_dict(decode)}))
        assert "#ddd" in html and "nan%" not in html, kind
        assert html.count(NONFINITE_NOTE) == 1, kind  # the terminal's note, on the page too
    sound = random_model(n_layer=2, n_head=2, d_head=8, n_inner=32, vocab=100, n_positions=16, seed=2)
    finite = page(analysis_data("lens", {"model": sound.describe(), **logit_lens(sound, ids, 7).to_dict(decode)}))
    assert NONFINITE_NOTE not in finite
    assert _bar(float("nan")) == '<td class="barcell"><span class="bar" style="width:0"></span></td>'
