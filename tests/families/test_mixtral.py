"""Mixtral's quirks against transformers (what every family owes runs in test_conformance.py, on the same models):
the router's captures, each expert's share in the ledger, the parameters (total and active), the presets, the
commands, the options refused in config.json, a pad token's expert work, and hooks on expert stages.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    transformers_parameters,
)

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.mixtral.config import PRESETS, MixtralConfig  # noqa: E402
from minitransformer.families.mixtral.family import ARCHITECTURE  # noqa: E402

formulas = ARCHITECTURE.formulas  # the closed forms, the parts' (families/parts/)
FAMILY = "mixtral"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


def test_the_router_s_logits_choices_and_gates_and_the_experts_output_are_captured_as_transformers_computes_them(
    made,
):
    _, ours, hf = made("e4_k2_window")
    ids = prompt("e4_k2_window", 24, seed=6)
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
    k, F = ours.config.top_k, ours.config.d_ff
    for i, router_logits in enumerate(out.router_logits):
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.router_logits"], router_logits.numpy(), atol=1e-5)
        top, chosen = torch.topk(torch.softmax(router_logits.float(), -1), k, dim=-1)
        assert (cache[f"blocks.{i}.moe.chosen"] == chosen.numpy()).all()
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.gates"], (top / top.sum(-1, keepdim=True)).numpy(), atol=1e-6)
        np.testing.assert_allclose(cache[f"blocks.{i}.moe.out"], seen[i], atol=1e-4)
        # Each token's gate products in its k experts, in the order chosen: h W1_e of the expert chosen there.
        gate_up = hf.model.layers[i].mlp.experts.gate_up_proj.detach().numpy()  # [E, 2F, D]: gate rows first
        h, gates = cache[f"blocks.{i}.ln_2"], cache[f"blocks.{i}.moe.expert_gate"].reshape(len(ids), k, F)
        for token in (0, 7, 23):
            for slot in range(k):
                expected = h[token] @ gate_up[chosen[token, slot], :F].T
                np.testing.assert_allclose(gates[token, slot], expected, atol=1e-4)


@pytest.mark.parametrize("name", CONFIGS)
def test_the_ledger_says_what_each_expert_computed(made, name):
    _, ours, _ = made(name)
    ids = prompt(name, PROMPT, seed=7)
    from minitransformer.engine.ledger import Phase

    phase = Phase("prefill", 0, PROMPT, PROMPT)
    _, cache = ours.run_with_cache(ids, phase=phase, names="blocks.*.moe.chosen")
    c = ours.config
    D, F, E, k, T = c.n_embd, c.d_ff, c.n_experts, c.top_k, PROMPT
    for i in range(c.n_layer):
        loads = np.bincount(cache[f"blocks.{i}.moe.chosen"].ravel(), minlength=E)  # the router's choice
        for op, length, width in (("expert.gate", D, F), ("expert.up", D, F), ("expert.down", F, D)):
            record = phase.find(op, i)
            assert [p.tokens for p in record.breakdown] == loads.tolist()
            assert [p.macs for p in record.breakdown] == (loads * width * length).tolist()
            assert record.macs == T * k * width * length  # whatever the router chose
        router = phase.find("router", i)
        assert (router.dot_products, router.dot_length) == (T * E, D)
        layer = sum(r.macs for r in phase.layer_records(i))
        attention = sum(phase.find(op, i).macs for op in ("q", "k", "v", "scores", "mix", "out"))
        assert layer == attention + T * D * E + T * k * 3 * D * F
    # counted from the config alone (balanced): the same records and totals, other rows per expert
    from minitransformer.verbs.count import count_generation

    counted = count_generation(c, PROMPT, 1).prefill.expand()
    moe = ("router", "expert.gate", "expert.up", "expert.down")  # (a watched run's attention is dense, not chunked)
    assert [r for r in counted.records if r.op in moe] == [r for r in phase.records if r.op in moe]
    assumed = [[p.tokens for p in r.breakdown] for r in counted.records if r.op == "expert.gate"]
    real = [[p.tokens for p in r.breakdown] for r in phase.records if r.op == "expert.gate"]
    assert assumed != real and all(sum(a) == sum(b) == T * k for a, b in zip(assumed, real))
    # as JSON: each expert product's breakdown
    op = next(o for o in phase.to_dict()["layers"][0]["ops"] if o["op"] == "expert.down")
    assert [p["tokens"] for p in op["breakdown"]] == np.bincount(cache["blocks.0.moe.chosen"].ravel(),
                                                                 minlength=E).tolist()  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_total_and_active_equal_transformers_count(made, name):
    _, ours, hf = made(name)
    from minitransformer.verbs.params import parameters

    total = transformers_parameters(hf_config(name))
    assert parameters(ours.config).total == formulas.parameters(ours.config) == total
    # active: transformers' total without the experts one token's pass does not read (E - k of E each layer)
    c = ours.config
    experts = sum(layer.mlp.experts.gate_up_proj.numel() + layer.mlp.experts.down_proj.numel()
                  for layer in hf.model.layers)  # fmt: skip
    assert formulas.active_parameters(c) == total - experts * (c.n_experts - c.top_k) // c.n_experts
    assert parameters(c).active == formulas.active_parameters(c)


MODEL_CARDS = {"mixtral-8x7b": (46_702_792_704, 12_879_925_248)}  # the numbers (Mistral: 46.7B, 12.9B active)


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_total_equals_transformers_count_of_the_same_config_on_the_meta_device(preset):
    c = PRESETS[preset]
    hf = transformers.MixtralConfig(vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.n_inner,
                                    num_hidden_layers=c.n_layer, num_attention_heads=c.n_head,
                                    num_key_value_heads=c.n_kv_head, num_local_experts=c.n_experts,
                                    num_experts_per_tok=c.top_k, max_position_embeddings=c.n_positions,
                                    tie_word_embeddings=c.tie_word_embeddings)  # fmt: skip
    assert formulas.parameters(c) == transformers_parameters(hf)
    if preset in MODEL_CARDS:
        assert (formulas.parameters(c), formulas.active_parameters(c)) == MODEL_CARDS[preset]


def test_params_says_total_and_active_on_screen_and_in_json():
    import json

    result = run_cli("params", "--preset", "mixtral-8x7b", "--json", "-")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["total"], doc["active"]) == MODEL_CARDS["mixtral-8x7b"]
    assert (
        doc["kinds"]["expert_gate"] == doc["kinds"]["expert_up"] == doc["kinds"]["expert_down"] == 32 * 8 * 4096 * 14336
    )
    shown = run_cli("params", "--preset", "mixtral-8x22b")
    assert shown.returncode == 0, shown.stderr
    c = PRESETS["mixtral-8x22b"]
    assert f"{formulas.parameters(c):,} parameters (141 G)" in shown.stdout  # Mistral's card: 141B
    assert f"{formulas.active_parameters(c):,} of them active (39.2 G)" in shown.stdout  # the card: 39B active
    assert "experts.{e}.w1.weight" in shown.stdout


def test_generate_count_and_trace_commands_run_on_a_mixtral(made):
    directory, _, _ = made("e4_k2_window")
    generated = run_cli("generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "5")
    assert generated.returncode == 0, generated.stderr
    load = generated.stdout.split("Expert load")[1].splitlines()[1:3]  # a line per layer: 4 experts' tokens
    assert [line.split(":")[0].split() for line in load] == [["layer", "0"], ["layer", "1"]]
    assert all(sum(map(int, line.split(":")[1].split()[:4])) == (3 + 4) * 2 for line in load)  # 7 tokens fed, 2 each
    counted = run_cli("count", "--model", str(directory), "--tokens", "20")
    assert counted.returncode == 0, counted.stderr
    assert "expert.gate" in counted.stdout or "router" in counted.stdout
    traced = run_cli("trace", "--model", str(directory), "--ids", "1,2,3")
    assert traced.returncode == 0, traced.stderr
    for name in ("moe.router_logits", "moe.chosen", "moe.gates", "moe.expert_gate", "moe.expert_down", "moe.out"):
        assert f"blocks.0.{name}" in traced.stdout
    assert "    experts  0: " in traced.stdout  # each expert product says which expert got how many tokens


@pytest.mark.parametrize(
    "key, value",
    [("layer_types", ["full_attention"] * 2), ("attention_bias", True), ("mlp_bias", True),
     ("partial_rotary_factor", 0.5), ("rope_parameters", {"rope_type": "dynamic", "factor": 2.0})],
)  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value):
    hf = {"model_type": "mixtral", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
          "num_attention_heads": 2, "vocab_size": 50, key: value}  # fmt: skip
    with pytest.raises(UserError, match=key.split("_")[0] if key != "rope_parameters" else "dynamic"):
        MixtralConfig.from_hf_dict(hf)


def test_more_experts_per_token_than_experts_is_refused():
    with pytest.raises(UserError, match="num_experts_per_tok=3 exceeds num_local_experts=2"):
        MixtralConfig.from_hf_dict({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3})


def test_mixtral_defaults_are_transformers_defaults():
    ours = MixtralConfig.from_hf_dict({"model_type": "mixtral"})
    theirs = transformers.MixtralConfig()
    assert (ours.n_experts, ours.top_k, ours.rope_theta, ours.n_kv_head, ours.n_positions, ours.norm_eps) == (
        theirs.num_local_experts, theirs.num_experts_per_tok, theirs.rope_parameters["rope_theta"],
        theirs.num_key_value_heads, theirs.max_position_embeddings, theirs.rms_norm_eps)  # fmt: skip


def test_a_pad_token_s_expert_work_is_counted_as_padding_and_stays_in_its_own_row(made):
    from minitransformer.engine.ledger import Phase, padding_of
    from minitransformer.verbs.generate import left_padded

    _, ours, _ = made("e4_k2_window")
    rows = [prompt("e4_k2_window", 9, seed=8), prompt("e4_k2_window", 4, seed=9)]
    ids, pads = left_padded(rows, 0)
    phase = Phase("prefill", 0, 9, 9, batch=2, pads=tuple(int(p) for p in pads), finished=(False, False))
    logits = ours.run(ids, all_positions=True, pads=pads, phase=phase)
    np.testing.assert_allclose(logits[1, 5:], ours.logits(rows[1]), atol=1e-4)  # the pads' experts reach no real row
    c = ours.config
    D, F, k = c.n_embd, c.d_ff, c.top_k
    for i in range(c.n_layer):
        gate, down = phase.find("expert.gate", i), phase.find("expert.down", i)
        assert sum(p.tokens for p in gate.breakdown) == 2 * 9 * k  # the 5 pad tokens were routed and computed too
        assert padding_of(gate, list(pads), 9) == (5 * k * F, 5 * k * F * D)
        assert padding_of(down, list(pads), 9) == (5 * k * D, 5 * k * D * F)
        assert padding_of(phase.find("router", i), list(pads), 9) == (5 * c.n_experts, 5 * c.n_experts * D)


def test_a_hook_reads_an_expert_stage_and_may_not_replace_it_but_may_replace_the_gates(made):
    _, ours, _ = made("e4_k2_window")
    ids = prompt("e4_k2_window", 12, seed=10)
    seen = []
    handle = ours.add_hook("blocks.1.moe.expert_down", lambda x, name: seen.append(x.shape))
    try:
        ours.logits(ids)
    finally:
        handle.remove()
    assert seen == [(12, 2 * ours.config.n_embd)]
    handle = ours.add_hook("blocks.0.moe.expert_act", lambda x, name: x * 0)
    try:
        with pytest.raises(UserError, match="a hook replaced blocks.0.moe.expert_act"):
            ours.logits(ids)
    finally:
        handle.remove()
    before = ours.logits(ids)
    handle = ours.add_hook("blocks.0.moe.gates", lambda x, name: x * 0)  # no expert's output reaches the residual
    try:
        _, cache = ours.run_with_cache(ids, names=["blocks.0.resid_mid", "blocks.0.resid_post"])
    finally:
        handle.remove()
    np.testing.assert_array_equal(cache["blocks.0.resid_post"], cache["blocks.0.resid_mid"])
    assert np.abs(ours.logits(ids) - before).max() == 0


@pytest.fixture(scope="module")
def near_tied_router(tmp_path_factory):
    """One Mixtral layer of 2 experts, 1 a token, whose router rows differ by less than bfloat16 resolves: expert 0's
    row held in bfloat16's numbers, expert 1's the same moved by at most 2^-12 of each number (bfloat16 keeps 2^-8),
    so in float64 each token's choice is the sign of h . (w1 - w0), and in bfloat16 the two logits are equal. Its
    directory."""
    from family_checks import save_random

    directory = tmp_path_factory.mktemp("mixtral-near-tied-router")
    config = transformers.MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=2,
                                        num_experts_per_tok=1, max_position_embeddings=128)  # fmt: skip
    hf = save_random(directory, config, seed=5)
    with torch.no_grad():
        router = hf.model.layers[0].mlp.gate.weight  # [E, D]
        w0 = router[0].to(torch.bfloat16).float()
        moved = (torch.rand(w0.shape, generator=torch.Generator().manual_seed(1)) * 2 - 1) * 2.0**-12
        router[0], router[1] = w0, w0 * (1 + moved)
        assert (router[1].to(torch.bfloat16).float() == w0).all()  # equal once rounded to bfloat16
    hf.save_pretrained(directory)
    return directory


def test_at_bfloat16_the_tokens_whose_expert_differs_from_float64_s_are_reported(near_tied_router, tmp_path):
    import json

    from minitransformer import load_model

    ids = list(range(1, 21))
    truth = load_model(near_tied_router, dtype="float64")
    _, cache = truth.run_with_cache(ids, names="blocks.0.moe.router_logits")
    logits = cache["blocks.0.moe.router_logits"]
    prefer_1 = [p for p in range(len(ids)) if logits[p, 1] > logits[p, 0]]  # float64's expert 1; bfloat16 ties: 0
    assert prefer_1 == [1, 2, 5, 10, 17, 18], (prefer_1, logits[:, 1] - logits[:, 0])
    gaps = np.abs(logits[:, 1] - logits[:, 0])  # float64 decides each token by far more than its rounding
    assert gaps.min() > 1e-9, gaps
    document = tmp_path / "g.json"
    done = run_cli("generate", "--model", str(near_tied_router), "--ids", ",".join(map(str, ids)), "--max-new-tokens",
                   "1", "--precision", "bfloat16", "--json", str(document))  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    said = ("choices (a position's experts or keys): 6 of 20 differ from float64's, layer 0 router.topk at positions "
            "1-2, 5, 10, 17-18")  # fmt: skip
    assert said in out, out
    assert "Selections tied at the k-th place: layer 0 router.topk at positions 0-19 (exact)." in out, out
    drift = json.loads(document.read_text())["drift"]
    assert drift["selections"] == [
        {"layer": 0, "stage": "router.topk", "position": p, "chosen": [0], "float64": [1], "margin": 0.0}
        for p in prefer_1
    ], drift["selections"]
    # the table of them: each position, what each pass chose, bfloat16's margin (an exact tie)
    assert "  0      router.topk         1  0         1        0 (exact)" in out, out
