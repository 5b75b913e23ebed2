"""The logit lens (verbs/lens.py) against TransformerLens's logit_lens and accumulated_resid, its bill, its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from lens_models import MODELS, PROMPT, TOLERANCE, bridged, gap, require_lens

from minitransformer.cli import main
from minitransformer.verbs.lens import count_lens, logit_lens, residual_stack


@pytest.mark.parametrize("key", list(MODELS))
def test_lens_equals_transformer_lens(tmp_path_factory, key):
    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch
    from transformer_lens.tools.analysis.logit_lens import logit_lens as their_lens

    model, bridge = bridged(tmp_path_factory, key)
    tokens = torch.tensor([PROMPT])
    _, cache = bridge.run_with_cache(tokens)
    stack, labels = cache.accumulated_resid(apply_ln=False, return_labels=True)
    ours_stack = residual_stack(model, PROMPT)
    assert len(labels) == model.config.n_layer + 1
    assert gap(ours_stack[:, None], stack) <= TOLERANCE
    target = 7
    theirs = their_lens(bridge, cache=cache, positions=None, targets=target)
    ours = logit_lens(model, PROMPT, target, all_positions=True)
    full = their_lens(bridge, cache=cache, positions=None)  # every logit of every entry and position
    assert gap(ours.logits[:, None], full.values) <= TOLERANCE
    their_ranks = theirs.rank_trajectory(target)[:, 0].numpy() + 1  # theirs from 0
    our_ranks = np.array([e.rank for e in ours.entries]).reshape(len(labels), len(PROMPT))
    assert np.array_equal(our_ranks, their_ranks), (our_ranks, their_ranks)


def test_lens_reads_the_models_logits_at_its_last_entry_and_bills_its_products(tmp_path_factory):
    model, _ = bridged(tmp_path_factory, "llama")
    lens = logit_lens(model, PROMPT, 3)
    assert np.allclose(lens.logits[-1, 0], model.logits(PROMPT)[-1], atol=1e-5)
    L, D, V = model.config.n_layer, model.config.n_embd, model.config.vocab_size
    readout = lens.bill.items[1]
    assert readout.dot_products == (L + 1) * V and readout.macs == (L + 1) * V * D  # one row an entry, length D
    from minitransformer.verbs import formulas

    # the pass reads out its last position alone (every position's logits, never read, were 94% of the demo's bill)
    assert lens.bill.items[0].macs == formulas.generation_macs(model.config, len(PROMPT), 1), lens.bill.items[0]
    counted = count_lens(model.config, len(PROMPT))
    assert [i.to_dict() for i in counted.items] == [i.to_dict() for i in lens.bill.items]  # shapes alone: the same


def test_lens_in_float64_and_the_demo(capsys):
    main(["lens", "The capital of France is", "--target", " Paris", "--model", "demo", "--dtype", "float64"])
    out = capsys.readouterr().out
    assert "after block 3      4       1    0.9543" in out and "' Paris' first ranks 1 at after block 3" in out
    main(["lens", "The capital of France is", "--target", " Paris", "--model", "demo", "--top", "2"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("after block 3"))
    assert row.endswith("' Paris' 0.954, ' Monaco' 0.023"), row  # the two most likely, no more


@pytest.mark.parametrize(
    "argv, says",
    [
        (["lens", "The capital of France is", "--target", " Parisian"], "is 2 tokens (' Paris' + 'ian'), not one"),
        (["lens", "The capital of France is"], "lens needs --target"),
        (["lens", "--target", " Paris"], "lens needs a prompt"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, says):
    assert main([*argv, "--model", "demo"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_function_refuses_a_top_or_a_target_it_cannot_take():
    """logit_lens(top=0) was refused as top_k, and a target of True read as token id 1."""
    import re

    from minitransformer import UserError, load_model
    from minitransformer.verbs.lens import logit_lens

    demo = load_model("demo")
    for kwargs, says in ((dict(top=0), "top (tokens listed) must be a whole number of at least 1, not 0"),
                         (dict(top=2.0), "not 2.0"), (dict(target=True), "integers, not bool (True)")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(says)):
            logit_lens(demo, "The capital of France is", **{"target": " Paris", **kwargs})
    assert logit_lens(demo, "The capital of France is", np.int64(6342), top=1).entries[-1].top[0][0] == 6342


def test_each_analysis_refuses_what_is_no_model_and_a_shape_only_one_in_words():
    """logit_lens, patch and attribute of a config, None or a name ended in an AttributeError on prompt_ids; of a
    shape-only model in a TypeError deep in NumPy (np.stack or float() of a stand-in)."""
    from minitransformer import Model, UserError, load_model
    from minitransformer.verbs.attribute import attribute
    from minitransformer.verbs.patch import patch

    demo = load_model("demo")
    analyses = {"logit_lens": (lambda m: logit_lens(m, [464, 3139], 6342), "count_lens"),
                "patch": (lambda m: patch(m, [464, 3139], [464, 286], 6342, 10598), "count_patch"),
                "attribute": (lambda m: attribute(m, [464, 3139], 6342, 10598), "count_attribute")}  # fmt: skip
    for verb, (run, bill) in analyses.items():
        for wrong, says in ((demo.config, f"{verb} reads a Model (load_model(...)), not GPT2Config("),
                            (None, f"{verb} reads a Model (load_model(...)), not None"),
                            (Model.without_weights(demo.config), f"count its bill instead, {bill}(model.config, tokens)")):  # fmt: skip
            with pytest.raises(UserError) as refused:
                run(wrong)
            print(refused.value)
            assert says in str(refused.value) and "\n" not in str(refused.value)
        run(demo)  # the model itself is taken


def test_first_top_reads_a_position_the_lens_read_counting_from_the_end_and_refuses_any_other():
    """first_top(-1), the last position, answered None (no entry has position -1), as did a position past the prompt
    or one the lens did not read (all_positions=False reads the last alone): as if the target were never on top."""
    from minitransformer import UserError, load_model

    demo = load_model("demo")
    last, every = (logit_lens(demo, "The capital of France is", " Paris", all_positions=a) for a in (False, True))
    print(f"first_top(): {last.first_top()!r}, (-1): {last.first_top(-1)!r}, (4): {last.first_top(np.int64(4))!r}")
    assert last.first_top() == last.first_top(-1) == last.first_top(np.int64(4)) == "after block 3"
    assert [every.first_top(p) for p in range(5)] == [every.first_top(p - 5) for p in range(5)]
    for lens, position, read in ((last, 0, "4, the last (all_positions=True reads each)"), (last, 5, "4, the last"),
                                 (every, 5, "0..4"), (every, -6, "0..4"), (every, 2.0, "0..4"), (every, "0", "0..4")):  # fmt: skip
        with pytest.raises(UserError) as refused:
            lens.first_top(position)
        print(refused.value)
        assert f"position must be one the lens read ({read}" in str(refused.value)


def test_every_analysis_document_says_which_model_ran(tmp_path, capsys):
    """lens's --json had no `model` (patch's and attribute's have it): a saved lens did not say which model, dtype or
    precision it read."""
    import json

    prompt = ["The capital of France is", "--target", " Paris"]
    runs = {"lens": [], "attribute": ["--versus", " Berlin"],
            "patch": ["--corrupt", "The capital of Germany is", "--versus", " Berlin"]}  # fmt: skip
    for verb, more in runs.items():
        path = tmp_path / f"{verb}.json"
        assert main([verb, *prompt, *more, "--model", "demo", "--json", str(path)]) == 0
        document = json.loads(path.read_text())
        assert next(iter(document)) == "model" and document["model"]["dtype"] == "float32", (verb, document["model"])
        assert document["model"]["source"] and document["model"]["name"], (verb, document["model"])
    capsys.readouterr()
