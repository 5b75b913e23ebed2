"""Qwen3 against transformers' own random Qwen3ForCausalLM models (tests/family_checks.py): logits at every position
of a prompt past the row chunk and past the window, 30 greedy tokens with the KV cache, a left-padded batch, float64
against the float64 truth, validate, count = a real run = the closed form, the parameters on the meta device, and
the captures of the new stages (q_norm, k_norm) against transformers' own q_norm and k_norm modules.

The configs differ where Qwen3 can: a head size that is not D / H, grouped or not, biases or not, tied or not, no
window, a window on the layers from max_window_layers on, a window on every layer, layer_types given outright.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402

from minitransformer import load_model  # noqa: E402
from minitransformer.verbs.validate import validate  # noqa: E402

V = 151
WINDOW = 24
CONFIGS = {
    # head_dim 16 against D / H = 8, 2 key/value heads for 4 query heads, tied, no biases, no window
    "tied-gqa": dict(hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, tie_word_embeddings=True),
    # biases on q, k, v and o, untied; the window on layers 1 and 2 only (max_window_layers = 1)
    "bias-window-from-layer-1": dict(hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                     num_attention_heads=6, num_key_value_heads=2, head_dim=8, attention_bias=True,
                                     use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1),
    # one key/value head per query head, every layer windowed, another theta
    "mha-window-everywhere": dict(hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2,
                                  num_key_value_heads=2, head_dim=12, use_sliding_window=True, sliding_window=WINDOW,
                                  max_window_layers=0, rope_theta=1_000_000.0),
    # layer_types given outright: windowed, full, windowed
    "layer-types": dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=8, use_sliding_window=True, sliding_window=WINDOW,
                        layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
}  # fmt: skip


def transformers_config(name: str):
    options = dict(CONFIGS[name])
    theta = options.pop("rope_theta", 10_000.0)
    return transformers.Qwen3Config(vocab_size=V, max_position_embeddings=400, rms_norm_eps=1e-6,
                                    rope_parameters={"rope_type": "default", "rope_theta": theta}, **options)  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """name -> (directory, transformers' model, ours), made once for the module."""
    models = {}
    for seed, name in enumerate(CONFIGS):
        directory = tmp_path_factory.mktemp(name)
        hf = checks.save_random(directory, transformers_config(name), seed=seed, spread=0.3)
        models[name] = directory, hf, load_model(directory)
    return models


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, V, n).tolist()  # no 0: generate reads it as padding


@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_reads_as_transformers_reads_it(name, made):
    _, hf, ours = made[name]
    c = ours.config
    assert (c.n_layer, c.n_head, c.n_kv_head, c.d_head) == (hf.config.num_hidden_layers, hf.config.num_attention_heads,
                                                            hf.config.num_key_value_heads, hf.config.head_dim)  # fmt: skip
    windows = [layer.self_attn.sliding_window for layer in hf.model.layers]
    assert [c.layer_window(i) for i in range(c.n_layer)] == windows
    assert c.layer_types == tuple(hf.config.layer_types)


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_at_every_position_past_the_row_chunk_and_the_window(name, made):
    _, hf, ours = made[name]
    assert checks.logits_at_every_position(ours, hf, prompt(150, seed=1)) <= 1


@pytest.mark.parametrize("name", CONFIGS)
def test_30_greedy_tokens_with_the_kv_cache_are_transformers_generate(name, made):
    _, hf, ours = made[name]
    tokens = checks.greedy(ours, hf, prompt(2 * WINDOW, seed=2))
    assert len(set(tokens)) > 3  # the weights spread: not one token repeated


@pytest.mark.parametrize("name", CONFIGS)
def test_a_left_padded_batch(name, made):
    _, hf, ours = made[name]
    assert checks.batch_logits(ours, hf, [prompt(40, 3), prompt(9, 4), prompt(30, 5)]) <= 1


@pytest.mark.parametrize("name", CONFIGS)
def test_float64_is_within_1e_9_of_the_float64_truth(name, made):
    directory, _, _ = made[name]
    assert checks.float64_against_truth(directory, prompt(140, seed=6)) <= checks.RELATIVE_FLOAT64


def test_validate_says_all_ok(made):
    out = io.StringIO()
    assert validate(made["bias-window-from-layer-1"][2], steps=3, out=out) is True, out.getvalue()
    assert out.getvalue().rstrip().endswith("all OK")
    assert "its q and k norms included" in out.getvalue()  # they too are recomputed in float64


@pytest.mark.parametrize("name", CONFIGS)
def test_count_equals_a_real_run_and_the_closed_form(name, made):
    _, _, ours = made[name]
    assert checks.count_equals_a_real_run_and_the_closed_form(ours, 2 * WINDOW + 3, 4) > 0


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_are_transformers_count_on_the_meta_device(name, made):
    from minitransformer.verbs.params import parameters

    _, _, ours = made[name]
    expected = checks.transformers_parameters(transformers_config(name))
    assert parameters(ours.config).total == ours.architecture.formulas.parameters(ours.config) == expected


@pytest.mark.parametrize("name", ["tied-gqa", "bias-window-from-layer-1"])
def test_the_q_and_k_norms_captured_are_transformers_q_norm_and_k_norm(name, made):
    """attn.q_normed and attn.k_normed (each head RMS-normalised over dh, not yet rotated) against the outputs of
    transformers' q_norm and k_norm modules, layer by layer."""
    _, hf, ours = made[name]
    ids = prompt(20, seed=7)
    seen = {}
    handles = [getattr(layer.self_attn, f"{x}_norm").register_forward_hook(
        lambda module, args, out, key=(i, x): seen.__setitem__(key, out[0].transpose(0, 1).numpy()))
        for i, layer in enumerate(hf.model.layers) for x in "qk"]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = ours.run_with_cache(ids, names="blocks.*.attn.*")
    for (i, x), theirs in seen.items():
        mine = cache[f"blocks.{i}.attn.{x}_normed"]
        assert mine.shape == theirs.shape == ((ours.config.n_head if x == "q" else ours.config.n_kv_head), 20,
                                              ours.config.d_head)  # fmt: skip
        assert np.abs(mine - theirs).max() <= checks.allowed(theirs)
        # normalised: each head's root mean square is its gains' (here near 1 + noise), not the projection's
        assert not np.allclose(mine, cache[f"blocks.{i}.attn.{x}"], atol=1e-3)


def test_trace_and_count_name_the_new_stages_in_their_place(made):
    from conftest import run_cli

    directory = made["bias-window-from-layer-1"][0]
    trace = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert trace.returncode == 0, trace.stderr
    names = [line.split()[0] for line in trace.stdout.splitlines() if line.startswith("blocks.0.")]
    assert names[names.index("blocks.0.attn.v") + 1 : names.index("blocks.0.attn.q_rot")] == [
        "blocks.0.attn.q_normed", "blocks.0.attn.k_normed"]  # fmt: skip
    count = run_cli("count", "--model", str(directory), "--tokens", "30")
    assert count.returncode == 0, count.stderr
    assert "the 3 blocks are of 2 kinds: full_attention, sliding_attention" in count.stdout
    assert "q_norm       q = RMSNorm_q(q)  (each head over its dh numbers, gains [dh])" in count.stdout


def test_a_bfloat16_checkpoint_reads_as_transformers_reads_it(tmp_path):
    hf = checks.save_random(tmp_path, transformers_config("tied-gqa"), seed=9, spread=0.3, dtype=torch.bfloat16)
    assert checks.logits_at_every_position(load_model(tmp_path), hf, prompt(40, seed=8)) <= 1
