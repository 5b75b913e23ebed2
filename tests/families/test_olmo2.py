"""OLMo 2 against transformers' own random Olmo2ForCausalLM models (tests/family_checks.py): logits at every position
of a prompt past the row chunk, 30 greedy tokens with the KV cache, a left-padded batch, float64 against the float64
truth, validate, count = a real run = the closed form, the parameters on the meta device, and the captures of the new
stages (q_norm and k_norm on the whole projections, the norms on the branches' outputs) against transformers' modules.

The configs differ where OLMo 2 can: one key/value head per query head or grouped, biases or not, a head_dim given
outright (Olmo2Config has none; its attention reads one), tied or not, linear rope scaling.
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
CONFIGS = {
    "mha": dict(hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4),
    "gqa-bias-head-dim": dict(hidden_size=48, intermediate_size=64, num_hidden_layers=3, num_attention_heads=6,
                              num_key_value_heads=2, head_dim=12, attention_bias=True),
    "tied-linear-rope": dict(hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "linear", "rope_theta": 500_000.0, "factor": 2.0}),
}  # fmt: skip


def transformers_config(name: str):
    return transformers.Olmo2Config(vocab_size=V, max_position_embeddings=400, rms_norm_eps=1e-6, eos_token_id=None,
                                    pad_token_id=None, **CONFIGS[name])  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """name -> (directory, transformers' model, ours), made once for the module."""
    models = {}
    for seed, name in enumerate(CONFIGS):
        directory = tmp_path_factory.mktemp(name)
        hf = checks.save_random(directory, transformers_config(name), seed=seed, spread=0.5)
        models[name] = directory, hf, load_model(directory)
    return models


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, V, n).tolist()  # no 0: generate reads it as padding


@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_reads_as_transformers_reads_it(name, made):
    _, hf, ours = made[name]
    c, attention = ours.config, hf.model.layers[0].self_attn
    assert (c.n_layer, c.n_head, c.n_kv_head) == (hf.config.num_hidden_layers, hf.config.num_attention_heads,
                                                  hf.config.num_key_value_heads)  # fmt: skip
    assert c.d_head == attention.head_dim and c.qkv_bias == c.o_bias == (attention.q_proj.bias is not None)
    assert ours.params.layers[0].self_attn.q_norm.weight.shape == (c.n_head * c.d_head,)


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_at_every_position_past_the_row_chunk(name, made):
    _, hf, ours = made[name]
    assert checks.logits_at_every_position(ours, hf, prompt(150, seed=1)) <= 1


@pytest.mark.parametrize("name", CONFIGS)
def test_30_greedy_tokens_with_the_kv_cache_are_transformers_generate(name, made):
    _, hf, ours = made[name]
    tokens = checks.greedy(ours, hf, prompt(40, seed=2))
    assert len(set(tokens)) > 2  # the weights spread: not one token repeated


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
    assert validate(made["gqa-bias-head-dim"][2], steps=3, out=out) is True, out.getvalue()
    assert out.getvalue().rstrip().endswith("all OK")
    assert "OLMo 2 computes RMSNorm, its q and k norms included" in out.getvalue()


@pytest.mark.parametrize("name", CONFIGS)
def test_count_equals_a_real_run_and_the_closed_form(name, made):
    _, _, ours = made[name]
    assert checks.count_equals_a_real_run_and_the_closed_form(ours, 30, 4) > 0


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_are_transformers_count_on_the_meta_device(name, made):
    from minitransformer.verbs.params import parameters

    _, _, ours = made[name]
    expected = checks.transformers_parameters(transformers_config(name))
    assert parameters(ours.config).total == ours.architecture.formulas.parameters(ours.config) == expected


@pytest.mark.parametrize("name", ["mha", "gqa-bias-head-dim"])
def test_the_new_norms_captured_are_transformers_own(name, made):
    """attn.q_normed and attn.k_normed ([T, H*dh] and [T, Hkv*dh], before the split), attn.normed and mlp.normed (the
    branches' outputs, normalised before the add) against the outputs of transformers' q_norm, k_norm,
    post_attention_layernorm and post_feedforward_layernorm, layer by layer."""
    _, hf, ours = made[name]
    ids = prompt(20, seed=7)
    modules = {"attn.q_normed": "self_attn.q_norm", "attn.k_normed": "self_attn.k_norm",
               "attn.normed": "post_attention_layernorm", "mlp.normed": "post_feedforward_layernorm"}  # fmt: skip
    seen, handles = {}, []
    for i, layer in enumerate(hf.model.layers):
        for capture, module in modules.items():
            keep = lambda m, args, out, key=f"blocks.{i}.{capture}": seen.__setitem__(key, out[0].numpy())  # noqa: E731
            handles.append(layer.get_submodule(module).register_forward_hook(keep))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = ours.run_with_cache(ids)
    assert len(seen) == 4 * ours.config.n_layer
    for key, theirs in seen.items():
        assert cache[key].shape == theirs.shape
        assert np.abs(cache[key] - theirs).max() <= checks.allowed(theirs), key
    c = ours.config
    assert cache["blocks.0.attn.q_normed"].shape == (20, c.n_head * c.d_head)
    assert cache["blocks.0.attn.k_normed"].shape == (20, c.n_kv_head * c.d_head)


def test_trace_and_count_name_the_new_stages_in_their_place(made):
    from conftest import run_cli

    directory = made["gqa-bias-head-dim"][0]
    trace = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert trace.returncode == 0, trace.stderr
    names = [line.split()[0] for line in trace.stdout.splitlines() if line.startswith("blocks.0.")]
    assert "blocks.0.ln_1" not in names and "blocks.0.ln_2" not in names
    at = names.index
    assert (
        at("blocks.0.attn.v_proj") < at("blocks.0.attn.q_normed") < at("blocks.0.attn.k_normed") < at("blocks.0.attn.q")
    )
    assert at("blocks.0.attn.out") < at("blocks.0.attn.normed") < at("blocks.0.resid_mid")
    assert at("blocks.0.mlp.down") < at("blocks.0.mlp.normed") < at("blocks.0.resid_post")
    count = run_cli("count", "--model", str(directory), "--tokens", "30")
    assert count.returncode == 0, count.stderr
    assert "post_mlp_norm   m = RMSNorm_mlp(m)  (the branch, before the add)" in count.stdout


def test_a_bfloat16_checkpoint_reads_as_transformers_reads_it(tmp_path):
    hf = checks.save_random(
        tmp_path, transformers_config("gqa-bias-head-dim"), seed=9, spread=0.5, dtype=torch.bfloat16
    )
    assert checks.logits_at_every_position(load_model(tmp_path), hf, prompt(40, seed=8)) <= 1
