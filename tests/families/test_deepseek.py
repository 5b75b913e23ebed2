"""DeepSeek-V3's quirks against transformers (what every family owes runs in test_conformance.py, on the same models,
their routers' correction biases moved so that the bias changes the choice): the router's and MLA's captures, MLA's
products and the absorbed form's closed form, the parameters (total and active), the preset's 671,026,404,352, YaRN's
softmax scale and frequencies, the commands, and the options refused in config.json.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    save_random,
    transformers_parameters,
)

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.deepseek_v3.config import PRESETS, DeepseekConfig  # noqa: E402
from minitransformer.families.deepseek_v3.family import ARCHITECTURE, ATTENTION  # noqa: E402

formulas = ARCHITECTURE.formulas  # the closed forms, the parts' (families/parts/)
FAMILY = "deepseek_v3"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


def test_the_router_s_choice_and_gates_and_the_mla_latent_are_captured_as_transformers_computes_them(made):
    _, ours, hf = made("lora_groups_dense")
    c = ours.config
    ids = prompt("lora_groups_dense", 24, seed=6)
    _, cache = ours.run_with_cache(ids)
    seen: dict = {}
    handles = []
    for i, layer in enumerate(hf.model.layers):
        handles.append(layer.mlp.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(("mlp", i), out)))
        if c.is_moe(i):
            handles.append(
                layer.mlp.gate.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(("gate", i), out))
            )
        handles.append(layer.self_attn.kv_a_layernorm.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(("latent", i), out)))  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    chose_otherwise = 0
    for i in range(c.n_layer):
        np.testing.assert_allclose(cache[f"blocks.{i}.attn.latent_norm"], seen[("latent", i)][0].numpy(), atol=1e-5)
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.out" if c.is_moe(i) else f"blocks.{i}.mlp.down"],
                                   seen[("mlp", i)][0].numpy(), atol=1e-4)  # fmt: skip
        if not c.is_moe(i):
            continue
        logits, weights, indices = (x.numpy() for x in seen[("gate", i)])
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.router_logits"], logits, atol=1e-5)
        chosen, gates = cache[f"blocks.{i}.moe.chosen"], cache[f"blocks.{i}.moe.gates"]
        for token in range(len(ids)):  # the same experts with the same weights (in whatever order topk gave them)
            theirs = dict(zip(indices[token].tolist(), weights[token].tolist()))
            ours_ = dict(zip(chosen[token].tolist(), gates[token].tolist()))
            assert theirs.keys() == ours_.keys()
            np.testing.assert_allclose([ours_[e] for e in theirs], list(theirs.values()), atol=1e-6)
        # the correction bias chose: without it some token's choice differs
        scores = cache[f"blocks.{i}.moe.scores"]
        unbiased = np.argsort(-scores, axis=-1)[:, : c.top_k]
        chose_otherwise += sum(set(a) != set(b) for a, b in zip(unbiased.tolist(), chosen.tolist()))
    assert chose_otherwise > 0


@pytest.mark.parametrize("name", CONFIGS)
def test_mla_s_products_are_as_written(made, name):
    _, ours, _ = made(name)
    from minitransformer.engine.ledger import Phase

    c = ours.config
    phase = Phase("decode", 1, 1, 31)  # one decode step attending to 31 positions, after 30 in the cache
    cache = ours.new_cache()
    ours.run(prompt(name, 30, seed=7), cache=cache)
    ours.run([1], cache=cache, phase=phase)
    for i in range(c.n_layer):
        expected = formulas.products(c, 1, 31, layer=i)
        for op, (dots, length) in expected.items():
            if op == "logits":
                continue
            record = phase.find(op, i)
            assert (record.dot_products, record.dot_length) == (dots, length), (op, i)
        attention = sum(phase.find(op, i).macs for op in ("kv_b", "scores", "mix"))
        assert attention == ATTENTION.computed_attention_macs(c, 1, 31)
        layer = sum(r.macs for r in phase.layer_records(i))
        assert layer == formulas.weight_macs_per_position(c, i) + 31 * ATTENTION.attention_macs_per_pair(c)


def test_the_absorbed_form_s_closed_form_equals_its_products_computed_in_numpy(made):
    """The absorbed form computes the same attention output: checked here in NumPy on a real layer's weights, with
    its MACs counted from the shapes of the products it makes."""
    _, ours, hf = made("lora_groups_dense")
    c = ours.config
    H, dn, dv, dr, dc = c.n_head, c.qk_nope_head_dim, c.v_head_dim, c.qk_rope_head_dim, c.kv_lora_rank
    ids = prompt("lora_groups_dense", 9, seed=8)
    _, cache = ours.run_with_cache(ids)
    w = hf.model.layers[0].self_attn.kv_b_proj.weight.detach().numpy().reshape(H, dn + dv, dc)
    w_uk, w_uv = w[:, :dn], w[:, dn:]  # [H, dn, dc], [H, dv, dc]
    q, latent = cache["blocks.0.attn.q_full"], cache["blocks.0.attn.latent_norm"]  # [H, T, dh], [T, dc]
    k_r, weights = cache["blocks.0.attn.k_rot"], cache["blocks.0.attn.weights"]  # [1, T, dr], [H, T, t]
    macs = 0
    q_c = np.einsum("htn,hnc->htc", q[..., :dn], w_uk)
    macs += q_c.size * dn
    scores = np.einsum("htc,sc->hts", q_c, latent) + np.einsum("htr,sr->hts", q[..., dn:], k_r[0])
    macs += scores.size * (dc + dr)
    np.testing.assert_allclose(scores, np.einsum("htd,hsd->hts", q, cache["blocks.0.attn.keys"]), rtol=1e-4, atol=1e-4)
    mixed = np.einsum("hts,sc->htc", weights, latent)
    macs += mixed.size * len(ids)
    z = np.einsum("htc,hvc->htv", mixed, w_uv)
    macs += z.size * dc
    np.testing.assert_allclose(z, cache["blocks.0.attn.mix"], rtol=1e-4, atol=1e-4)
    assert macs == ATTENTION.absorbed_attention_macs(c, len(ids), len(ids))


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    _, ours, hf = made(name)
    from minitransformer.verbs.params import parameters

    total = transformers_parameters(hf_config(name))
    assert parameters(ours.config).total == formulas.parameters(ours.config) == total
    c = ours.config
    experts = sum(layer.mlp.experts.gate_up_proj.numel() + layer.mlp.experts.down_proj.numel()
                  for layer in hf.model.layers if hasattr(layer.mlp, "experts"))  # fmt: skip
    assert formulas.active_parameters(c) == total - experts * (c.n_experts - c.top_k) // c.n_experts
    assert parameters(c).active == formulas.active_parameters(c)


DEEPSEEK_V3_TOTAL = 671_026_404_352  # the issue's number: DeepSeek-V3 without its multi-token-prediction layer


def test_the_preset_s_total_equals_the_issue_s_and_transformers_count_of_the_same_config_on_the_meta_device():
    c = PRESETS["deepseek-v3"]
    hf = transformers.DeepseekV3Config(
        vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.n_inner, moe_intermediate_size=c.moe_inner,
        num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_head,
        n_routed_experts=c.n_experts, num_experts_per_tok=c.top_k, n_shared_experts=c.n_shared_experts,
        n_group=c.n_group, topk_group=c.topk_group, first_k_dense_replace=c.first_k_dense, q_lora_rank=c.q_lora_rank,
        kv_lora_rank=c.kv_lora_rank, qk_rope_head_dim=c.qk_rope_head_dim, qk_nope_head_dim=c.qk_nope_head_dim,
        v_head_dim=c.v_head_dim, max_position_embeddings=c.n_positions, tie_word_embeddings=False,
        rope_parameters={**dict(c.rope_scaling or ()), "rope_theta": c.rope_theta})  # fmt: skip
    assert formulas.parameters(c) == transformers_parameters(hf) == DEEPSEEK_V3_TOTAL
    # active: 8 of 256 experts in each of 58 layers, the rest whole; the card says 37B
    assert formulas.active_parameters(c) == 37_552_282_624


def test_count_of_the_preset_says_what_mla_caches_and_the_absorbed_form():
    result = run_cli("count", "--preset", "deepseek-v3", "--tokens", "100")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "MLA's cache: 576 numbers a layer and position" in out and "against 40,960 for 128 heads" in out
    assert "K and V x 61 layers x 24,576 + 16,384 numbers (128 key/value heads of 192 and 128)" in out
    assert f"{ATTENTION.absorbed_attention_macs(PRESETS['deepseek-v3'], 100, 100):,} absorbed" in out
    assert "671,026,404,352 parameters" in out
    assert "Experts: each token's rows are computed by k = 8 of the E = 256 experts" in out  # layers 3..60's note
    assert all(line in out for line in formulas.count_notes(PRESETS["deepseek-v3"], 100, 1))  # the family's lines


def test_generate_count_and_trace_commands_run_on_a_deepseek(made):
    directory, _, _ = made("lora_groups_dense")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    counted = run_cli("count", "--model", str(directory), "--tokens", "20")
    assert counted.returncode == 0, counted.stderr
    assert "kv_b" in counted.stdout and "shared.down" in counted.stdout and "MLA's cache: 24 numbers" in counted.stdout
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    for name in ("attn.q_a", "attn.latent_norm", "attn.kv_b", "attn.k_rot", "moe.scores", "moe.chosen", "moe.gates",
                 "moe.shared_down", "moe.out"):  # fmt: skip
        assert f"blocks.2.{name}" in traced.stdout  # the last block, shown stage by stage
    assert "blocks.0.mlp.down" in traced.stdout  # the dense first layer


def test_a_rope_type_not_computed_is_refused_by_name_when_running_but_counts(tmp_path):
    import json

    hf = {"model_type": "deepseek_v3", "hidden_size": 16, "intermediate_size": 24, "moe_intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 50, "n_routed_experts": 4,
          "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1, "q_lora_rank": 8,
          "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 4,
          "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 10000.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}  # fmt: skip
    save_random(tmp_path, transformers.DeepseekV3Config(**{k: v for k, v in hf.items() if k != "model_type"}))
    assert json.loads((tmp_path / "config.json").read_text())["rope_parameters"]["rope_type"] == "llama3"
    counted = run_cli("count", "--model", str(tmp_path), "--tokens", "10")
    assert counted.returncode == 0, counted.stderr
    ran = run_cli("generate", "--model", str(tmp_path), "--ids", "1,2", "--max-new-tokens", "2")
    assert ran.returncode == 2 and "rope_type='llama3'" in ran.stderr and "Traceback" not in ran.stderr


def test_yarn_s_softmax_scale_is_transformers():
    hf = {"model_type": "deepseek_v3", "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
          "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "mscale_all_dim": 1.0,
                              "original_max_position_embeddings": 64}}  # fmt: skip
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

    theirs = DeepseekV3Attention(transformers.DeepseekV3Config(**{k: v for k, v in hf.items() if k != "model_type"}), 0)
    assert DeepseekConfig.from_hf_dict(hf).softmax_scale == pytest.approx(theirs.scaling, rel=1e-12)
    assert theirs.scaling != 8**-0.5


@pytest.mark.parametrize("key, value, match", [("attention_bias", True, "attention_bias"),
                                               ("quantization_config", {"quant_method": "fp8"}, "quantization_config"),
                                               ("partial_rotary_factor", 0.5, "partial_rotary_factor"),
                                               ("n_group", 3, "n_group"), ("topk_group", 9, "topk_group")])  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value, match):
    hf = {"model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4,
          "topk_group": 2, key: value}  # fmt: skip
    with pytest.raises(UserError, match=match):
        DeepseekConfig.from_hf_dict(hf)


def test_deepseek_defaults_are_transformers_defaults():
    ours = DeepseekConfig.from_hf_dict({"model_type": "deepseek_v3"})
    t = transformers.DeepseekV3Config()
    assert (ours.n_layer, ours.n_embd, ours.n_inner, ours.moe_inner, ours.n_head, ours.q_lora_rank, ours.kv_lora_rank,
            ours.qk_rope_head_dim, ours.qk_nope_head_dim, ours.v_head_dim, ours.n_experts, ours.top_k,
            ours.n_shared_experts, ours.n_group, ours.topk_group, ours.first_k_dense, ours.norm_topk_prob,
            ours.routed_scaling_factor, ours.rope_interleave, ours.n_positions, ours.norm_eps, ours.rope_theta,
            ours.vocab_size, ours.bos_token_id, ours.eos_token_id) == (
        t.num_hidden_layers, t.hidden_size, t.intermediate_size, t.moe_intermediate_size, t.num_attention_heads,
        t.q_lora_rank, t.kv_lora_rank, t.qk_rope_head_dim, t.qk_nope_head_dim, t.v_head_dim, t.n_routed_experts,
        t.num_experts_per_tok, t.n_shared_experts, t.n_group, t.topk_group, t.first_k_dense_replace,
        t.norm_topk_prob, t.routed_scaling_factor, t.rope_interleave, t.max_position_embeddings, t.rms_norm_eps,
        t.rope_parameters["rope_theta"], t.vocab_size, t.bos_token_id, t.eos_token_id)  # fmt: skip


def test_null_switches_read_as_transformers_reads_them():
    """transformers tests `if config.rope_interleave` and `if self.norm_topk_prob`: null is false, absent is true."""
    null = DeepseekConfig.from_hf_dict({"model_type": "deepseek_v3", "rope_interleave": None, "norm_topk_prob": None})
    absent = DeepseekConfig.from_hf_dict({"model_type": "deepseek_v3"})
    assert (null.rope_interleave, null.norm_topk_prob, absent.rope_interleave, absent.norm_topk_prob) == (
        False, False, True, True)  # fmt: skip
    assert DeepseekConfig.from_hf_dict({"model_type": "deepseek_v3", "num_hidden_layers": 2}).layer_types == (
        "dense", "dense")  # fmt: skip


def test_the_preset_s_yarn_frequencies_cos_sin_factor_and_softmax_scale_are_transformers():
    """DeepSeek-V3's YaRN (factor 40 over 4,096 positions), against transformers' own functions on its config."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    from minitransformer.families.rotary import attention_factor, inverse_frequencies

    c = PRESETS["deepseek-v3"]
    hf = transformers.DeepseekV3Config(
        max_position_embeddings=c.n_positions,
        rope_parameters={**dict(c.rope_scaling or ()), "rope_theta": c.rope_theta},
    )
    theirs, their_factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    ours, factor = inverse_frequencies(c.rope(), np.dtype(np.float32)), attention_factor(c.rope())
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6)
    assert not np.allclose(ours, 1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64), rtol=1e-3)  # YaRN moved them
    assert factor == pytest.approx(their_factor, rel=1e-12)
    assert c.softmax_scale == pytest.approx(yarn_apply_mscale(hf.rope_parameters, 192**-0.5), rel=1e-12)
