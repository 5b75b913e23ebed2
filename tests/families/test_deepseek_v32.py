"""DeepSeek-V3.2's quirks against transformers (what every family owes runs in test_conformance.py, on the same models):
the indexer's top k really drops keys, and chooses the keys transformers chooses; the sparse form beside the dense
one in the ledger, for prefill and decode; the indexer's keys in the cache; the parameters and the preset; the
commands; and the options refused in config.json.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch
from family_checks import (  # noqa: E402 - after the importorskips: it imports torch and transformers
    count_equals_a_real_run_and_the_closed_form,
    transformers_parameters,
    worst,
)
from published_configs import DEEPSEEK_V32_EXP  # noqa: E402

from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.deepseek_v32.config import PRESETS, DeepseekV32Config  # noqa: E402
from minitransformer.families.deepseek_v32.family import ARCHITECTURE, ATTENTION_V32  # noqa: E402
from minitransformer.models.model import Model  # noqa: E402
from minitransformer.models.options import RunOptions  # noqa: E402
from minitransformer.verbs import formulas as closed  # noqa: E402
from minitransformer.verbs.count import count_generation, count_passes  # noqa: E402

formulas = ARCHITECTURE.formulas  # the closed forms, the parts' (families/parts/)
FAMILY = "deepseek_v32"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs
PROMPT = SPEC.prompt
hf_config = SPEC.hf_config
prompt = SPEC.prompt_ids


NEAR_TIE = 1e-5  # relative to a query's largest |score|: 100 times float32's roundings of these sums


def smallest_gap(model: Model, ids: list[int]) -> float:
    """The least gap, over layers and the queries that see more than ki keys, between a query's ki-th and
    (ki+1)-th index scores, over its largest |score|: where it is within float32 roundings, transformers may choose
    the other key, and the logits differ for a reason that is not a bug."""
    _, cache = model.run_with_cache(ids, names="blocks.*.attn.index_scores")
    k, gaps = model.config.index_topk, [np.inf]
    for i in range(model.config.n_layer):
        scores = cache[f"blocks.{i}.attn.index_scores"]
        for query in range(k, len(ids)):
            seen = -np.sort(-scores[query, : query + 1])
            gaps.append((seen[k - 1] - seen[k]) / np.abs(seen).max())
    return float(min(gaps))


def with_every_key(model: Model) -> Model:
    """The same weights with an index_topk past the context: every key chosen, the indexer changes nothing."""
    return Model(replace(model.config, index_topk=model.config.n_positions), model.params, model.source)


@pytest.mark.parametrize("name", CONFIGS)
def test_the_indexer_s_top_k_drops_keys_that_matter(made, name):
    _, ours, _ = made(name)
    assert ours.config.family == "deepseek_v32" and ours.config.index_topk == CONFIGS[name]["index_topk"] < PROMPT
    ids = prompt(name, PROMPT)
    assert smallest_gap(ours, ids) > NEAR_TIE  # the conformance suite's parity, on these ids, can hold
    # the choice drops keys that matter: attending to every key gives other logits
    assert worst(with_every_key(ours).logits(ids), ours.logits(ids)) > 10


def test_the_indexer_chooses_the_keys_transformers_chooses_and_the_router_its_experts(made):
    """Every query's chosen keys (as sets: neither side orders them the same) and the router's choice and gates,
    against transformers' modules' outputs; the indexer's keys captured equal its LayerNorm's output after rotary."""
    _, ours, hf = made("groups_dense")
    c = ours.config
    ids = prompt("groups_dense", 60, seed=6)
    _, cache = ours.run_with_cache(ids)
    seen: dict = {}
    handles = []
    for i, layer in enumerate(hf.model.layers):
        handles.append(layer.self_attn.indexer.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(("chosen", i), out)))  # fmt: skip
        handles.append(layer.self_attn.indexer.k_norm.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(("k_norm", i), out)))  # fmt: skip
        if c.is_moe(i):
            handles.append(layer.mlp.gate.register_forward_hook(
                lambda m, a, out, i=i: seen.__setitem__(("gate", i), out)))  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    dropped = 0
    for i in range(c.n_layer):
        np.testing.assert_allclose(cache[f"blocks.{i}.attn.index_k_norm"], seen[("k_norm", i)][0].numpy(), atol=1e-5)
        mine, theirs = cache[f"blocks.{i}.attn.index_chosen"], seen[("chosen", i)][0].numpy()
        assert mine.shape == theirs.shape == (len(ids), c.index_topk)
        for query in range(c.index_topk, len(ids)):  # queries that see more keys than they choose
            assert set(mine[query].tolist()) == set(theirs[query].tolist()), (i, query)
            dropped += query + 1 - c.index_topk
        if c.is_moe(i):
            _, weights, indices = (x.numpy() for x in seen[("gate", i)])
            chosen, gates = cache[f"blocks.{i}.moe.chosen"], cache[f"blocks.{i}.moe.gates"]
            for token in range(len(ids)):
                theirs_ = dict(zip(indices[token].tolist(), weights[token].tolist()))
                ours_ = dict(zip(chosen[token].tolist(), gates[token].tolist()))
                assert theirs_.keys() == ours_.keys()
                np.testing.assert_allclose([ours_[e] for e in theirs_], list(theirs_.values()), atol=1e-6)
    assert dropped > 0
    # a watched pass attends densely with the keys not chosen masked: their weights are exactly 0
    weights = cache["blocks.0.attn.weights"]  # [H, T, t]
    chosen = cache["blocks.0.attn.index_chosen"]
    kept = np.zeros(weights.shape[1:], dtype=bool)
    np.put_along_axis(kept, chosen, True, axis=-1)
    assert (weights[:, ~kept] == 0).all() and np.allclose(weights.sum(-1), 1)


@pytest.mark.parametrize("name", CONFIGS)
def test_count_equals_a_real_run_and_the_closed_forms_for_prefill_and_decode(made, name):
    _, ours, _ = made(name)
    c = ours.config
    # (a prefill past ki, each query with its ki keys: the conformance suite)
    count_equals_a_real_run_and_the_closed_form(ours, 10, c.index_topk)  # decode steps from within ki to past it
    ki = c.index_topk
    for past, T in ((30, 1), (ki - 5, 1), (0, 9), (0, PROMPT)):  # decode past ki and within it, prefills
        t = past + T
        cache = ours.new_cache()
        if past:
            ours.run(prompt(name, past, seed=8), cache=cache)
        phase = Phase("decode" if past else "prefill", 1, T, t)
        ours.run(prompt(name, T, seed=9), cache=cache, phase=phase)
        for i in range(c.n_layer):
            products = {op: n for op, n in formulas.products(c, T, t, layer=i).items() if op != "logits"}
            assert [r.op for r in phase.layer_records(i) if r.kind == "matmul"] == list(products)
            for op, (dots, length) in products.items():
                r = phase.find(op, i)
                assert r.dot_products == dots, (op, i, past, T)
                if r.op in ("scores", "mix") and t > ki:  # each query's ki chosen keys, the dense form beside them
                    assert (r.macs, r.dense_macs) == (dots * length, r.dense_dot_products * r.dot_length)
                    assert r.dense_dot_products == c.n_head * T * (t if op == "scores" else c.v_head_dim)
                    width = c.d_head if op == "scores" else c.v_head_dim  # what the masks keep: min(p + 1, ki) keys
                    assert r.chosen_keys == ki and r.causal_macs == c.n_head * closed.causal_pairs(T, t, ki) * width
                elif op not in ("scores", "mix") or T <= 128:
                    assert (r.dot_products, r.dot_length) == (dots, length), (op, i)
            indexer = sum(phase.find(op, i).macs for op in ("index.scores", "index.sum"))
            assert indexer == T * t * c.index_n_heads * (c.index_head_dim + 1)  # Hi (di + 1) a (query, key) pair
            layer = sum(r.macs for r in phase.layer_records(i))
            assert layer == T * formulas.weight_macs_per_position(c, i) + closed.attention_macs(c, T, t)
        assert phase.macs == closed.pass_macs(c, T, t, R=1) and phase.dot_products == closed.pass_dot_products(c, T, t)


def test_the_dense_form_computes_every_score_gives_the_same_logits_and_is_the_sparse_form_s_dense_count(made):
    """--dense-attention: every T x t score, the keys not chosen masked (as transformers' eager attention does); its
    ledger's scores and mix are the sparse run's dense form, and its logits the same."""
    _, ours, _ = made("groups_dense")
    ids = prompt("groups_dense", PROMPT, seed=10)
    sparse, dense = Phase("prefill", 0, PROMPT, PROMPT), Phase("prefill", 0, PROMPT, PROMPT)
    logits = ours.run(ids, phase=sparse, all_positions=True)
    every_score = RunOptions(dense_attention=True)
    assert worst(ours.run(ids, phase=dense, all_positions=True, options=every_score), logits) <= 0.1
    assert dense.macs == dense.dense_macs == sparse.dense_macs > sparse.macs
    for op in ("scores", "mix"):
        s, d = sparse.find(op, 0), dense.find(op, 0)
        assert (s.dense_dot_products, s.dense_macs, s.out_shape) == (d.dot_products, d.macs, d.out_shape)
        assert s.causal_macs == d.causal_macs  # what the causal and the indexer's masks keep, either way
    counted = count_generation(ours.config, PROMPT, 3, dense_attention=True)
    assert counted.totals.macs == count_passes(ours, PROMPT, 3, dense_attention=True).totals.macs
    assert counted.totals.macs == count_generation(ours.config, PROMPT, 3).totals.dense_macs


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


def preset_config(c: DeepseekV32Config):
    """The preset as a transformers DeepseekV32Config, key for key."""
    return transformers.DeepseekV32Config(
        vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.n_inner, moe_intermediate_size=c.moe_inner,
        num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_head,
        n_routed_experts=c.n_experts, num_experts_per_tok=c.top_k, n_shared_experts=c.n_shared_experts,
        n_group=c.n_group, topk_group=c.topk_group, first_k_dense_replace=c.first_k_dense, q_lora_rank=c.q_lora_rank,
        kv_lora_rank=c.kv_lora_rank, qk_rope_head_dim=c.qk_rope_head_dim, qk_nope_head_dim=c.qk_nope_head_dim,
        v_head_dim=c.v_head_dim, max_position_embeddings=c.n_positions, tie_word_embeddings=False,
        index_topk=c.index_topk, index_head_dim=c.index_head_dim, index_n_heads=c.index_n_heads,
        rope_parameters={**dict(c.rope_scaling or ()), "rope_theta": c.rope_theta})  # fmt: skip


DEEPSEEK_V32_EXP_TOTAL = 671_877_929_216  # DeepSeek-V3's 671,026,404,352 and 61 indexers of 13,959,424


def test_the_preset_s_total_equals_transformers_count_of_the_same_config_on_the_meta_device():
    c = PRESETS["deepseek-v3.2-exp"]
    assert formulas.parameters(c) == transformers_parameters(preset_config(c)) == DEEPSEEK_V32_EXP_TOTAL
    assert formulas.active_parameters(c) == 37_552_282_624 + 61 * 13_959_424  # DeepSeek-V3's active and the indexers


def test_the_preset_reads_as_the_published_config_json_says():
    """The Hugging Face keys of DeepSeek-V3.2-Exp's config.json (as its quantized copy publishes them, its
    quantization_config left out), read into the preset."""
    hf = dict(DEEPSEEK_V32_EXP)
    assert DeepseekV32Config.from_hf_dict(hf, name="deepseek-v3.2-exp") == PRESETS["deepseek-v3.2-exp"]
    hf["quantization_config"] = {"quant_method": "fp8"}  # the published weights are fp8 blocks
    with pytest.raises(UserError, match="quantization_config"):
        DeepseekV32Config.from_hf_dict(hf)


def test_count_of_the_preset_shows_the_sparse_form_beside_the_dense_one_and_the_indexer_s_cache():
    c = PRESETS["deepseek-v3.2-exp"]
    result = run_cli("count", "--preset", "deepseek-v3.2-exp", "--tokens", "3000", "--new-tokens", "2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Sparse attention: each\n  query's Q K^T and A V against only the s = 2,048 keys the indexer chose" in out
    assert "(sparse: 2,048 keys a query)" in out and "Dense form: " in out
    assert all(line in out for line in formulas.count_notes(c, 3000, 2))
    assert "K and V x 61 layers x 24,576 + 16,384 + 128 numbers" in out
    indexer, computed, dense = ATTENTION_V32.sparse_attention_macs(c, 3000, 3000)
    assert f"{computed:,} MACs a layer, against {dense:,} dense" in out and f"keys {indexer:,}" in out
    # the closed form of the crossing: past ki only the indexer's scores grow
    x = closed.attention_crossing(c)
    assert x > c.index_topk and closed.attention_macs(c, 1, int(x) + 1) > closed.weight_macs_per_position(c, 0)
    assert closed.attention_macs(c, 1, int(x)) <= closed.weight_macs_per_position(c, 0)


def test_the_cache_holds_the_indexer_s_keys_beside_k_and_v(made):
    from minitransformer.verbs.memory import kv_cache_bytes

    _, ours, _ = made("groups_dense")
    c = ours.config
    cache = ours.new_cache(capacity=40)
    index_keys = [cache.layer(i).rows["index_keys"] for i in range(c.n_layer)]  # KeysValues.rows, beside K and V
    assert [k.shape for k in index_keys] == [(40, c.index_head_dim)] * c.n_layer
    assert cache.nbytes == kv_cache_bytes(c, 40) == 40 * closed.kv_cache_bytes_per_token(c)
    assert closed.kv_cache_bytes_per_token(c) == 4 * c.n_layer * (c.n_head * (c.d_head + c.v_head_dim) + 16)
    ours.run(prompt("groups_dense", 30, seed=11), cache=cache)
    _, captured = ours.run_with_cache(prompt("groups_dense", 30, seed=11), names="blocks.*.attn.index_keys")
    for i in range(c.n_layer):  # (a watched pass attends densely: later layers' inputs differ by roundings)
        np.testing.assert_allclose(index_keys[i][:30], captured[f"blocks.{i}.attn.index_keys"], atol=1e-5)


def test_generate_count_trace_and_their_html_run_on_a_deepseek_v32(made, tmp_path):
    directory, _, _ = made("groups_dense")
    ids = ",".join(str(i) for i in prompt("groups_dense", 40, seed=12))
    generated = run_cli("generate", "--model", str(directory), "--ids", ids, "--max-new-tokens", "3")
    assert generated.returncode == 0, generated.stderr
    assert "Sparse attention: each query's" in generated.stdout and "sparse: 16 keys a query" in generated.stdout
    drawn = run_cli("generate", "--model", str(directory), "--ids", ids, "--max-new-tokens", "3", "--html",
                    str(tmp_path / "g.html"))  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr  # (its attention maps watch the pass: computed dense, the rest masked)
    counted = run_cli("count", "--model", str(directory), "--tokens", "40", "--html", str(tmp_path / "c.html"))
    assert counted.returncode == 0, counted.stderr
    assert "index.scores" in counted.stdout and "DSA (DeepSeek Sparse Attention)" in counted.stdout
    traced = run_cli("trace", "--model", str(directory), "--ids", ids, "--html", str(tmp_path / "t.html"))
    assert traced.returncode == 0, traced.stderr
    for name in ("attn.index_q", "attn.index_keys", "attn.index_qk", "attn.index_relu", "attn.index_sum",
                 "attn.index_chosen", "attn.weights", "moe.chosen"):  # fmt: skip
        assert f"blocks.2.{name}" in traced.stdout
    for page in ("g", "c", "t"):
        html = (tmp_path / f"{page}.html").read_text()
        assert "index.scores" in html and "index.sum" in html
    assert "sparse: 16 keys a query" in (tmp_path / "c.html").read_text()


@pytest.mark.parametrize("key, value, match", [
    ("q_lora_rank", None, "q_lora_rank"), ("layer_types", ["full_attention"] * 61, "layer_types"),
    ("num_key_value_heads", 1, "num_key_value_heads"), ("attention_bias", True, "attention_bias"),
    ("mlp_layer_types", ["dense", "mixed"] + ["sparse"] * 59, "mlp_layer_types"),
    ("index_head_dim", 32, "index_head_dim"), ("index_topk", 0, "index_topk"),
    ("quantization_config", {"quant_method": "fp8"}, "quantization_config"),
])  # fmt: skip
def test_options_that_change_inference_are_refused_by_name(key, value, match):
    with pytest.raises(UserError, match=match):
        DeepseekV32Config.from_hf_dict({"model_type": "deepseek_v32", key: value})


def test_defaults_are_transformers_defaults():
    ours = DeepseekV32Config.from_hf_dict({"model_type": "deepseek_v32"})
    t = transformers.DeepseekV32Config()
    assert (ours.n_layer, ours.n_embd, ours.n_inner, ours.moe_inner, ours.n_head, ours.q_lora_rank, ours.kv_lora_rank,
            ours.qk_rope_head_dim, ours.qk_nope_head_dim, ours.v_head_dim, ours.n_experts, ours.top_k,
            ours.n_shared_experts, ours.n_group, ours.topk_group, ours.first_k_dense, ours.norm_topk_prob,
            ours.routed_scaling_factor, ours.n_positions, ours.norm_eps, ours.rope_theta, ours.vocab_size,
            ours.bos_token_id, ours.eos_token_id, ours.index_topk, ours.index_head_dim, ours.index_n_heads,
            ours.to_hf_dict()["mlp_layer_types"]) == (
        t.num_hidden_layers, t.hidden_size, t.intermediate_size, t.moe_intermediate_size, t.num_attention_heads,
        t.q_lora_rank, t.kv_lora_rank, t.qk_rope_head_dim, t.qk_nope_head_dim, t.v_head_dim, t.n_routed_experts,
        t.num_experts_per_tok, t.n_shared_experts, t.n_group, t.topk_group, t.first_k_dense_replace,
        t.norm_topk_prob, t.routed_scaling_factor, t.max_position_embeddings, t.rms_norm_eps,
        t.rope_parameters["rope_theta"], t.vocab_size, t.bos_token_id, t.eos_token_id, t.index_topk,
        t.index_head_dim, t.index_n_heads, t.mlp_layer_types)  # fmt: skip
    assert ours.rope_interleave  # MLA's pairs: always interleaved in transformers' DeepSeek-V3.2


def test_which_layers_have_experts_is_mlp_layer_types_as_transformers_builds_them(made):
    _, ours, hf = made("yarn_pattern")
    assert ours.config.layer_types == ("moe", "dense", "moe")
    assert [hasattr(layer.mlp, "experts") for layer in hf.model.layers] == [True, False, True]
    assert ours.config.prefix(2).layer_types == ("moe", "dense")


@pytest.fixture(scope="module")
def tied(made, tmp_path_factory):
    """groups_dense with layer 0's indexer keys all zero (its LayerNorm's gain and bias zeroed): every index head's
    ReLU is zero at every key, so every key a query sees scores exactly 0, and a query that sees more than ki keys
    ties at its ki-th place. (our model, transformers', its directory)"""
    import copy

    from minitransformer import load_model

    _, _, hf = made("groups_dense")
    hf = copy.deepcopy(hf)
    with torch.no_grad():
        norm = hf.model.layers[0].self_attn.indexer.k_norm
        norm.weight.zero_(), norm.bias.zero_()
    directory = tmp_path_factory.mktemp("deepseek_v32-tied")
    hf.save_pretrained(directory)
    return load_model(directory), hf, directory


def test_keys_that_tie_at_the_kth_place_are_chosen_lowest_first_and_the_ledger_says_where(tied):
    ours, hf, _ = tied
    k, T = ours.config.index_topk, 24
    ids = prompt("groups_dense", T, seed=13)
    _, cache = ours.run_with_cache(ids, names=["blocks.0.attn.index_scores", "blocks.0.attn.index_chosen"])
    scores, chosen = cache["blocks.0.attn.index_scores"], cache["blocks.0.attn.index_chosen"]
    seen = np.tril(np.ones((T, T), dtype=bool))
    assert (scores[seen] == 0).all() and (scores[~seen] == -np.inf).all(), scores
    for query in range(k, T):  # query sees query + 1 > k keys, all at 0: the rule takes the first k
        assert chosen[query].tolist() == list(range(k)), (query, chosen[query])
    # transformers' torch.topk takes others of the tie: its choice differs at some of those queries, nowhere else
    theirs = {}
    handle = hf.model.layers[0].self_attn.indexer.register_forward_hook(lambda m, a, out: theirs.setdefault(0, out))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        handle.remove()
    # (a query that sees fewer than ki is given masked keys too, on both sides: the keys it sees are compared)
    visible = [
        ({i for i in theirs[0][0, q].tolist() if i <= q}, {i for i in chosen[q].tolist() if i <= q}) for q in range(T)
    ]
    other = [q for q, (theirs_, ours_) in enumerate(visible) if theirs_ != ours_]
    assert other and set(other) <= set(range(k, T)), other
    # the ledger: layer 0's index.topk tied exactly at each of those queries, and no other choice tied or near-tied
    phase = Phase("prefill", 0, T, T)
    ours.run(ids, phase=phase, all_positions=True)
    assert [(t.layer, t.stage, t.position, t.margin) for t in phase.ties] == [
        (0, "index.topk", q, 0.0) for q in range(k, T)
    ]
    layer0 = phase.selections_dict(0)
    assert layer0 == [{"stage": "index.topk", "k": k, "of": T, "made": T - k, "exact_ties": T - k, "near_ties": 0}]
    # generate says so, in its report and its JSON
    from minitransformer.views.report import ledger_report

    generation = ours.generate(ids, max_new_tokens=2, candidates=0)
    assert generation.ledger is not None
    line = f"Selections tied at the k-th place: layer 0 index.topk at positions {k}-{T} (exact)."
    assert line in ledger_report(generation.ledger), ledger_report(generation.ledger)
    phases = generation.to_dict()["phases"]
    assert [t["position"] for p in phases for t in p["ties"]] == list(range(k, T + 1))
    assert all(t["margin"] == 0 and (t["layer"], t["stage"]) == (0, "index.topk") for p in phases for t in p["ties"])
    # and trace, after each pass: the prefill's queries k..T-1, then the decode step's at T
    import io

    from minitransformer.views.trace import trace

    out = io.StringIO()
    trace(ours, ids, new_tokens=2, layers=[0], out=out)
    said = [line for line in out.getvalue().splitlines() if line.startswith("Selections tied")]
    assert [line.split(" (exact)")[0] for line in said] == [
        f"Selections tied at the k-th place: layer 0 index.topk at positions {k}-{T - 1}",
        f"Selections tied at the k-th place: layer 0 index.topk at position {T}",
    ], said


def test_validate_names_the_tie_where_transformers_chose_another_key(tied):
    import io

    from minitransformer.verbs.validate import prompt_ids, their_logits, validate

    ours, hf, _ = tied
    text = "def fibonacci(n):\n    if n < 2:\n        return n\n   "  # 30 ids (seeded, as validate draws them)
    out = io.StringIO()
    assert validate(ours, steps=1, prompts=(text,), out=out) is False
    report = out.getvalue()
    ids = prompt_ids(ours, text, seed=0)
    mine, theirs = ours.logits(ids), their_logits(hf, torch, ids)
    allowed = 1e-4 * max(1.0, float(np.abs(theirs).max()))
    differ = np.nonzero(np.abs(mine - theirs).max(axis=-1) > allowed)[0].tolist()
    k = ours.config.index_topk
    assert len(ids) == 30 and differ and set(differ) <= set(range(k, len(ids))), (differ, report)
    label = repr(text[:29] + "...")  # validate's name of a long prompt
    explained = [line for line in report.splitlines() if line.startswith(f"  {label}, position")]
    assert explained and all(line.endswith(": a tie there, at layer 0 index.topk (exact)") for line in explained), (
        report
    )
    listed = []
    for line in explained:  # "  'def ...', positions 16-21: ..." or "..., position 25: ..."
        at = line.split(", position")[1].split(":")[0].lstrip("s ")
        first, _, last = at.partition("-")
        listed += list(range(int(first), int(last or first) + 1))
    assert listed == differ, (listed, differ, report)


def test_the_indexer_s_padding_is_its_pairs_with_a_pad_query_or_a_pad_key(made):
    """In a left-padded batch the indexer's scores I [B, T, Hi, t] (and their weighted sum over the heads [B, T, 1,
    t]) spend on padding every pair whose query or key is a pad slot, as attention's scores do: its query rows are the
    axis T, not the heads beside them."""
    from minitransformer.engine.ledger import padding_of

    _, ours, _ = made("groups_dense")
    rows = [prompt("groups_dense", n, seed=9 + n) for n in (3, 9, 6)]
    pads = np.array([9 - len(row) for row in rows])
    generation = ours.generate(rows, max_new_tokens=3, stop_at_eos=False, candidates=0)
    Hi = ours.config.index_n_heads
    for phase in generation[0].ledger.phases:
        for op in ("index.scores", "index.sum"):
            record = phase.find(op, 0)
            T, t = record.out_shape[1], record.out_shape[-1]
            slots_q, slots_k = phase.context - T + np.arange(T), phase.context - t + np.arange(t)
            pairs = int(
                ((slots_q[None, :, None] < pads[:, None, None]) | (slots_k[None, None, :] < pads[:, None, None])).sum()
            )
            per_pair = Hi if op == "index.scores" else 1  # the scores one a head; their sum one a pair, over Hi
            want = (per_pair * pairs, per_pair * pairs * record.dot_length)
            assert padding_of(record, list(phase.pads), phase.context, phase.tokens) == want, (phase.step, op, want)


@pytest.mark.parametrize("preset", ["deepseek-v3.2-exp", "glm-5"])
def test_a_generation_without_the_cache_that_ends_before_the_top_k_has_its_closed_form(preset):
    """The closed form without the cache summed the dense passes up to k_i whatever the generation's last (one
    position: 3.9e15 MACs where its count is 7.4e10), so the per-token sweep of count --plot drew it wrong."""
    from minitransformer.families.table import PRESETS as EVERY_PRESET

    config = EVERY_PRESET[preset]
    ki = config.index_topk
    for n_prompt, n_new in ((1, 1), (2, 1), (5, 4), (100, 40), (ki - 20, 10), (ki - 3, 6), (ki + 50, 2)):
        counted = count_generation(config, n_prompt, n_new, use_cache=False).totals.macs
        closed_form = closed.generation_macs(config, n_prompt, n_new, use_cache=False)
        assert counted == closed_form, (preset, n_prompt, n_new, f"count {counted:,}", f"closed form {closed_form:,}")
