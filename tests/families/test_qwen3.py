"""Qwen3's quirks against transformers (what every family owes runs in test_conformance.py, on the same models): the
config read as transformers reads it (its windows per layer), the captures of q_norm and k_norm against transformers'
own modules, trace and count naming the new stages, and a bfloat16 checkpoint.
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
FAMILY = "qwen3"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
transformers_config = SPEC.hf_config


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, V, n).tolist()  # no 0: generate reads it as padding


@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_reads_as_transformers_reads_it(name, made):
    _, ours, hf = made(name)
    c = ours.config
    assert (c.n_layer, c.n_head, c.n_kv_head, c.d_head) == (hf.config.num_hidden_layers, hf.config.num_attention_heads,
                                                            hf.config.num_key_value_heads, hf.config.head_dim)  # fmt: skip
    windows = [layer.self_attn.sliding_window for layer in hf.model.layers]
    assert [c.layer_window(i) for i in range(c.n_layer)] == windows
    assert c.layer_types == tuple(hf.config.layer_types)


@pytest.mark.parametrize("name", ["tied-gqa", "bias-window-from-layer-1"])
def test_the_q_and_k_norms_captured_are_transformers_q_norm_and_k_norm(name, made):
    """attn.q_normed and attn.k_normed (each head RMS-normalised over dh, not yet rotated) against the outputs of
    transformers' q_norm and k_norm modules, layer by layer."""
    _, ours, hf = made(name)
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

    directory = made("bias-window-from-layer-1")[0]
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


def test_a_yarn_key_transformers_does_not_read_is_not_read_here_either(tmp_path):
    """DeepSeek-R1-0528-Qwen3-8B's config.json gives its YaRN an "attn_factor" (0.878...), a key transformers does not
    read (its is attention_factor): transformers' cos and sin are multiplied by mscale(factor) = 0.1 ln 4 + 1 instead.
    So are ours, and the logits past the original context are transformers'; a command says so once, in a note."""
    import json
    from math import log

    from conftest import run_cli
    from minitransformer.families import rotary

    checks.save_random(tmp_path, transformers_config("mha-window-everywhere-yarn"), seed=4, spread=0.3)
    config = json.loads((tmp_path / "config.json").read_text())
    rope = config["rope_parameters"]
    rope["attn_factor"] = rope.pop("attention_factor")
    (tmp_path / "config.json").write_text(json.dumps(config))
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32, attn_implementation="eager")
    ours = load_model(tmp_path)
    assert rotary.attention_factor(ours.config.rope(0)) == pytest.approx(0.1 * log(4.0) + 1, rel=1e-12)
    assert rotary.attention_factor(ours.config.rope(0)) == pytest.approx(
        hf.model.rotary_emb.attention_scaling, rel=1e-7
    )
    assert checks.logits_at_every_position(ours, hf.eval(), prompt(150, seed=5)) <= 1
    generated = run_cli("generate", "--model", str(tmp_path), "--ids", "1,2,3", "--max-new-tokens", "2")
    assert generated.returncode == 0 and generated.stderr == (
        "minitransformer: note: the config's YaRN has attn_factor, a key transformers does not read, nor do we: its "
        f"attention factor (attention_factor, or from factor and mscale) scales cos and sin by {0.1 * log(4) + 1:.6g}\n"
    ), generated.stderr
