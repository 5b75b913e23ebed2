"""Captured tensors equal transformers' wherever transformers exposes them (attention weights, hidden states,
and the outputs of its submodules through torch forward hooks), within 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import hf_fixture_dirs
from minitransformer import load_model

torch = pytest.importorskip(
    "torch", reason="comparing with Hugging Face needs torch (pip install 'minitransformer[hf]')"
)
transformers = pytest.importorskip("transformers", reason="comparing with Hugging Face needs transformers")

TOLERANCE = 1e-4


def reference(directory):
    # Attention weights are only returned by the eager implementation (transformers 5 defaults to sdpa).
    return transformers.GPT2LMHeadModel.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def worst(ours: np.ndarray, theirs) -> float:
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    return float(np.abs(ours - theirs).max())


def compare_with_outputs(model, hf, ids) -> dict[str, float]:
    """Max |difference| of each captured tensor that output_attentions / output_hidden_states expose."""
    logits, cache = model.run_with_cache(ids)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    n = model.config.n_layer
    assert len(out.attentions) == n and len(out.hidden_states) == n + 1
    diffs = {"logits": worst(logits, out.logits[0]), "embed": worst(cache["embed"], out.hidden_states[0][0])}
    for i in range(n):
        diffs[f"blocks.{i}.attn.weights"] = worst(cache[f"blocks.{i}.attn.weights"], out.attentions[i][0])
    for i in range(n - 1):  # hidden_states[i + 1] is block i's output, except the last, which is after ln_f
        diffs[f"blocks.{i}.resid_post"] = worst(cache[f"blocks.{i}.resid_post"], out.hidden_states[i + 1][0])
    diffs["ln_f"] = worst(cache["ln_f"], out.hidden_states[n][0])
    return diffs


@pytest.mark.parametrize("directory", hf_fixture_dirs(), ids=lambda p: p.name)
def test_attention_weights_and_hidden_states_equal_transformers(directory):
    model, hf = load_model(directory), reference(directory)
    ids = np.load(directory / "logits.npz")["ids_0"].tolist()
    diffs = compare_with_outputs(model, hf, ids)
    assert len(diffs) == 2 + 2 * model.config.n_layer  # logits, embed, ln_f, n weights, n - 1 block outputs
    bad = {name: d for name, d in diffs.items() if d > TOLERANCE}
    assert not bad, f"{directory.name}: beyond {TOLERANCE}: {bad}"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A random GPT2LMHeadModel saved by transformers, with LayerNorm parameters and biases far from their
    initial 1 and 0, so that a stage that forgot one of them would differ."""
    config = transformers.GPT2Config(n_layer=3, n_head=4, n_embd=32, n_positions=32, vocab_size=300,
                                     activation_function="gelu_new")  # fmt: skip
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "ln_" in name:
                p.add_(torch.randn_like(p) * 0.5)
    directory = tmp_path_factory.mktemp("hf") / "fresh-gpt2"
    hf.save_pretrained(directory)
    return load_model(directory), reference(directory)


def test_a_fresh_transformers_model_matches_stage_by_stage(fresh):
    model, hf = fresh
    ids = [5, 101, 299, 17, 64, 0, 233]
    diffs = compare_with_outputs(model, hf, ids)
    assert max(diffs.values()) <= TOLERANCE, diffs

    # Inside the blocks, transformers' submodules show their outputs to torch forward hooks.
    seen: dict[str, np.ndarray] = {}
    ours_of = {"ln_1": "ln_1", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.out", "ln_2": "ln_2",
               "mlp.c_fc": "mlp.up", "mlp.act": "mlp.act", "mlp.c_proj": "mlp.down"}  # fmt: skip
    handles = []
    for i, block in enumerate(hf.transformer.h):
        for theirs, ours in ours_of.items():
            module = block.get_submodule(theirs)
            name = f"blocks.{i}.{ours}"
            handles.append(module.register_forward_hook(lambda m, a, out, name=name: seen.__setitem__(name, out[0])))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = model.run_with_cache(ids, names=list(seen))
    assert len(seen) == 3 * len(ours_of)
    inside = {name: worst(cache[name], seen[name]) for name in seen}
    assert max(inside.values()) <= TOLERANCE, inside
    assert np.abs(cache["blocks.2.ln_2"]).max() > 0.5  # real values, not an empty comparison


def test_decode_step_captures_equal_the_last_row_of_a_full_recompute(fresh):
    model, hf = fresh
    ids = [5, 101, 299, 17, 64, 0, 233]
    kv = model.new_cache()
    model.run(ids[:-1], cache=kv)
    _, step = model.run_with_cache(ids[-1:], all_positions=False, kv_cache=kv)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for i in range(model.config.n_layer):
        assert step[f"blocks.{i}.attn.weights"].shape == (4, 1, 7)
        assert worst(step[f"blocks.{i}.attn.weights"], out.attentions[i][0][:, -1:, :]) <= TOLERANCE
    assert worst(step["blocks.0.resid_post"], out.hidden_states[1][0][-1:]) <= TOLERANCE
    assert worst(step["logits"], out.logits[0][-1:]) <= TOLERANCE
