"""Our logits equal transformers' on the same weights: committed fixtures (anywhere) and the KV cache path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import hf_fixture_dirs
from minitransformer import load_model

TOLERANCE = 1e-4


@pytest.mark.parametrize("directory", hf_fixture_dirs(), ids=lambda p: p.name)
def test_logits_match_transformers_fixture(directory):
    model = load_model(directory)
    stored = np.load(directory / "logits.npz")
    prompts = json.loads((directory / "fixture.json").read_text())["prompts"]
    assert prompts >= 3
    for i in range(prompts):
        ours = model.logits(stored[f"ids_{i}"])
        assert ours.dtype == np.float32 and ours.shape == stored[f"logits_{i}"].shape
        worst = np.abs(ours - stored[f"logits_{i}"]).max()
        assert worst <= TOLERANCE, f"{directory.name} prompt {i}: max |dlogit| {worst:.2e}"


def test_fixtures_cover_the_options_that_change_inference():
    configs = [json.loads((d / "config.json").read_text()) for d in hf_fixture_dirs()]
    seen = lambda key: {json.dumps(c.get(key)) for c in configs}  # noqa: E731
    assert {"gelu_new", "gelu", "relu", "silu", "quick_gelu", "gelu_fast", "tanh"} <= {
        c["activation_function"] for c in configs
    }
    assert {"1", "2", "3", "4", "8"} <= seen("n_head")
    assert any(c.get("n_inner") not in (None, 4 * c["n_embd"]) for c in configs)
    assert len(seen("layer_norm_epsilon")) >= 3
    assert seen("scale_attn_weights") >= {"true", "false"}
    assert "true" in seen("scale_attn_by_inverse_layer_idx") and "true" in seen("reorder_and_upcast_attn")
    assert "false" in seen("tie_word_embeddings")
    assert any((d / "model.safetensors.index.json").exists() for d in hf_fixture_dirs())


@pytest.mark.parametrize("directory", hf_fixture_dirs()[:4], ids=lambda p: p.name)
def test_cached_decoding_gives_the_logits_of_a_full_recompute(directory):
    model = load_model(directory)
    ids = np.load(directory / "logits.npz")["ids_2"]  # fills the context
    full = model.logits(ids)
    cache = model.new_cache()
    prefill = 3
    stepwise = [model.run(ids[:prefill], cache=cache, all_positions=True)]
    for position in range(prefill, len(ids)):
        stepwise.append(model.run(ids[position : position + 1], cache=cache))
    stepwise = np.concatenate(stepwise)
    assert np.abs(stepwise - full).max() <= 1e-5


@pytest.mark.parametrize("directory", hf_fixture_dirs()[:2], ids=lambda p: p.name)
def test_a_prompt_that_fills_the_context_still_gives_one_token(directory):
    """N new tokens take prompt + N - 1 positions (the last is never fed back): a full context gives one, transformers'
    greedy next token, with the cache or without; a second is refused, saying how many fit."""
    from minitransformer.errors import UserError

    model = load_model(directory)
    stored = np.load(directory / "logits.npz")
    ids = stored["ids_2"].tolist()
    assert len(ids) == model.config.n_positions
    for use_cache in (True, False):
        made = model.generate(ids, max_new_tokens=1, use_cache=use_cache, stop_at_eos=False)
        assert made.new_tokens == [int(stored["logits_2"][-1].argmax())], (made.new_tokens, use_cache)
    with pytest.raises(UserError, match="at most 1 new token fits"):
        model.generate(ids, max_new_tokens=2)


def test_cached_and_uncached_generation_agree(small_gpt2):
    for prompt in ("The capital of France is", "Once upon a time"):
        cached = small_gpt2.generate(prompt, max_new_tokens=12, use_cache=True, stop_at_eos=False)
        recomputed = small_gpt2.generate(prompt, max_new_tokens=12, use_cache=False, stop_at_eos=False)
        assert cached.new_tokens == recomputed.new_tokens
        assert len(cached.new_tokens) == 12


def test_batch_of_equal_length_prompts_matches_one_by_one(small_gpt2):
    batch = np.array([[464, 3139, 286, 4881, 318], [464, 3290, 373, 1043, 287]])
    together = small_gpt2.logits(batch)
    assert together.shape == (2, 5, 50257)
    for row, ids in enumerate(batch):
        assert np.abs(together[row] - small_gpt2.logits(ids)).max() <= 1e-5
