"""OLMo 2's quirks against transformers (what every family owes runs in test_conformance.py, on the same models): the
config read as transformers reads it, the captures of the new norms (q_norm and k_norm on the whole projections, the
norms on the branches' outputs) against transformers' modules, trace and count naming them, and a bfloat16
checkpoint.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402
from conformance_configs import FAMILIES  # noqa: E402

from minitransformer import load_model  # noqa: E402

V = 151  # the configs' vocabulary
FAMILY = "olmo2"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
transformers_config = SPEC.hf_config


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, V, n).tolist()  # no 0: generate reads it as padding


@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_reads_as_transformers_reads_it(name, made):
    _, ours, hf = made(name)
    c, attention = ours.config, hf.model.layers[0].self_attn
    assert (c.n_layer, c.n_head, c.n_kv_head) == (hf.config.num_hidden_layers, hf.config.num_attention_heads,
                                                  hf.config.num_key_value_heads)  # fmt: skip
    assert c.d_head == attention.head_dim and c.qkv_bias == c.o_bias == (attention.q_proj.bias is not None)
    assert ours.params.layers[0].self_attn.q_norm.weight.shape == (c.n_head * c.d_head,)


@pytest.mark.parametrize("name", ["mha-yarn", "gqa-bias-head-dim"])
def test_the_new_norms_captured_are_transformers_own(name, made):
    """attn.q_normed and attn.k_normed ([T, H*dh] and [T, Hkv*dh], before the split), attn.normed and mlp.normed (the
    branches' outputs, normalised before the add) against the outputs of transformers' q_norm, k_norm,
    post_attention_layernorm and post_feedforward_layernorm, layer by layer."""
    _, ours, hf = made(name)
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

    directory = made("gqa-bias-head-dim")[0]
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
