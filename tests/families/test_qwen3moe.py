"""Qwen3-MoE's quirks against transformers (what every family owes runs in test_conformance.py, on the same models):
which layers are dense as transformers builds them, the router's, the experts' and the dense MLP's captures, the
ledger with dense and sparse layers, the parameters (total and active) and the presets, the commands, and the
options refused in config.json.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    transformers_parameters,
)

from minitransformer import load_model  # noqa: E402
from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.qwen3moe.config import PRESETS, Qwen3MoeConfig  # noqa: E402
from minitransformer.families.qwen3moe.family import ARCHITECTURE  # noqa: E402

formulas = ARCHITECTURE.formulas  # the closed forms, the parts' (families/parts/)
FAMILY = "qwen3_moe"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


def sparse(hf) -> list[bool]:
    """Which of transformers' layers have experts (a Qwen3MoeSparseMoeBlock), as its own modules say."""
    return [type(layer.mlp).__name__.endswith("SparseMoeBlock") for layer in hf.model.layers]


@pytest.mark.parametrize("name", CONFIGS)
def test_which_layers_have_experts_is_as_transformers_built_them(made, name):
    _, ours, hf = made(name)
    assert ours.config.family == "qwen3_moe" and ours.config.n_experts == CONFIGS[name]["num_experts"]
    assert [kind == "sparse_moe" for kind in ours.config.layer_types] == sparse(hf)


@pytest.mark.parametrize("name", ["e6_k2_mlp_only_tied", "e8_k3_step2_window_norm"])
def test_the_router_the_experts_and_the_dense_mlp_are_captured_as_transformers_computes_them(made, name):
    _, ours, hf = made(name)
    ids = prompt(name, 24, seed=6)
    _, cache = ours.run_with_cache(ids)
    seen = {}
    handles = [layer.mlp.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out[0].numpy()))
               for i, layer in enumerate(hf.model.layers)]  # fmt: skip
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_router_logits=True)
    finally:
        for handle in handles:
            handle.remove()
    c = ours.config
    k, F = c.top_k, c.d_ff
    layers = [i for i, is_sparse in enumerate(sparse(hf)) if is_sparse]
    assert len(out.router_logits) == len(layers) == c.n_layer - len(c.dense_layers)
    for i, router_logits in zip(layers, out.router_logits):
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.router_logits"], router_logits.numpy(), atol=1e-5)
        top, chosen = torch.topk(torch.softmax(router_logits.float(), -1), k, dim=-1)
        assert (cache[f"blocks.{i}.moe.chosen"] == chosen.numpy()).all()
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.top_probs"], top.numpy(), atol=1e-6)
        if c.norm_topk_prob:
            np.testing.assert_allclose(cache[f"blocks.{i}.moe.gates"], (top / top.sum(-1, keepdim=True)).numpy(),
                                       atol=1e-6)  # fmt: skip
        else:
            assert f"blocks.{i}.moe.gates" not in cache  # the top probabilities are the gates as they are
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.out"], seen[i], atol=1e-4)
        gate_up = hf.model.layers[i].mlp.experts.gate_up_proj.detach().numpy()  # [E, 2F, D]: gate rows first
        h, gates = cache[f"blocks.{i}.ln_2"], cache[f"blocks.{i}.moe.expert_gate"].reshape(len(ids), k, F)
        for token in (0, 7, 23):
            for slot in range(k):
                np.testing.assert_allclose(gates[token, slot], h[token] @ gate_up[chosen[token, slot], :F].T, atol=1e-4)
    for i in c.dense_layers:  # the dense MLP of intermediate_size
        assert f"blocks.{i}.moe.router_logits" not in cache
        assert cache[f"blocks.{i}.mlp.gate"].shape == (len(ids), c.dense_inner)
        np.testing.assert_allclose(cache[f"blocks.{i}.mlp.down"], seen[i], atol=1e-4)


@pytest.mark.parametrize("name", CONFIGS)
def test_the_ledger_of_dense_and_sparse_layers(made, name):
    _, ours, _ = made(name)
    phase = Phase("prefill", 0, PROMPT, PROMPT)
    _, cache = ours.run_with_cache(prompt(name, PROMPT, seed=7), phase=phase, names="blocks.*.moe.chosen")
    c = ours.config
    D, F, Fd, E, k, T = c.n_embd, c.d_ff, c.dense_inner, c.n_experts, c.top_k, PROMPT
    for i in range(c.n_layer):
        ops = {r.op for r in phase.layer_records(i)}
        attention = sum(phase.find(op, i).macs for op in ("q", "k", "v", "scores", "mix", "out"))
        layer = sum(r.macs for r in phase.layer_records(i))
        if i in c.dense_layers:
            assert not ops & {"router", "expert.gate"} and {"mlp.gate", "mlp.up", "mlp.down"} <= ops
            assert (phase.find("mlp.down", i).dot_products, phase.find("mlp.down", i).dot_length) == (T * D, Fd)
            assert layer == attention + T * 3 * D * Fd
            continue
        assert not ops & {"mlp.gate", "mlp.up", "mlp.down"}
        loads = np.bincount(cache[f"blocks.{i}.moe.chosen"].ravel(), minlength=E)  # the router's choice
        for op, length, width in (("expert.gate", D, F), ("expert.up", D, F), ("expert.down", F, D)):
            record = phase.find(op, i)
            assert [p.tokens for p in record.breakdown] == loads.tolist()
            assert [p.macs for p in record.breakdown] == (loads * width * length).tolist()
            assert record.macs == T * k * width * length  # whatever the router chose
        router = phase.find("router", i)
        assert (router.dot_products, router.dot_length) == (T * E, D)
        assert layer == attention + T * D * E + T * k * 3 * D * F
        assert layer - attention == T * (formulas.weight_macs_per_position(c, i) - 2 * D * c.n_head * c.d_head
                                         - 2 * D * c.n_kv_head * c.d_head)  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    _, ours, hf = made(name)
    from minitransformer.verbs.params import parameters

    total = transformers_parameters(hf_config(name))
    c = ours.config
    assert parameters(c).total == formulas.parameters(c) == total
    # active: transformers' total without the experts one token's pass does not read (E - k of E in each sparse layer)
    experts = sum(layer.mlp.experts.gate_up_proj.numel() + layer.mlp.experts.down_proj.numel()
                  for layer, is_sparse in zip(hf.model.layers, sparse(hf)) if is_sparse)  # fmt: skip
    assert formulas.active_parameters(c) == total - experts * (c.n_experts - c.top_k) // c.n_experts
    assert parameters(c).active == formulas.active_parameters(c)


# Qwen/Qwen3-30B-A3B: the total; its card says "30.5B" in all and "3.3B activated" (ours: 3,353,032,704).
# Qwen/Qwen3-235B-A22B: its card says "235B" and "22B activated" (ours: 235,093,634,560 and 22,190,763,520).
# Both counts take the embedding and the head whole, as Mixtral's do; the cards round them.
EXPECTED = {"qwen3-30b-a3b": (30_532_122_624, 3_353_032_704), "qwen3-235b-a22b": (235_093_634_560, 22_190_763_520)}
CARDS = {"qwen3-30b-a3b": (30.5e9, 3.3e9), "qwen3-235b-a22b": (235e9, 22e9)}


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_total_equals_transformers_count_of_the_same_config_on_the_meta_device(preset):
    c = PRESETS[preset]
    hf = transformers.Qwen3MoeConfig(vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.dense_inner,
                                     moe_intermediate_size=c.n_inner, num_hidden_layers=c.n_layer,
                                     num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head, head_dim=c.d_head,
                                     num_experts=c.n_experts, num_experts_per_tok=c.top_k,
                                     norm_topk_prob=c.norm_topk_prob, max_position_embeddings=c.n_positions,
                                     tie_word_embeddings=c.tie_word_embeddings)  # fmt: skip
    assert formulas.parameters(c) == transformers_parameters(hf)
    assert (formulas.parameters(c), formulas.active_parameters(c)) == EXPECTED[preset]
    total, active = CARDS[preset]
    assert (
        abs(formulas.parameters(c) - total) / total < 0.002
        and abs(formulas.active_parameters(c) - active) / active < 0.02
    )


def test_the_presets_read_back_from_their_config_json_as_qwen_spells_it():
    # the keys of Qwen/Qwen3-30B-A3B's config.json that shape the model (max_window_layers and sliding_window are
    # there too, unread by transformers' Qwen3-MoE)
    hf = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
          "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
          "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
          "mlp_only_layers": [], "max_position_embeddings": 40960, "vocab_size": 151936, "rms_norm_eps": 1e-6,
          "rope_theta": 1000000.0, "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": None,
          "max_window_layers": 48, "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645,
          "torch_dtype": "bfloat16"}  # fmt: skip
    assert Qwen3MoeConfig.from_hf_dict(hf) == PRESETS["qwen3-30b-a3b"]
    hf |= {
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "moe_intermediate_size": 1536,
        "num_hidden_layers": 94,
        "num_attention_heads": 64,
        "max_window_layers": 94,
    }  # Qwen/Qwen3-235B-A22B's
    assert Qwen3MoeConfig.from_hf_dict(hf) == PRESETS["qwen3-235b-a22b"]


def test_params_says_total_and_active_on_screen_and_in_json():
    result = run_cli("params", "--preset", "qwen3-30b-a3b", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["total"], doc["active"]) == EXPECTED["qwen3-30b-a3b"]
    assert (
        doc["kinds"]["expert_gate"] == doc["kinds"]["expert_up"] == doc["kinds"]["expert_down"] == 48 * 128 * 2048 * 768
    )


@pytest.mark.parametrize(
    "only, step, layers",
    [([], 1, 4), ([0, 3], 1, 4), ([], 2, 5), ([1], 3, 6), ([7], 1, 3), ([], 5, 4)],
)  # fmt: skip
def test_which_layers_are_dense_as_transformers_builds_them(only, step, layers):
    hf = transformers.Qwen3MoeConfig(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=layers,
                                     num_attention_heads=2, num_key_value_heads=2, moe_intermediate_size=8,
                                     num_experts=4, num_experts_per_tok=2, mlp_only_layers=only,
                                     decoder_sparse_step=step)  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    ours = Qwen3MoeConfig.from_hf_dict(hf.to_dict())
    assert [kind == "sparse_moe" for kind in ours.layer_types] == sparse(model)
    assert formulas.parameters(ours) == sum(p.numel() for p in model.parameters())


def test_generate_count_and_trace_commands_run_on_a_qwen3_moe(made):
    directory, _, _ = made("e6_k2_mlp_only_tied")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    load = generated.stdout.split("Expert load")[1].splitlines()[1:3]  # a line per sparse layer: 6 experts' tokens
    assert [line.split(":")[0].split() for line in load] == [["layer", "0"], ["layer", "2"]]
    assert all(sum(map(int, line.split(":")[1].split()[:6])) == (3 + 4) * 2 for line in load)  # 7 tokens fed, 2 each
    counted = run_cli("count", "--model", str(directory), "--tokens", "20")
    assert counted.returncode == 0, counted.stderr
    assert "dense_mlp (1)" in counted.stdout and "sparse_moe (2)" in counted.stdout
    # the decode step's attention against the weights: the first layer's, and the sum over layers of both kinds
    from minitransformer.verbs.count import decode_at

    c = load_model(directory).config
    step = decode_at(c, 21)  # the comparison of a 20-token count: the decode step after it, at context 21
    a = step.attention_vs_weights()
    row = next(line for line in counted.stdout.splitlines() if line.lstrip().startswith("3 layers"))
    assert row.split()[2:4] == [f"{a.all_attention:,}", f"{a.all_weights - a.outside:,}"]
    assert (
        a.all_weights - a.outside == sum(formulas.weight_macs_per_position(c, i) for i in range(c.n_layer))
        and a.all_weights - a.outside != 3 * a.weights
    )
    # a row for each kind of layer: its layers, and its attention against its own products with weights
    assert (
        "each sparse_moe layer (2; t = 21)" in counted.stdout and "each dense_mlp layer (1; t = 21)" in counted.stdout
    )
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3", "--layers", "all")
    assert traced.returncode == 0, traced.stderr
    for name in ("moe.router_logits", "moe.chosen", "moe.top_probs", "moe.expert_gate", "moe.expert_down", "moe.out"):
        assert f"blocks.0.{name}" in traced.stdout and f"blocks.1.{name}" not in traced.stdout
    assert "blocks.1.mlp.gate" in traced.stdout and "blocks.0.mlp.gate " not in traced.stdout
    assert "    experts  0: " in traced.stdout


@pytest.mark.parametrize(
    "key, value, message",
    [("num_experts", 0, "num_experts=0"), ("decoder_sparse_step", 0, "decoder_sparse_step"),
     ("mlp_only_layers", "1", "mlp_only_layers"), ("partial_rotary_factor", 0.5, "partial_rotary_factor"),
     ("rope_parameters", {"rope_type": "dynamic", "factor": 2.0}, "dynamic"), ("head_dim", None, "head_dim"),
     ("dtype", "float8_e4m3fn", "dtype"), ("num_experts_per_tok", 5, "num_experts_per_tok=5 exceeds num_experts=4"),
     ("norm_topk_prob", "true", "norm_topk_prob"), ("num_experts", -1, "num_experts must be"),
     ("moe_intermediate_size", 0, "moe_intermediate_size"), ("intermediate_size", "x", "intermediate_size"),
     ("num_experts_per_tok", 0, "num_experts_per_tok must be")],
)  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value, message):
    hf = {"model_type": "qwen3_moe", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 50, "num_experts": 4,
          "num_experts_per_tok": 2, key: value}  # fmt: skip
    with pytest.raises(UserError, match=message):
        Qwen3MoeConfig.from_hf_dict(hf)


def test_defaults_are_transformers_defaults():
    ours = Qwen3MoeConfig.from_hf_dict({"model_type": "qwen3_moe"})
    theirs = transformers.Qwen3MoeConfig()
    assert (ours.n_experts, ours.top_k, ours.norm_topk_prob, ours.d_ff, ours.dense_inner, ours.rope_theta,
            ours.n_kv_head, ours.n_positions, ours.norm_eps, ours.n_layer, ours.n_embd, ours.vocab_size,
            ours.d_head, ours.sliding_window, ours.dense_layers) == (
        theirs.num_experts, theirs.num_experts_per_tok, theirs.norm_topk_prob, theirs.moe_intermediate_size,
        theirs.intermediate_size, theirs.rope_parameters["rope_theta"], theirs.num_key_value_heads,
        theirs.max_position_embeddings, theirs.rms_norm_eps, theirs.num_hidden_layers, theirs.hidden_size,
        theirs.vocab_size, theirs.hidden_size // theirs.num_attention_heads, theirs.sliding_window, ())  # fmt: skip


def test_count_s_note_on_the_experts_reads_a_sparse_layer_where_layer_0_is_dense(made):
    from minitransformer.verbs.count import count_generation
    from minitransformer.views.count_report import experts_lines

    _, ours, _ = made("e8_k3_step2_window_norm")
    c = ours.config
    assert c.layer_types[0] == "dense_mlp"
    lines = "\n".join(experts_lines(count_generation(c, 20, 1, routing="worst")))
    per_token = 3 * c.n_embd * c.d_ff  # one expert's MACs per token: gate, up and down
    assert f"= 20 x 3 x {per_token:,} = {20 * 3 * per_token:,}, whichever" in lines
    assert "tokens per expert in every layer with experts: 20 20 20 0 0 0 0 0" in lines
    # the arithmetic intensity has the products of both kinds of layer, each once
    from minitransformer.verbs.memory import intensity_rows

    ops = [row["op"] for row in intensity_rows(count_generation(c, 20, 2), 10)]
    assert ops == ["q", "k", "v", "scores", "mix", "out", "mlp.gate", "mlp.up", "mlp.down", "router", "expert.gate",
                   "expert.up", "expert.down", "logits"]  # fmt: skip


def test_a_pad_token_s_expert_work_is_counted_as_padding_and_stays_in_its_own_row(made):
    from minitransformer.engine.ledger import padding_of
    from minitransformer.verbs.generate import left_padded

    name = "e6_k2_mlp_only_tied"
    _, ours, _ = made(name)
    rows = [prompt(name, 9, seed=8), prompt(name, 4, seed=9)]
    ids, pads = left_padded(rows, 0)
    phase = Phase("prefill", 0, 9, 9, batch=2, pads=tuple(int(p) for p in pads), finished=(False, False))
    logits = ours.run(ids, all_positions=True, pads=pads, phase=phase)
    np.testing.assert_allclose(logits[1, 5:], ours.logits(rows[1]), atol=1e-4)  # the pads' experts reach no real row
    c = ours.config
    D, F, Fd, k = c.n_embd, c.d_ff, c.dense_inner, c.top_k
    for i in range(c.n_layer):
        if i in c.dense_layers:
            assert padding_of(phase.find("mlp.gate", i), list(pads), 9) == (5 * Fd, 5 * Fd * D)
            continue
        gate, down = phase.find("expert.gate", i), phase.find("expert.down", i)
        assert sum(p.tokens for p in gate.breakdown) == 2 * 9 * k  # the 5 pad tokens were routed and computed too
        assert padding_of(gate, list(pads), 9) == (5 * k * F, 5 * k * F * D)
        assert padding_of(down, list(pads), 9) == (5 * k * D, 5 * k * D * F)
        assert padding_of(phase.find("router", i), list(pads), 9) == (5 * c.n_experts, 5 * c.n_experts * D)


def test_the_activation_peak_is_that_of_the_widest_kind_of_layer_whichever_comes_first():
    from minitransformer.verbs.count import count_generation
    from minitransformer.verbs.memory import memory_dict

    # layer 0 has experts of 8; layer 1 a dense MLP of 400, whose [T, 400] stages are the largest of the pass
    c = Qwen3MoeConfig(n_layer=2, n_head=2, n_kv_head=2, n_embd=16, n_inner=8, dense_inner=400, vocab_size=50, n_experts=4,
                       top_k=2, layer_types=("sparse_moe", "dense_mlp"))  # fmt: skip
    activations = memory_dict(count_generation(c, 20, 2), 10)["activations"]
    assert activations["prefill"]["stage"] == activations["decode"]["stage"] == "mlp.act"
    assert activations["prefill"]["bytes"] == 4 * (20 * 16 + 20 * 20 + 3 * 20 * 400)  # x, the mask, g u act(g)
