"""Qwen3.5's quirks against transformers (what every family owes runs in test_conformance.py, on the same models):
the states in the cache and the logits against transformers' after a prompt at and past chunk boundaries, after each
decode step and after a pass from the state, the recurrent form and the chunks, counts within one chunk,
the captures, the commands, a multimodal checkpoint read as its text model, the parameters (total and active), and
every option that changes inference refused.

transformers prints that the fast kernels (causal-conv1d, flash-linear-attention) are missing and runs its PyTorch
fallbacks, the reference followed here.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    count_equals_a_real_run_and_the_closed_form,
    logits_at_every_position,
    transformers_parameters,
    worst,
)

from minitransformer import load_model  # noqa: E402
from minitransformer.engine.kvcache import KeysValues, LayerCache, LayerState, State  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.qwen35.config import CHUNK, FULL, LINEAR, Qwen35Config  # noqa: E402

FAMILY = "qwen3_5"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


# Prompts at the delta rule's chunk boundaries (k C - 1, k C, k C + 1 for k = 1, 2: the last chunk one short, full, one
# over) and past two full chunks, and one of a single position (ours: the recurrent form; transformers: a padded
# chunk), shorter than the conv's kernel; then a pass that starts from a state, in two chunks (C + 1) or in one.
STEPPED = [("dense", n, 5) for n in (CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1, 2 * CHUNK)] + [
    ("dense", 2 * CHUNK + 1, CHUNK + 1), ("dense_bias_tied_yarn", 2 * CHUNK + 1, 5), ("moe", 2 * CHUNK, 3),
    ("dense_bias_tied_yarn", 1, 2)]  # fmt: skip


@pytest.mark.parametrize("name, n, then", STEPPED)
def test_the_state_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each Gated DeltaNet layer's conv state and [Hv, dk, dv] delta-rule state in our cache equal transformers'
    cache's, and each pass's logits transformers', after a prompt in chunks, after each of 3 decode steps (the
    recurrent form) and after a pass of several positions from the cache (chunks that start from the state)."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    linear = ours.config.layer_types.count(LINEAR)
    assert len(compared) == 5 * (1 + 2 * linear), compared  # 5 passes: logits, then conv and recurrent a layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))  # the whole table, each OK or NOT OK


def test_the_cache_holds_keys_for_full_layers_and_a_state_that_never_grows_for_the_others(made):
    """A full-attention layer's keys are transformers' (a DeltaNet layer's state: the test above); the cache's arrays
    are filled in place: nothing grew."""
    _, ours, hf = made("dense_bias_tied_yarn")
    ids = prompt("dense_bias_tied_yarn", 90, seed=6)
    cache = ours.new_cache(capacity=100)
    ours.run(ids, cache=cache)
    with torch.no_grad():
        theirs = hf(torch.tensor([ids]), use_cache=True).cache
    c = ours.config
    for i, kind in enumerate(c.layer_types):
        held = cache.layer(i)
        if kind == FULL:
            assert isinstance(held, LayerCache) and isinstance(c.layer_cache(i), KeysValues)
            np.testing.assert_allclose(held.keys[:, :90], theirs.layers[i].keys[0].numpy(), atol=2e-5)
        else:
            assert isinstance(held, LayerState) and isinstance(c.layer_cache(i), State)
    states = [held for held in cache.layers if isinstance(held, LayerState)]
    assert cache.nbytes == ours.new_cache(capacity=100).nbytes  # in place: nothing grew
    each = (c.linear_kernel - 1) * c.conv_channels + c.linear_value_heads * c.linear_key_dim * c.linear_value_dim
    assert len(states) == 3 and sum(h.nbytes for h in states) == 4 * 3 * each == 4 * 3 * (2 * 60 + 2 * 12 * 6)


def test_a_pass_that_stops_part_way_leaves_no_wrong_state_behind(made):
    """A refused pass wrote no layer's state (the capacity is checked before the DeltaNet layers run: the next pass on
    that cache was 5.2 off); a pass stopped by an error in a later layer spoils the cache, which is then refused in
    words, where a cache of keys and values alone, whose rows past its length are not read, stays usable."""
    _, ours, _ = made("dense")
    ids = prompt("dense", 7, seed=3)
    cache = ours.new_cache(capacity=5)
    with pytest.raises(UserError, match="this cache holds 5 positions and 7 are needed"):
        ours.run(ids, cache=cache)
    np.testing.assert_allclose(ours.run(ids[:3], cache=cache, all_positions=True), ours.logits(ids[:3]), atol=2e-5)
    last = max(i for i, kind in enumerate(ours.config.layer_types) if kind == FULL)  # after the DeltaNet layers
    with ours.add_hook(f"blocks.{last}.attn.out", lambda t, name: t[..., :1]):  # a wrong shape: refused in the pass
        with pytest.raises(UserError, match="keep the shape"):
            ours.run(ids[3:5], cache=cache)
    with pytest.raises(UserError, match="left half-written by a pass that stopped part way"):
        ours.run(ids[3:5], cache=cache)
    demo = load_model("demo")
    kv = demo.new_cache()
    demo.run([464, 3139], cache=kv)
    with demo.add_hook("blocks.3.attn.out", lambda t, name: t[..., :1]), pytest.raises(UserError):
        demo.run([286, 4881], cache=kv)
    with demo.add_hook("ln_f", lambda t, name: t[..., :1]), pytest.raises(UserError):  # stopped in the readout:
        demo.run([286, 4881], cache=kv)  # the positions were counted as written (a retry 2.6 off)
    assert kv.length == 2 and not kv.spoilt
    np.testing.assert_allclose(demo.run([286, 4881], cache=kv), demo.logits([464, 3139, 286, 4881])[-1:], atol=2e-5)


def test_the_recurrent_form_and_the_chunks_agree_and_a_state_never_grows(made):
    """The same positions, fed one at a time (the recurrent form) and as one prompt (chunks): the same logits; and
    the state arrays of a cache for 16 positions are those of a cache for 512."""
    _, ours, _ = made("moe")
    ids = prompt("moe", 75, seed=7)
    whole = ours.logits(ids)
    cache = ours.new_cache(capacity=75)
    steps = [ours.run(ids[i : i + 1], cache=cache, all_positions=True) for i in range(75)]
    assert worst(np.concatenate(steps), whole) <= 1
    small, large = ours.new_cache(capacity=16), ours.new_cache(capacity=512)
    for a, b in zip(small.layers, large.layers):
        if isinstance(a, LayerState):
            assert a.nbytes == b.nbytes > 0 and not a["recurrent"].any()


@pytest.mark.parametrize("name", CONFIGS)
def test_count_equals_a_real_run_and_the_closed_form_within_one_chunk(made, name):
    _, ours, _ = made(name)
    count_equals_a_real_run_and_the_closed_form(ours, 5, 3)  # a prompt shorter than a chunk (the suite's is longer)


def test_the_captures_are_transformers_layers_outputs_and_a_hook_takes_effect(made):
    _, ours, hf = made("dense")
    ids = prompt("dense", 70, seed=8)
    seen = {}
    handles = [layer.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out[0].numpy()))
               for i, layer in enumerate(hf.model.layers)]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = ours.run_with_cache(ids)
    for i in range(ours.config.n_layer):
        np.testing.assert_allclose(cache[f"blocks.{i}.resid_post"], seen[i], atol=2e-4)
    c = ours.config
    assert cache["blocks.0.linear_attn.conv"].shape == (c.conv_channels, 70, 1)
    assert cache["blocks.0.linear_attn.read"].shape == (2, 2, 2, 64, 8)  # Hk Gv N C dv: the chunks side by side
    assert cache["blocks.0.linear_attn.solved"].shape == (2, 2, 2, 64, 16)
    assert "blocks.3.attn.gate" in cache and "blocks.3.linear_attn.read" not in cache
    # a hook that zeroes every write strength beta leaves the states empty: the DeltaNet layers add nothing
    handle = ours.add_hook("blocks.*.linear_attn.beta", lambda t, name: np.zeros_like(t))
    try:
        _, hooked = ours.run_with_cache(ids, names="blocks.*.linear_attn.*")
    finally:
        handle.remove()
    assert not hooked["blocks.0.linear_attn.state"].any() and hooked["blocks.0.linear_attn.core_out"].max() == 0
    # a stage computed chunk by chunk is shown after the last chunk: a replacement cannot take effect
    handle = ours.add_hook("blocks.0.linear_attn.read", lambda t, name: t + 1)
    try:
        with pytest.raises(UserError, match="piece by piece"):
            ours.run_with_cache(ids)
    finally:
        handle.remove()


def test_generate_count_trace_and_html_run_on_a_qwen35(made, tmp_path):
    directory, _, _ = made("moe")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "4", "--html",
                        str(tmp_path / "g.html"))  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    assert "Recurrent form:" in generated.stdout and "linear.conv" in generated.stdout
    counted = run_cli("count", "--model", str(directory), "--tokens", "100", "--new-tokens", "2", "--html",
                      str(tmp_path / "c.html"))  # fmt: skip
    assert counted.returncode == 0, counted.stderr
    for line in (
        "linear_attention (layer 0; 3 layers like it):",
        "full_attention (layer 3; 1 layer like it):",
        "each linear_attention layer (3; a state: the same at any t)",
        "Recurrent form: the scans",
        "  state        conv [3, 40] + recurrent [3, 8, 8] numbers x 3 linear_attention layers",
    ):
        assert line in counted.stdout, line
    page = (tmp_path / "c.html").read_text()
    assert "linear_attention" in page and "full_attention" in page and "delta.solve" in page
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3", "--layers", "all")
    assert traced.returncode == 0, traced.stderr
    assert "blocks.0.linear_attn.solved" in traced.stdout and "blocks.3.attn.gated" in traced.stdout


def test_a_multimodal_checkpoint_is_read_as_its_text_model(tmp_path):
    """Qwen3_5ForConditionalGeneration's checkpoint (model.language_model..., model.visual..., the published layout):
    its text model, as transformers' AutoModelForCausalLM reads it."""
    text = {k: v for k, v in CONFIGS["dense"].items() if k != "seed"}
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=4,
                  spatial_merge_size=1, temporal_patch_size=1, num_position_embeddings=16)  # fmt: skip
    torch.manual_seed(2)
    whole = transformers.Qwen3_5ForConditionalGeneration(transformers.Qwen3_5Config(text_config=text,
                                                                                    vision_config=vision))  # fmt: skip
    with torch.no_grad():
        for param in whole.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    whole.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert ours.config.model_type == "qwen3_5" and "read as its text model" in ours.config.checkpoint_kind
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    assert type(hf).__name__ == "Qwen3_5ForCausalLM"
    assert logits_at_every_position(ours, hf, prompt("dense", 70, seed=9)) <= 1


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    from minitransformer.families.qwen35.family import ARCHITECTURE
    from minitransformer.verbs.params import parameters

    formulas = ARCHITECTURE.formulas

    _, ours, hf = made(name)
    c = ours.config
    total = transformers_parameters(hf.config)
    assert parameters(c).total == formulas.parameters(c) == total
    if c.is_moe:
        E, k, _, _ = c.experts
        experts = sum(layer.mlp.experts.gate_up_proj.numel() + layer.mlp.experts.down_proj.numel()
                      for layer in hf.model.layers)  # fmt: skip
        assert parameters(c).active == formulas.active_parameters(c) == total - experts * (E - k) // E


def test_defaults_are_transformers_defaults():
    for ours, theirs in ((Qwen35Config.from_hf_dict({"model_type": "qwen3_5_text"}), transformers.Qwen3_5TextConfig()),
                         (Qwen35Config.from_hf_dict({"model_type": "qwen3_5_moe_text"}),
                          transformers.Qwen3_5MoeTextConfig())):  # fmt: skip
        assert (ours.vocab_size, ours.n_embd, ours.n_layer, ours.n_head, ours.n_kv_head, ours.head_dim,
                ours.linear_kernel, ours.linear_key_heads, ours.linear_value_heads, ours.linear_key_dim,
                ours.linear_value_dim, ours.n_positions, ours.norm_eps, ours.rope_theta,
                ours.partial_rotary_factor, ours.layer_types, ours.tie_word_embeddings) == (
            theirs.vocab_size, theirs.hidden_size, theirs.num_hidden_layers, theirs.num_attention_heads,
            theirs.num_key_value_heads, theirs.head_dim, theirs.linear_conv_kernel_dim, theirs.linear_num_key_heads,
            theirs.linear_num_value_heads, theirs.linear_key_head_dim, theirs.linear_value_head_dim,
            theirs.max_position_embeddings, theirs.rms_norm_eps, theirs.rope_parameters["rope_theta"],
            theirs.rope_parameters["partial_rotary_factor"], tuple(theirs.layer_types),
            theirs.tie_word_embeddings)  # fmt: skip
        if ours.is_moe:
            assert ours.experts == (theirs.num_experts, theirs.num_experts_per_tok, theirs.moe_intermediate_size,
                                    theirs.shared_expert_intermediate_size)  # fmt: skip
        else:
            assert ours.n_inner == theirs.intermediate_size


BASE = {"model_type": "qwen3_5_text", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 4,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 4, "linear_value_head_dim": 4, "vocab_size": 50}  # fmt: skip


@pytest.mark.parametrize(
    "changes, message",
    [({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "rope type 'linear'"),
     ({"attn_output_gate": False}, "attn_output_gate=false"),
     ({"layer_types": [LINEAR, "sliding_attention", LINEAR, FULL]}, "layer_types"),
     ({"layer_types": [LINEAR, FULL]}, "layer_types must name 4 layers"),
     ({"linear_num_value_heads": 3}, "linear_num_value_heads=3 is not a multiple"),
     ({"partial_rotary_factor": 0.1}, "partial_rotary_factor=0.1"),
     ({"rope_parameters": {"rope_theta": 10.0, "mrope_section": [1, 1], "beta": 2}}, "rope_parameters beta"),
     ({"dtype": "float8_e4m3fn"}, "dtype"), ({"hidden_act": "swiglu"}, "hidden_act='swiglu'"),
     ({"full_attention_interval": 0}, "full_attention_interval"), ({"num_attention_heads": 3, "num_key_value_heads": 2}, "multiple"),
     ({"model_type": "qwen3_5_moe_text", "num_experts": 0}, "num_experts=0"),
     ({"model_type": "qwen3_5_moe_text", "num_experts": 4, "num_experts_per_tok": 5}, "num_experts_per_tok=5"),
     ({"model_type": "qwen3_5", "text_config": "x"}, "text_config must be an object"),
     ({"model_type": "qwen3_5", "text_config": {}, "quantization_config": {"quant_method": "fp8"}},
      r"quantization_config \(fp8\) is not supported")],
)  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(changes, message):
    with pytest.raises(UserError, match=message):
        Qwen35Config.from_hf_dict(BASE | changes)


def test_what_transformers_reads_and_ignores_is_read_and_ignored():
    """mrope's sections (a text token is one position on every axis), the multi-token-prediction layer's count, and
    the options transformers' Qwen3.5 does not read, as its own configs carry them."""
    c = Qwen35Config.from_hf_dict(BASE | {"rope_parameters": {"rope_theta": 1e7, "mrope_section": [1, 1, 0],
                                                               "mrope_interleaved": True},
                                          "partial_rotary_factor": 0.5, "mtp_num_hidden_layers": 1,
                                          "mamba_ssm_dtype": "float32", "mlp_only_layers": [],
                                          "attn_output_gate": True})  # fmt: skip
    assert (c.rope_theta, c.partial_rotary_factor, c.rotary_dims) == (1e7, 0.5, 4)
    assert c.layer_types == (LINEAR, LINEAR, LINEAR, FULL)
