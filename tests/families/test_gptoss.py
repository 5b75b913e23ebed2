"""gpt-oss's quirks against transformers (what every family owes runs in test_conformance.py, on the same models): the
captures of the sinks, the router and the experts, the clamps, each expert's share in the ledger, the sliding and
full layers counted apart, YaRN's frequencies, the parameters (total and active) and the presets, the commands, and
the options refused in config.json.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES, YARN  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    transformers_parameters,
)
from published_configs import GPT_OSS_20B  # noqa: E402

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.gpt_oss.config import PRESETS, GptOssConfig  # noqa: E402
from minitransformer.families.gpt_oss.family import ARCHITECTURE  # noqa: E402
from minitransformer.families.rotary import attention_factor, inverse_frequencies  # noqa: E402

formulas = ARCHITECTURE.formulas  # the closed forms, the parts' (families/parts/)
FAMILY = "gpt_oss"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


def test_the_sinks_the_router_and_the_experts_are_captured_as_transformers_computes_them(made):
    _, ours, hf = made("e4_k2_yarn_alternating")
    ids = prompt("e4_k2_yarn_alternating", 40, seed=6)  # past the window of 24
    _, cache = ours.run_with_cache(ids)
    seen = {}
    handles = [layer.mlp.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out[0].numpy()))
               for i, layer in enumerate(hf.model.layers)]  # fmt: skip
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_router_logits=True, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    c = ours.config
    k, F, T = c.top_k, c.d_ff, len(ids)
    for i, layer in enumerate(hf.model.layers):
        # the sinks: each head's logit as the last column of its scores, and the weights that are left for the keys
        sinks = layer.self_attn.sinks.detach().numpy()
        with_sinks = cache[f"blocks.{i}.attn.with_sinks"]
        assert with_sinks.shape == (c.n_head, T, T + 1)
        np.testing.assert_array_equal(with_sinks[..., -1], np.broadcast_to(sinks[:, None], (c.n_head, T)))
        np.testing.assert_array_equal(with_sinks[..., :-1], cache[f"blocks.{i}.attn.scores"])
        weights = cache[f"blocks.{i}.attn.weights"]
        np.testing.assert_allclose(weights, out.attentions[i][0].numpy(), atol=1e-5)
        assert (weights.sum(-1) < 1).all()  # the sink took its share of every row
        # the router: logits with its bias, the k largest chosen, a softmax over them
        router_logits = out.router_logits[i]
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.router_logits"], router_logits.numpy(), atol=1e-5)
        top, chosen = torch.topk(router_logits, k, dim=-1)
        assert (cache[f"blocks.{i}.moe.chosen"] == chosen.numpy()).all()
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.gates"], torch.softmax(top, -1).numpy(), atol=1e-5)
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.out"], seen[i][0], atol=1e-4)
        # each token's fused gate and up in its k experts, in the order chosen: h W_gu_e + b_gu_e
        gate_up = layer.mlp.experts.gate_up_proj.detach().numpy()  # [E, D, 2F]: [in, out], gate and up interleaved
        bias = layer.mlp.experts.gate_up_proj_bias.detach().numpy()
        h, gu = cache[f"blocks.{i}.ln_2"], cache[f"blocks.{i}.moe.expert_gate_up"].reshape(T, k, 2 * F)
        act = cache[f"blocks.{i}.moe.expert_mul"].reshape(T, k, F)
        for token in (0, 17, 39):
            for slot in range(k):
                e = chosen[token, slot]
                expected = h[token] @ gate_up[e] + bias[e]
                np.testing.assert_allclose(gu[token, slot], expected, atol=1e-4)
                theirs = layer.mlp.experts._apply_gate(torch.from_numpy(expected)).numpy()
                np.testing.assert_allclose(act[token, slot], theirs, atol=1e-4)


def test_the_clamps_bite_where_swiglu_limit_is_low(made):
    _, ours, _ = made("e8_k1_tied_no_bias_clamped")
    _, cache = ours.run_with_cache(prompt("e8_k1_tied_no_bias_clamped", 30, seed=7))
    gu, clamped = cache["blocks.0.moe.expert_gate_up"], cache["blocks.0.moe.expert_clamped"]
    assert (gu[:, ::2] > 1).any() and (clamped[:, ::2] <= 1).all()  # gates capped at the limit from above
    assert (gu[:, 1::2] < -1).any() and (np.abs(clamped[:, 1::2]) <= 1).all()  # ups clipped on both sides
    np.testing.assert_array_equal(clamped[:, ::2][gu[:, ::2] < -1], gu[:, ::2][gu[:, ::2] < -1])  # not from below


@pytest.mark.parametrize("name", CONFIGS)
def test_the_ledger_says_what_each_expert_computed(made, name):
    _, ours, _ = made(name)
    from minitransformer.engine.ledger import Phase

    phase = Phase("prefill", 0, PROMPT, PROMPT)
    _, cache = ours.run_with_cache(prompt(name, PROMPT, seed=7), phase=phase, names="blocks.*.moe.chosen")
    c = ours.config
    D, F, E, k, T = c.n_embd, c.d_ff, c.n_experts, c.top_k, PROMPT
    for i in range(c.n_layer):
        closed = formulas.products(c, T, T, layer=i)
        for record in phase.layer_records(i):
            if record.kind == "matmul":
                assert (record.dot_products, record.dot_length) == closed[record.op], (i, record.op)
            else:  # the sinks among them
                assert record.dot_products == record.macs == 0, (i, record.op)
        loads = np.bincount(cache[f"blocks.{i}.moe.chosen"].ravel(), minlength=E)  # the router's choice
        for op, length, width in (("expert.gate_up", D, 2 * F), ("expert.down", F, D)):
            record = phase.find(op, i)
            assert [p.tokens for p in record.breakdown] == loads.tolist()
            assert [p.macs for p in record.breakdown] == (loads * width * length).tolist()
            assert record.macs == T * k * width * length  # whatever the router chose
        assert phase.find("sinks", i).out_shape[-1] == T + 1


def test_count_groups_the_sliding_and_the_full_layers(made):
    directory, ours, _ = made("e4_k2_yarn_alternating")
    counted = run_cli("count", "--model", str(directory), "--tokens", "40")
    assert counted.returncode == 0, counted.stderr
    assert "sliding_attention (2)" in counted.stdout and "full_attention (1)" in counted.stdout
    assert "sinks" in counted.stdout and "expert.gate_up" in counted.stdout
    # the full layer keeps every position, the two sliding ones their window of 24: (40 + 2 x 24) x 128 B (K and V,
    # 2 key/value heads of 8, float32), against 3 x 40 x 128 B
    assert "KV cache after 40 positions (float32): 11.3 KB, against 15.4 KB had every layer held all" in counted.stdout


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    _, ours, hf = made(name)
    from minitransformer.verbs.params import parameters

    total = transformers_parameters(hf_config(name))
    c = ours.config
    assert parameters(c).total == formulas.parameters(c) == total
    # active: transformers' total without the experts (and their biases) one token's pass does not read
    experts = sum(p.numel() for layer in hf.model.layers for p in layer.mlp.experts.parameters())
    assert formulas.active_parameters(c) == total - experts * (c.n_experts - c.top_k) // c.n_experts
    assert parameters(c).active == formulas.active_parameters(c)


def hf_of_preset(c: GptOssConfig):
    return transformers.GptOssConfig(
        vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.n_inner, num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head, head_dim=c.head_dim,
        num_local_experts=c.n_experts, num_experts_per_tok=c.top_k, sliding_window=c.sliding_window,
        max_position_embeddings=c.n_positions, tie_word_embeddings=c.tie_word_embeddings,
    )  # fmt: skip


# The total for gpt-oss-20b; OpenAI's model card: 20.9B total, 3.6B active; 116.8B and 5.1B for the 120b.
# The cards count the unembedding among the active parameters but not the embedding (V D = 579,133,440): ours count
# both whole (as Mixtral's card does), so ours are the cards' plus V D.
CARDS = {"gpt-oss-20b": (20_914_757_184, 3_608_307_264), "gpt-oss-120b": (116_829_156_672, 5_132_849_472)}


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_total_equals_transformers_count_and_the_model_cards(preset):
    c = PRESETS[preset]
    assert formulas.parameters(c) == transformers_parameters(hf_of_preset(c)) == CARDS[preset][0]
    embedding = c.vocab_size * c.n_embd
    assert formulas.active_parameters(c) - embedding == CARDS[preset][1]
    assert round(CARDS[preset][1] / 1e8) == {"gpt-oss-20b": 36, "gpt-oss-120b": 51}[preset]  # the cards' 3.6B, 5.1B


def test_presets_read_as_the_published_config_json_says():
    published = GPT_OSS_20B  # openai/gpt-oss-20b's config.json, less its quantization_config (refused below)
    assert GptOssConfig.from_hf_dict(published, name="gpt-oss-20b") == PRESETS["gpt-oss-20b"]
    with pytest.raises(UserError, match="quantization_config \\(mxfp4"):
        GptOssConfig.from_hf_dict({**published, "quantization_config": {"quant_method": "mxfp4"}})


def test_params_says_total_and_active():
    result = run_cli("params", "--preset", "gpt-oss-20b", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    c = PRESETS["gpt-oss-20b"]
    assert (doc["total"], doc["active"]) == (20_914_757_184, formulas.active_parameters(c))
    assert doc["kinds"]["attention_sinks"] == 24 * 64 and doc["kinds"]["expert_down"] == 24 * 32 * 2880 * 2880
    shown = run_cli("params", "--preset", "gpt-oss-120b")
    assert shown.returncode == 0, shown.stderr
    assert "116,829,156,672 parameters (117 G)" in shown.stdout and "5,711,982,912 of them active" in shown.stdout
    assert "layers.{i}.mlp.experts.gate_up_proj" in shown.stdout and "[128, 2880, 5760]" in shown.stdout
    assert "experts.{e}" not in shown.stdout  # the experts are fused in 3-D tensors: no tensor per expert


@pytest.mark.parametrize(
    "rope",
    [YARN, {**YARN, "truncate": True}, {**YARN, "factor": 32.0, "original_max_position_embeddings": 4096,
     "rope_theta": 150000.0}, {**YARN, "attention_factor": 0.8}, {**YARN, "mscale": 1.0, "mscale_all_dim": 0.5},
     {**YARN, "beta_fast": 4.0, "beta_slow": 2.0}, {**YARN, "factor": 1.0}],
)  # fmt: skip
def test_yarn_frequencies_and_attention_factor_equal_transformers(rope):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf = transformers.GptOssConfig(num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_size=32, num_hidden_layers=2,
                                   max_position_embeddings=256, rope_parameters=dict(rope))  # fmt: skip
    theirs, factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    ours = GptOssConfig.from_hf_dict(hf.to_dict())
    np.testing.assert_allclose(inverse_frequencies(ours.rope(), np.dtype(np.float32)), theirs.numpy(), rtol=2e-7)
    np.testing.assert_allclose(inverse_frequencies(ours.rope(), np.dtype(np.float64)), theirs.numpy(), rtol=1e-6)
    assert attention_factor(ours.rope()) == pytest.approx(factor, rel=1e-12)


def test_generate_and_trace_commands_run_on_a_gpt_oss(made):
    directory, _, _ = made("e4_k2_yarn_alternating")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    assert "Expert load" in generated.stdout
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    for name in ("attn.with_sinks", "attn.weights", "moe.router_logits", "moe.chosen", "moe.gates",
                 "moe.expert_gate_up", "moe.expert_clamped", "moe.expert_down", "moe.out"):  # fmt: skip
        assert f"blocks.0.{name}" in traced.stdout


BASE = {"model_type": "gpt_oss", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 50}  # fmt: skip


@pytest.mark.parametrize(
    "key, value, message",
    [("quantization_config", {"quant_method": "mxfp4"}, "quantization_config"),
     ("partial_rotary_factor", 0.5, "partial_rotary_factor"),
     ("rope_parameters", {"rope_type": "dynamic", "factor": 2.0}, "dynamic"),
     ("rope_parameters", {"rope_type": "yarn", "original_max_position_embeddings": 64}, "factor"),
     ("layer_types", ["full_attention", "chunked_attention"], "chunked_attention"),
     ("layer_types", ["full_attention"], "layer_types"),
     ("num_experts_per_tok", 200, "num_experts_per_tok"),
     ("dtype", "int8", "dtype")],
)  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value, message):
    with pytest.raises(UserError, match=message):
        GptOssConfig.from_hf_dict({**BASE, key: value})


def test_defaults_are_transformers_defaults():
    ours = GptOssConfig.from_hf_dict({"model_type": "gpt_oss"})
    theirs = transformers.GptOssConfig()
    assert (ours.n_layer, ours.n_experts, ours.top_k, ours.n_embd, ours.n_inner, ours.head_dim, ours.n_head,
            ours.n_kv_head, ours.vocab_size, ours.n_positions, ours.norm_eps, ours.sliding_window,
            ours.swiglu_alpha, ours.swiglu_limit, ours.qkv_bias, ours.tie_word_embeddings) == (
        theirs.num_hidden_layers, theirs.num_local_experts, theirs.num_experts_per_tok, theirs.hidden_size,
        theirs.intermediate_size, theirs.head_dim, theirs.num_attention_heads, theirs.num_key_value_heads,
        theirs.vocab_size, theirs.max_position_embeddings, theirs.rms_norm_eps, theirs.sliding_window,
        theirs.swiglu_alpha, theirs.swiglu_limit, theirs.attention_bias, theirs.tie_word_embeddings)  # fmt: skip
    assert list(ours.layer_types) == theirs.layer_types
    rope = dict(ours.rope_scaling or ())
    assert {**rope, "rope_theta": ours.rope_theta} == theirs.rope_parameters
