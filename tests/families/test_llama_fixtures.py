"""Llama, Mistral and Qwen2: our logits equal transformers' on committed fixtures (no torch needed), at every
position, with and without the KV cache, one prompt or a batch."""

from __future__ import annotations

import dataclasses
import json
import shutil
from math import pi

import numpy as np
import pytest

from conftest import hf_llama_fixture_dirs
from minitransformer import load_model
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.rotary import inverse_frequencies
from minitransformer.models.model import Model

TOLERANCE = 1e-4  # relative to the logits' scale, as validate.py states it


def allowed(reference: np.ndarray) -> float:
    return TOLERANCE * max(1.0, float(np.abs(reference).max()))


def worst_difference(model: Model, directory) -> float:
    """max |dlogit| / allowed over every position of every stored prompt (<= 1 passes)."""
    stored = np.load(directory / "logits.npz")
    prompts = json.loads((directory / "fixture.json").read_text())["prompts"]
    ratios = []
    for i in range(prompts):
        ours = model.logits(stored[f"ids_{i}"])
        theirs = stored[f"logits_{i}"]
        assert ours.dtype == np.float32 and ours.shape == theirs.shape
        ratios.append(float(np.abs(ours - theirs).max()) / allowed(theirs))
    return max(ratios)


@pytest.mark.parametrize("directory", hf_llama_fixture_dirs(), ids=lambda p: p.name)
def test_logits_match_transformers_fixture(directory):
    model = load_model(directory)
    assert model.config.family == "llama"
    assert json.loads((directory / "fixture.json").read_text())["prompts"] >= 3
    ratio = worst_difference(model, directory)
    assert ratio <= 1, f"{directory.name}: max |dlogit| is {ratio:.2f} x the allowed {TOLERANCE:g} x scale"


def configs() -> dict[str, LlamaConfig]:
    return {d.name: load_model(d).config for d in hf_llama_fixture_dirs()}


def test_fixtures_cover_the_options_that_change_a_llama_forward_pass():
    c = configs()
    hf = {d.name: json.loads((d / "config.json").read_text()) for d in hf_llama_fixture_dirs()}
    assert {x.model_type for x in c.values()} == {"llama", "mistral", "qwen2"}
    assert any(x.n_kv_head == x.n_head for x in c.values())  # multi-head
    assert any((x.n_head, x.n_kv_head) == (8, 2) for x in c.values())  # grouped-query
    assert any(x.n_kv_head == 1 < x.n_head for x in c.values())  # multi-query
    assert any(x.d_head != x.n_embd // x.n_head for x in c.values())
    assert min(x.rope_theta for x in c.values()) <= 1000 and max(x.rope_theta for x in c.values()) >= 500_000
    assert {dict(x.rope_scaling)["rope_type"] for x in c.values() if x.rope_scaling} == {"llama3", "linear"}
    assert any(x.qkv_bias and x.o_bias and x.mlp_bias for x in c.values())
    assert any(x.model_type == "qwen2" and x.qkv_bias and not x.o_bias for x in c.values())
    assert {x.tie_word_embeddings for x in c.values()} == {True, False}
    assert len({x.norm_eps for x in c.values()}) >= 3
    assert any(x.sliding_window is not None and x.sliding_window < x.n_positions - 30 for x in c.values())
    assert {h.get("dtype") for h in hf.values()} >= {"float32", "float16", "bfloat16"}
    assert any((d / "model.safetensors.index.json").exists() for d in hf_llama_fixture_dirs())
    total = sum(f.stat().st_size for d in hf_llama_fixture_dirs() for f in d.iterdir())
    assert total < 2_000_000, f"the Llama fixtures take {total:,} bytes; keep them tiny"


def test_the_llama3_fixture_has_frequencies_in_each_band_of_the_rescaling():
    """Llama 3.1's rescaling keeps short wavelengths, slows long ones and blends those between: the fixture
    must have a frequency in each band, or a bug in one band could pass."""
    config = configs()["llama3_mqa_tied"]
    s = dict(config.rope_scaling)
    plain = inverse_frequencies(dataclasses.replace(config, rope_scaling=None).rope(), np.float32)
    wavelengths = 2 * pi / plain
    short = s["original_max_position_embeddings"] / s["high_freq_factor"]
    long = s["original_max_position_embeddings"] / s["low_freq_factor"]
    assert (wavelengths < short).any() and (wavelengths > long).any()
    assert ((wavelengths >= short) & (wavelengths <= long)).any()
    scaled = inverse_frequencies(config.rope(), np.float32)
    assert np.array_equal(scaled[wavelengths < short], plain[wavelengths < short])
    assert np.allclose(scaled[wavelengths > long], plain[wavelengths > long] / s["factor"], rtol=1e-6)


@pytest.mark.parametrize("fixture, change", [
    ("llama_mha", dict(norm_eps=1e-6)),
    ("llama_gqa_bias", dict(rope_theta=10000.0)),
    ("llama_gqa_bias", dict(norm_eps=1e-3)),
    ("llama3_mqa_tied", dict(rope_scaling=None)),
    ("llama_linear_fp16", dict(rope_scaling=None)),
    ("mistral_window", dict(sliding_window=None)),
    ("mistral_window", dict(sliding_window=7)),
    ("qwen2_bias_bf16", dict(rope_theta=10000.0)),
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={v}" for k, v in v.items()))  # fmt: skip
def test_the_fixtures_notice_when_an_option_is_ignored(fixture, change):
    """The same weights under a config that differs in one option miss transformers' logits: the fixtures
    can tell whether an option was honoured."""
    directory = next(d for d in hf_llama_fixture_dirs() if d.name == fixture)
    honest = load_model(directory)
    wrong = Model(dataclasses.replace(honest.config, **change), honest.params, honest.source)
    assert worst_difference(wrong, directory) > 3  # > 1 fails; even Llama 2's eps (1e-5) for 1e-6 gives 7.7


@pytest.mark.parametrize("directory", hf_llama_fixture_dirs(), ids=lambda p: p.name)
def test_cached_decoding_gives_the_logits_of_a_full_recompute(directory):
    """A prefill, a chunk of several positions after it, then one position at a time: with a sliding window
    the chunk starts inside it and the single steps run far past it."""
    model = load_model(directory)
    ids = np.load(directory / "logits.npz")["ids_2"]  # fills the context
    full = model.logits(ids)
    cache = model.new_cache()
    parts = [model.run(ids[:3], cache=cache, all_positions=True), model.run(ids[3:10], cache=cache, all_positions=True)]
    for position in range(10, len(ids)):
        parts.append(model.run(ids[position : position + 1], cache=cache))
    assert cache.length == len(ids) == model.config.n_positions
    assert np.abs(np.concatenate(parts) - full).max() <= 1e-5 * max(1.0, float(np.abs(full).max()))


@pytest.mark.parametrize("directory", hf_llama_fixture_dirs(), ids=lambda p: p.name)
def test_a_batch_of_equal_length_prompts_matches_one_by_one(directory):
    model = load_model(directory)
    ids = np.load(directory / "logits.npz")["ids_2"][:20]
    batch = np.stack([ids, ids[::-1], (ids + 7) % model.config.vocab_size])
    together = model.logits(batch)
    assert together.shape == (3, 20, model.config.vocab_size)
    bound = 1e-5 * max(1.0, float(np.abs(together).max()))
    for row, prompt in enumerate(batch):
        assert np.abs(together[row] - model.logits(prompt)).max() <= bound
    # and with the cache: a batched prefill then batched decode steps
    cache = model.new_cache(batch=(3,))
    model.run(batch[:, :12], cache=cache)
    steps = [model.run(batch[:, i : i + 1], cache=cache) for i in range(12, 20)]
    assert np.abs(np.concatenate(steps, axis=1) - together[:, 12:]).max() <= bound


def test_cached_and_uncached_generation_agree():
    for directory in hf_llama_fixture_dirs():
        model = load_model(directory)
        prompt = np.load(directory / "logits.npz")["ids_1"].tolist()
        cached = model.generate(prompt, max_new_tokens=30, stop_at_eos=False, ledger=False, candidates=0)
        recomputed = model.generate(prompt, max_new_tokens=30, use_cache=False, stop_at_eos=False, ledger=False,
                                    candidates=0)  # fmt: skip
        assert cached.new_tokens == recomputed.new_tokens and len(cached.new_tokens) == 30, directory.name


def transformers4_spelling(hf: dict) -> dict:
    """The same config as transformers 4 wrote it (as most checkpoints on the hub are): rope_theta at the top,
    rope_scaling with "type", torch_dtype."""
    old = {k: v for k, v in hf.items() if k not in ("rope_parameters", "dtype")}
    rope = dict(hf["rope_parameters"])
    old["rope_theta"] = rope.pop("rope_theta")
    kind = rope.pop("rope_type")
    old["rope_scaling"] = None if kind == "default" else {"type": kind, **rope}
    old["torch_dtype"] = hf.get("dtype")
    return old


@pytest.mark.parametrize("name", ["llama3_mqa_tied", "llama_linear_fp16", "llama_gqa_bias"])
def test_the_transformers_4_spelling_of_a_config_gives_the_same_model(name, tmp_path):
    source = next(d for d in hf_llama_fixture_dirs() if d.name == name)
    copy = tmp_path / name
    shutil.copytree(source, copy)
    hf = json.loads((source / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(transformers4_spelling(hf)))
    assert "rope_parameters" not in (copy / "config.json").read_text()
    assert load_model(copy).config == load_model(source).config
    assert worst_difference(load_model(copy), copy) <= 1
