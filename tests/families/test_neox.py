"""GPT-NeoX's (Pythia's) quirks against transformers' GPTNeoXForCausalLM (what every family owes runs in
test_conformance.py, on the same models): the checkpoints' dtypes, why the float64 reference exists, every preset's
published total, the captures of the split and the partial rotary, config keys old and new, the options refused,
and the commands showing the partial rotary and the parallel residual.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from minitransformer import UserError, load_model

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402  # needs torch and transformers
from conformance_configs import FAMILIES  # noqa: E402

from minitransformer.verbs import formulas  # noqa: E402

FAMILY = "neox"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt


@cache
def prompt(name: str, length: int = PROMPT) -> list[int]:
    vocab = CONFIGS[name]["vocab_size"]
    return np.random.default_rng(len(name)).integers(0, vocab, length).tolist()


def test_the_checkpoints_hold_the_dtypes_they_were_saved_in(made):
    from safetensors import safe_open

    for name, options in CONFIGS.items():
        with safe_open(str(made(name)[0] / "model.safetensors"), framework="pt") as f:
            assert f.get_tensor("gpt_neox.embed_in.weight").dtype == getattr(torch, options.get("saved", "float32"))


def test_transformers_float64_gpt_neox_keeps_its_rotary_tables_in_float32(made):
    """Why the reference exists: unpatched, transformers' float64 model is further from our float64 pass than 1e-9."""
    directory, _, _ = made("pythia-like")
    ours = load_model(directory, dtype="float64")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float64).eval()
    ids = prompt("pythia-like", 150)
    with torch.no_grad():
        logits = theirs(torch.tensor([ids])).logits[0].numpy()
    assert float(np.abs(ours.logits(ids) - logits).max()) / max(1.0, float(np.abs(logits).max())) > 1e-9


@pytest.mark.parametrize("name", ["pythia-like", "serial-half-rotary"])
def test_the_closed_form_is_more_than_the_weights_products_by_hand(name, made):
    _, ours, _ = made(name)
    macs = formulas.generation_macs(ours.config, 20, 6)  # = a real run's (the conformance suite)
    # The closed form, by hand for this config: per position and layer 4 D^2 + 2 D F of weights.
    c = ours.config
    assert macs > 26 * c.n_layer * (4 * c.n_embd**2 + 2 * c.n_embd * c.d_ff)


# Published totals of the Pythia suite (the EleutherAI/pythia README's table) and GPT-NeoX-20B.
PUBLISHED = {
    "pythia-70m": 70_426_624, "pythia-160m": 162_322_944, "pythia-410m": 405_334_016, "pythia-1b": 1_011_781_632,
    "pythia-1.4b": 1_414_647_808, "pythia-2.8b": 2_775_208_960, "pythia-6.9b": 6_857_302_016,
    "pythia-12b": 11_846_072_320, "gpt-neox-20b": 20_554_567_680,
}  # fmt: skip


@pytest.mark.parametrize("name", PUBLISHED)
def test_every_preset_has_transformers_count_of_its_config_and_its_published_total(name):
    from minitransformer.families.table import PRESETS
    from minitransformer.verbs import formulas
    from minitransformer.verbs.params import parameters

    c = PRESETS[name]
    theirs = checks.transformers_parameters(transformers.GPTNeoXConfig(
        hidden_size=c.n_embd, intermediate_size=c.d_ff, num_hidden_layers=c.n_layer, num_attention_heads=c.n_head,
        vocab_size=c.vocab_size, max_position_embeddings=c.n_positions, rotary_pct=c.rotary_pct,
        use_parallel_residual=c.use_parallel_residual, tie_word_embeddings=c.tie_word_embeddings))  # fmt: skip
    assert parameters(c).total == formulas.parameters(c) == theirs == PUBLISHED[name]


# transformers' submodules, whose outputs forward hooks see, and our captures of the same numbers.
SUBMODULES = {"input_layernorm": "ln_1", "attention.query_key_value": "attn.qkv", "attention.dense": "attn.out",
              "post_attention_layernorm": "ln_2", "mlp.dense_h_to_4h": "mlp.up", "mlp.act": "mlp.act",
              "mlp.dense_4h_to_h": "mlp.down", "": "resid_post"}  # fmt: skip


@pytest.mark.parametrize("name", ["pythia-like", "serial-half-rotary", "odd-share-serial"])
def test_captures_of_every_submodule_the_split_and_the_partial_rotary_equal_transformers(name, made):
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    _, ours, hf = made(name)
    ids = prompt(name, 24)
    seen: dict[str, np.ndarray] = {}
    handles = []
    for i, layer in enumerate(hf.gpt_neox.layers):
        for theirs, mine in SUBMODULES.items():
            module = layer.get_submodule(theirs) if theirs else layer

            def hook(module, args, out, key=f"blocks.{i}.{mine}"):
                seen[key] = (out[0] if isinstance(out, tuple) else out)[0].numpy()

            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():  # eager attention (save_random): it returns the attention weights
            out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    _, cache_ = ours.run_with_cache(ids)
    assert len(seen) == len(SUBMODULES) * ours.config.n_layer
    for i in range(ours.config.n_layer):
        seen[f"blocks.{i}.attn.weights"] = out.attentions[i][0].numpy()  # [H, T, t]
    seen["embed"], seen["ln_f"] = out.hidden_states[0][0].numpy(), out.hidden_states[-1][0].numpy()
    ratios = {k: checks.worst(cache_[k], v) for k, v in seen.items()}
    assert max(ratios.values()) <= 1, ratios

    c = ours.config
    H, dh, r, T = c.n_head, c.d_head, c.rotary_dims, len(ids)
    cos, sin = hf.gpt_neox.rotary_emb(torch.zeros(1, T, dh), torch.arange(T)[None])
    assert cos.shape[-1] == r  # transformers' tables are as wide as the share we rotate
    for i in range(c.n_layer):
        # The split: head h's q, k, v are rows [3 dh h, 3 dh h + dh), the next dh, the next dh of qkv's output.
        qkv = cache_[f"blocks.{i}.attn.qkv"].reshape(T, H, 3, dh)
        for j, x in enumerate("qkv"):
            assert np.array_equal(cache_[f"blocks.{i}.attn.{x}"], qkv[:, :, j].swapaxes(0, 1))
        q, k = (torch.from_numpy(np.ascontiguousarray(cache_[f"blocks.{i}.attn.{x}"]))[None] for x in "qk")
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
        assert checks.worst(cache_[f"blocks.{i}.attn.q_rot"], q_rot[0]) <= 0.1
        assert checks.worst(cache_[f"blocks.{i}.attn.k_rot"], k_rot[0]) <= 0.1
        # Past the share, q and k pass through untouched; within it, they turned.
        assert np.array_equal(cache_[f"blocks.{i}.attn.q_rot"][..., r:], cache_[f"blocks.{i}.attn.q"][..., r:])
        assert (
            np.abs(cache_[f"blocks.{i}.attn.q_rot"][..., 1:, :r] - cache_[f"blocks.{i}.attn.q"][..., 1:, :r]).max()
            > 0.01
        )
        # The residual: parallel adds both branches to the block's input; serial adds the MLP to resid_mid.
        x = cache_["embed"] if i == 0 else cache_[f"blocks.{i - 1}.resid_post"]
        o, m = cache_[f"blocks.{i}.attn.out"], cache_[f"blocks.{i}.mlp.down"]
        if c.use_parallel_residual:
            assert f"blocks.{i}.resid_mid" not in cache_
            assert np.allclose(cache_[f"blocks.{i}.resid_post"], x + o + m, atol=1e-6)
        else:
            assert np.allclose(cache_[f"blocks.{i}.resid_mid"], x + o, atol=1e-6)
            assert np.allclose(cache_[f"blocks.{i}.resid_post"], cache_[f"blocks.{i}.resid_mid"] + m, atol=1e-6)


def test_old_style_and_new_style_config_keys_read_as_transformers_reads_them(made, tmp_path):
    """Pythia's hub config.json spells the rotary as rotary_pct and rotary_emb_base (and rope_scaling: null);
    transformers 5 writes rope_parameters, and reads it before the old keys. Both read as transformers reads them."""
    directory, _, _ = made("pythia-like")
    for case, change in {
        "old keys": {"rope_parameters": None, "rope_scaling": None, "rotary_pct": 0.5, "rotary_emb_base": 77},
        "rope_parameters wins": {"rotary_pct": 1.0, "rotary_emb_base": 5,
                                 "rope_parameters": {"rope_type": "default", "rope_theta": 300.0,
                                                     "partial_rotary_factor": 0.5}},
        "top-level rope_theta is not GPT-NeoX's": {"rope_parameters": None, "rope_theta": 5.0},
        "nor is a top-level partial_rotary_factor": {"rope_parameters": None, "partial_rotary_factor": 1.0},
        "rotary_pct fills what rope_parameters leaves out": {"rope_parameters": {"rope_type": "default"},
                                                              "rotary_pct": 0.5, "rotary_emb_base": 99},
    }.items():  # fmt: skip
        there = tmp_path / case.replace(" ", "-")
        there.mkdir()
        (there / "model.safetensors").symlink_to(directory / "model.safetensors")
        hf = json.loads((directory / "config.json").read_text()) | change
        (there / "config.json").write_text(json.dumps(hf))
        theirs = transformers.AutoModelForCausalLM.from_pretrained(there, dtype=torch.float32).eval()
        ids = prompt("pythia-like", 30)
        ratio = checks.logits_at_every_position(load_model(there), theirs, ids)
        assert ratio <= 1, (case, ratio)


@pytest.mark.parametrize("change, refused", [
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, r"rope type 'linear' is not supported"),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, r"rope type 'dynamic' is not supported"),
    ({"head_dim": 4}, r"config head_dim=4 .* is not supported"),
    ({"hidden_act": "gelu_accurate"}, r"hidden_act='gelu_accurate' is not supported"),
    ({"dtype": "float64"}, r"dtype='float64' is not supported"),
    ({"use_parallel_residual": "false"}, r"use_parallel_residual must be true or false"),
    ({"rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 1.5}}, r"partial_rotary_factor=1.5"),
    ({"num_attention_heads": 5}, r"hidden_size=32 is not a multiple of num_attention_heads=5"),
])  # fmt: skip
def test_options_that_change_inference_and_are_not_computed_are_refused_by_name(change, refused, made, tmp_path):
    directory, _, _ = made("pythia-like")
    hf = json.loads((directory / "config.json").read_text()) | change
    (tmp_path / "config.json").write_text(json.dumps(hf))
    (tmp_path / "model.safetensors").symlink_to(directory / "model.safetensors")
    with pytest.raises(UserError, match=refused):
        load_model(tmp_path)


def test_the_commands_show_the_partial_rotary_and_the_parallel_residual_in_their_place(made):
    directory, _, _ = made("pythia-like")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    assert "gpt_neox (GPT-NeoX family)" in generated.stdout
    counted = run_cli("count", "--model", str(directory), "--tokens", "20")
    assert counted.returncode == 0, counted.stderr
    rows = {line.split()[0]: line for line in counted.stdout.splitlines() if line.startswith("  ")}
    assert "RoPE on each head's first r = 2 of its 8 numbers; the other 6 pass through" in rows["rope"]
    assert rows["rope"].rstrip().endswith("-")  # no dot products
    assert "parallel: x + attn(ln1(x)) + mlp(ln2(x))" in rows["resid_post"] and rows["resid_post"].rstrip().endswith(
        "-"
    )
    assert "resid_mid" not in rows
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    assert "blocks.0.attn.q_rot" in traced.stdout and "no dot products (rotate)" in traced.stdout
    bad = run_cli("count", "--model", str(Path(directory) / "nowhere"), "--tokens", "20")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
