"""Direct logit attribution (verbs/attribute.py) against TransformerLens's decompose_resid and apply_ln_to_stack (the
frozen scale of logit_attrs), the parts summing to the difference, its bill, its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from lens_models import MODELS, PROMPT, TOLERANCE, bridged, gap, require_lens

from minitransformer.cli import main
from minitransformer.verbs.attribute import attribute

TARGET, VERSUS = 7, 3


def their_parts(cache, n_layer: int):
    """decompose_resid's parts at the last position, or, where a block has no hook_attn_out there (Qwen3.5's linear
    attention, Mamba-2's mixer: its decompose_resid raises KeyError), the same parts from its streams."""
    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch

    try:
        return cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
    except KeyError:
        last = lambda name: cache[name][:, -1]  # noqa: E731
        parts, labels = [last("blocks.0.hook_resid_pre")], ["embed"]
        for i in range(n_layer):
            pre, post = last(f"blocks.{i}.hook_resid_pre"), last(f"blocks.{i}.hook_resid_post")
            if f"blocks.{i}.hook_resid_mid" in cache:
                mid = last(f"blocks.{i}.hook_resid_mid")
                parts, labels = parts + [mid - pre, post - mid], labels + [f"{i}_mixer", f"{i}_mlp_out"]
            else:
                parts, labels = parts + [post - pre], labels + [f"{i}_mixer"]
        return torch.stack(parts), labels


@pytest.mark.parametrize("key", list(MODELS))
def test_attribution_equals_transformer_lens(tmp_path_factory, key):
    """TransformerLens's parts of the final stream (decompose_resid), under its frozen final scale (apply_ln_to_stack,
    as logit_attrs applies it), times the final norm's gain (which its logit_attrs leaves to fold_ln), against the
    two columns of W_U: ours, part by part."""
    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch

    model, bridge = bridged(tmp_path_factory, key)
    ours = attribute(model, PROMPT, TARGET, VERSUS)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([PROMPT]))
        stack, labels = their_parts(cache, model.config.n_layer)
        scaled = cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1)[:, 0]  # [parts, D]
    decoder = model.architecture.forward
    final = getattr(model.params, decoder.final_norm)
    gains = final.weight + 1 if getattr(decoder.norm, "one_plus", False) else final.weight
    unembedding = bridge.W_U.detach().double().numpy()
    theirs = scaled.double().numpy() * gains @ (unembedding[:, TARGET] - unembedding[:, VERSUS])
    if labels[:2] == ["embed", "pos_embed"]:  # GPT-2's: one stage of ours
        theirs, labels = np.concatenate([[theirs[0] + theirs[1]], theirs[2:]]), ["embed", *labels[2:]]
    mine = np.array([value for _, value in ours.parts[:-1]])
    assert len(mine) == len(theirs), ([w for w, _ in ours.parts], labels)
    assert gap(mine, theirs) <= TOLERANCE, (mine, theirs, labels)


@pytest.mark.parametrize("key", ["gpt2", "qwen3_5"])
def test_the_parts_sum_to_the_difference_in_float64(tmp_path_factory, key):
    model, _ = bridged(tmp_path_factory, key, "float64")
    ours = attribute(model, PROMPT, TARGET, VERSUS)
    total = sum(value for _, value in ours.parts)
    assert abs(total - ours.difference) <= 1e-10, (total, ours.difference)
    logits = model.logits(PROMPT)[-1]
    assert abs(ours.difference - (logits[TARGET] - logits[VERSUS])) <= 1e-12, (
        ours.difference,
        logits[[TARGET, VERSUS]],
    )
    L, D = model.config.n_layer, model.config.n_embd
    assert ours.bill.items[-1].macs == (len(ours.parts) + len(ours.pieces)) * 2 * D  # each against two columns of W_U
    assert len(ours.parts) == 1 + 2 * L + 1  # the embedding, attention (or mixer) and MLP a block, the biases


def test_the_demo_and_its_refusals(capsys):
    argv = ["attribute", "The capital of France is", "--target", " Paris", "--versus", " Berlin", "--model", "demo"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "  block 3 attn                               4.4978" in out
        and "sum of the parts                          12.8470" in out
    )
    assert main([*argv[:4], "--model", "demo"]) == 2
    err = capsys.readouterr().err
    assert "attribute needs --versus" in err and err.count("\n") == 1
    assert main([*argv[:5], " Paris", "--model", "demo"]) == 2  # every piece 0 was printed, where patch refuses
    err = capsys.readouterr().err
    assert "--target and --versus are the same token" in err and err.count("\n") == 1, err
    from minitransformer import UserError, load_model
    from minitransformer.verbs.attribute import attribute

    for switch in ("fold_ln", "center_writing_weights"):  # "no" was read as true: the option applied
        with pytest.raises(UserError, match=f"{switch} must be True or False, not 'no'"):
            attribute(load_model("demo"), "The capital of France is", " Paris", " Berlin", **{switch: "no"})


@pytest.mark.parametrize("key", ["gpt2", "llama"])
def test_heads_equal_transformer_lens(tmp_path_factory, key):
    """Each head's piece against TransformerLens's stack_head_results (z_h W_O[h] per head) under apply_ln_to_stack,
    times the final norm's gain, against the two columns of W_U; and the heads with b_o sum to the layer's part."""
    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch

    model, bridge = bridged(tmp_path_factory, key)
    ours = attribute(model, PROMPT, TARGET, VERSUS)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([PROMPT]))
        stack, labels = cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
        scaled = cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1)[:, 0]  # [L H, D]
    decoder = model.architecture.forward
    gains = getattr(model.params, decoder.final_norm).weight
    unembedding = bridge.W_U.detach().double().numpy()
    theirs = scaled.double().numpy() * gains @ (unembedding[:, TARGET] - unembedding[:, VERSUS])
    mine = np.array([value for _, what, value in ours.pieces if what.startswith("head ")])
    assert len(mine) == len(theirs) == model.config.n_layer * model.config.n_head, (len(mine), labels)
    assert gap(mine, theirs) <= TOLERANCE, (mine, theirs, labels)
    H, D, dh = model.config.n_head, model.config.n_embd, model.config.d_head
    assert ours.bill.items[1].macs == model.config.n_layer * H * dh * D  # a [1, dh] x [dh, D] product a head


@pytest.mark.parametrize(
    "family, name",
    [
        ("gpt2", "heads5-inner37"),
        ("qwen3_moe", "e8_k3_step2_window_norm"),
        ("qwen3_5", "moe"),
        ("ernie4_5_moe", "interval-2-no-shared-untied"),  # no shared expert: a TypeError (its moe.out unnamed)
        ("gemma", "gemma3-local-rope-linear"),  # no final soft-cap: refused as if it had one (its step does nothing)
        ("gemma", "gemma2-bias-untied-no-caps"),
    ],
)
def test_the_pieces_sum_to_their_parts_in_float64(tmp_path_factory, family, name):
    """Every split part (a layer's heads and b_o; a mixture's experts, and its shared expert where it has one) sums to
    the part, to 1e-10 in float64; each layer with experts has the last token's k of them. Qwen3.5-MoE's shared expert
    had no piece: its routed sum and its total were both captured as moe.out."""
    pytest.importorskip("transformers", reason="the models are written by transformers (the [hf] extra)")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "families"))
    from conformance_configs import made

    from minitransformer import load_model

    directory, _, _ = made(tmp_path_factory, family, name)
    model = load_model(directory, dtype="float64")
    ours = attribute(model, PROMPT, TARGET, VERSUS)
    parts = dict(ours.parts)
    split = {of for of, _, _ in ours.pieces}
    for of in split:
        total = sum(value for part, _, value in ours.pieces if part == of)
        assert abs(total - parts[of]) <= 1e-10, (of, total, parts[of])
    c = model.config
    assert abs(sum(parts.values()) - ours.difference) <= 1e-10 * max(1.0, abs(ours.difference)), ours.difference
    heads = [of for of in split if of.endswith("attn")]
    attending = [i for i, kind in enumerate(c.layer_types) if kind != "linear_attention"]  # Qwen3.5's DeltaNet: none
    if family == "gemma":  # sandwich norms: each branch normed before it is added, its part kept whole
        attending = []
    assert sorted(heads) == [f"block {i} attn" for i in attending], split
    from minitransformer.verbs.attribute import count_attribute

    # the bill from shapes alone is the real run's, item by item (a mixture's dense layers billed no expert pieces)
    assert count_attribute(c, len(PROMPT)).to_dict() == ours.bill.to_dict(), (family, name)
    experts = {of: [w for part, w, _ in ours.pieces if part == of] for of in split if of.endswith("mlp")}
    if family == "qwen3_moe":  # experts every second layer (decoder_sparse_step 2), k = 3 each
        assert sorted(experts) == ["block 1 mlp", "block 3 mlp"], experts
        assert all(len(set(w)) == c.top_k and all(x.startswith("expert ") for x in w) for w in experts.values())
    elif family == "qwen3_5":  # experts in every layer, k = 2 each, and the shared expert
        assert sorted(experts) == [f"block {i} mlp" for i in range(c.n_layer)], experts
        assert all(len(w) == c.top_k + 1 and w[-1] == "shared expert" for w in experts.values()), experts
    elif family == "ernie4_5_moe":  # experts every second layer, k each, no shared expert
        assert experts and all(len(set(w)) == c.top_k and "shared expert" not in w for w in experts.values()), experts
    else:
        assert experts == {}, experts


@pytest.mark.parametrize("name, parallel", [("pythia-like", True), ("serial-half-rotary", False)])
def test_gpt_neox_parts_are_named_by_what_they_hold(tmp_path_factory, name, parallel):
    """A parallel block adds attention and MLP in one sum: its one part was labelled "attn" (Pythia's every block); a
    serial GPT-NeoX block is the pre-norm block, its attention split into heads (it was kept whole)."""
    pytest.importorskip("transformers", reason="the models are written by transformers (the [hf] extra)")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "families"))
    from conformance_configs import made

    from minitransformer import load_model

    directory, _, _ = made(tmp_path_factory, "neox", name)
    model = load_model(directory, dtype="float64")
    ours = attribute(model, PROMPT, TARGET, VERSUS)
    L = model.config.n_layer
    blocks = [[f"block {i} attn+mlp"] if parallel else [f"block {i} attn", f"block {i} mlp"] for i in range(L)]
    assert [label for label, _ in ours.parts] == ["embed", *sum(blocks, []), "final norm's bias and the logits' bias"]
    heads = {of for of, _, _ in ours.pieces}
    assert heads == (set() if parallel else {f"block {i} attn" for i in range(L)}), heads
    for of in heads:
        assert abs(sum(v for part, _, v in ours.pieces if part == of) - dict(ours.parts)[of]) <= 1e-10, of
    from minitransformer.verbs.attribute import count_attribute

    assert count_attribute(model.config, len(PROMPT)).to_dict() == ours.bill.to_dict(), name  # the same bill unweighed


def test_count_only_is_the_real_runs_bill(capsys):
    """attribute --count-only's bill from shapes alone is the demo's real run's, item by item; any preset counts."""
    from minitransformer import load_model
    from minitransformer.verbs.attribute import count_attribute

    model = load_model("demo")
    real = attribute(model, "The capital of France is", " Paris", " Berlin").bill.to_dict()
    counted = count_attribute(model.config, 5).to_dict()
    assert counted == real, (counted, real)
    assert main(["attribute", "--count-only", "--preset", "qwen3.5-27b", "--tokens", "200"]) == 0
    out = capsys.readouterr().out
    # 16 gated-attention layers of 24 heads; 1 + 64 x 2 + 1 parts
    assert "each head's output z_h W_o[h]: 384 heads" in out and "130 parts and 384 pieces" in out, out


def test_the_page_draws_the_parts(tmp_path, capsys):
    """attribute --html: its section, a bar a part and a piece with the JSON's values, the sum, the bill."""
    import json
    from html import escape

    argv = ["attribute", "The capital of France is", "--target", " Paris", "--versus", " Berlin", "--model", "demo"]
    assert main([*argv, "--json", str(tmp_path / "a.json"), "--html", str(tmp_path / "a.html")]) == 0
    document, page = json.loads((tmp_path / "a.json").read_text()), (tmp_path / "a.html").read_text()
    pieces = [q for p in document["parts"] for q in p.get("pieces", [])]
    assert "<h2>Direct logit attribution</h2>" in page and "Its bill" in page
    assert page.count('<tr class="part">') == len(document["parts"]) == 10
    assert page.count('<tr class="piece">') == len(pieces) == 4 * (4 + 1)  # 4 heads and b_o a layer
    third = document["parts"][3]
    assert escape(f"{third['part']}: {third['attribution']:.4f}") in page, third
    assert f"{sum(p['attribution'] for p in document['parts']):.4f}" in page
    # the column holds logit contributions, not shares; the conventions are a sentence, not a nested parenthesis
    assert "<th>part</th><th>contribution</th>" in page and "))" not in page.split("<h2>")[1].split("<table")[0]


def test_fold_ln_and_center_writing_weights_equal_transformer_lens(tmp_path_factory):
    """With --fold-ln and --center-writing-weights, each part and head equals TransformerLens's on a bridge whose
    weights went through its process_weights with those options (its logit_attrs then needs no gain: W_U has it);
    an RMSNorm model's centring is refused."""
    require_lens()  # first: without TransformerLens (and torch) this skips
    import torch
    from conformance_configs import made

    from minitransformer.errors import UserError

    model, plain = bridged(tmp_path_factory, "gpt2")
    ours = attribute(model, PROMPT, TARGET, VERSUS, fold_ln=True, center_writing_weights=True)
    directory, _, _ = made(tmp_path_factory, *MODELS["gpt2"])  # a bridge of its own: process_weights changes it
    bridge = require_lens().boot_transformers(str(directory), device="cpu", tokenizer=plain.tokenizer)
    bridge.process_weights(fold_ln=True, center_writing_weights=True, center_unembed=False, fold_value_biases=False)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([PROMPT]))
        stack, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
        heads = cache.stack_head_results(layer=-1, pos_slice=-1)
        scaled = [cache.apply_ln_to_stack(s, layer=-1, pos_slice=-1)[:, 0].double().numpy() for s in (stack, heads)]
    direction = (bridge.W_U[:, TARGET] - bridge.W_U[:, VERSUS]).detach().double().numpy()
    theirs, their_heads = (s @ direction for s in scaled)
    theirs = np.concatenate([[theirs[0] + theirs[1]], theirs[2:]])  # GPT-2's embed and pos_embed: one part of ours
    mine = np.array([value for _, value in ours.parts[:-1]])
    mine_heads = np.array([value for _, what, value in ours.pieces if what.startswith("head ")])
    assert gap(mine, theirs) <= TOLERANCE, (mine, theirs, labels)
    assert gap(mine_heads, their_heads) <= TOLERANCE, (mine_heads, their_heads)
    plain_parts = np.array([value for _, value in attribute(model, PROMPT, TARGET, VERSUS).parts])
    assert gap(np.array([v for _, v in ours.parts]), plain_parts) <= 1e-5  # a LayerNorm centres the parts anyway
    llama, _ = bridged(tmp_path_factory, "llama")
    with pytest.raises(UserError, match="RMSNorm reads"):
        attribute(llama, PROMPT, TARGET, VERSUS, center_writing_weights=True)
