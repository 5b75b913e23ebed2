"""Counting a mixture of experts from its config alone: the routing assumed (balanced or worst) moves each expert's
rows in the ledger and never a total, and the totals are the closed form's (families/parts/moe.py's experts)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from minitransformer.families.mixtral.config import PRESETS, MixtralConfig
from minitransformer.families.parts.moe import assumed_loads
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation

SMALL = MixtralConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=48, vocab_size=100, n_positions=512,
                      n_experts=8, top_k=2, name="small-moe")  # fmt: skip


@pytest.mark.parametrize(
    "tokens, experts, k, loads",
    [(100, 8, 2, [25] * 8), (3, 8, 2, [1, 1, 1, 1, 1, 1, 0, 0]), (10, 3, 2, [7, 7, 6]), (1, 4, 1, [1, 0, 0, 0])],
)
def test_balanced_routing_gives_every_expert_t_k_over_e_and_the_remainder_to_the_first(tokens, experts, k, loads):
    assert assumed_loads(tokens, experts, k, "balanced") == loads
    assert sum(loads) == tokens * k and max(loads) <= tokens  # k different experts for each token
    assert assumed_loads(tokens, experts, k, "worst") == [tokens] * k + [0] * (experts - k)


@pytest.mark.parametrize("config", [SMALL, PRESETS["mixtral-8x7b"], PRESETS["mixtral-8x22b"]], ids=lambda c: c.name)
def test_the_routing_moves_each_expert_s_rows_and_no_total(config):
    balanced = count_generation(config, 100, 3, routing="balanced")
    worst = count_generation(config, 100, 3, routing="worst")
    assert balanced.totals == worst.totals
    assert balanced.totals.macs == formulas.generation_macs(config, 100, 3)
    E, k, D, F = config.n_experts, config.top_k, config.n_embd, config.d_ff
    for b, w in zip(balanced.passes, worst.passes):
        assert b.expand().records == w.expand().records  # the same shapes and counts: records are equal
        T = b.tokens
        for op, length, width in (("expert.gate", D, F), ("expert.up", D, F), ("expert.down", F, D)):
            one, other = (next(r for r in p.block if r.op == op) for p in (b, w))
            assert [p.tokens for p in one.breakdown] == assumed_loads(T, E, k, "balanced")
            assert [p.tokens for p in other.breakdown] == [T] * k + [0] * (E - k)
            for record in (one, other):
                assert [p.macs for p in record.breakdown] == [n * width * length for n in
                                                              (p.tokens for p in record.breakdown)]  # fmt: skip
                assert record.macs == T * k * width * length


def test_count_states_the_routing_and_the_load_and_writes_each_expert_in_json():
    result = run_cli("count", "--preset", "mixtral-8x7b", "--tokens", "100", "--routing", "worst", "--json", "-")
    assert result.returncode == 0, result.stderr
    screen = result.stderr  # the document on stdout, the report beside it
    assert "T x k x (one expert's MACs per token) = 100 x 2 x 176,160,768 = 35,232,153,600" in screen
    assert "Routing assumed (no router without weights): worst" in screen
    assert "tokens per expert in every layer: 100 100 0 0 0 0 0 0" in screen
    doc = json.loads(result.stdout)
    assert doc["routing"] == "worst"
    ops = {o["op"]: o for o in doc["phases"][0]["layers"][0]["ops"]}
    assert ops["expert.down"]["breakdown"][0] == {"expert": 0, "tokens": 100, "dot_products": 100 * 4096,
                                                  "macs": 100 * 4096 * 14336}  # fmt: skip
    assert ops["router"]["macs"] == 100 * 4096 * 8 and "breakdown" not in ops["router"]
    balanced = run_cli("count", "--preset", "mixtral-8x7b", "--tokens", "100")
    assert "Routing assumed (no router without weights): balanced" in balanced.stdout
    assert "tokens per expert in every layer: 25 25 25 25 25 25 25 25" in balanced.stdout


def test_routing_is_refused_for_a_dense_model_in_one_line():
    result = run_cli("count", "--preset", "llama2-7b", "--tokens", "10", "--routing", "worst")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--routing is for a mixture of experts" in result.stderr


def test_an_expert_product_reads_the_weights_of_every_expert_that_got_tokens():
    from minitransformer.verbs.memory import bytes_moved

    c = PRESETS["mixtral-8x7b"]
    D, F = c.n_embd, c.d_ff
    for routing, used in (("balanced", 8), ("worst", 2)):
        count = count_generation(c, 100, 2, routing=routing)
        prefill = next(r for r in count.prefill.block if r.op == "expert.gate")
        assert bytes_moved(prefill) == 4 * (100 * D + used * D * F + 100 * 2 * F)
        decode = next(r for r in count.decodes[0].block if r.op == "expert.gate")
        assert bytes_moved(decode) == 4 * (D + 2 * D * F + 2 * F)  # one token: its k = 2 experts, whatever the routing


def test_the_html_and_csv_of_a_mixture_of_experts_name_its_router_and_experts(tmp_path):
    html, csv = tmp_path / "count.html", tmp_path / "count.csv"
    result = run_cli("count", "--preset", "mixtral-8x7b", "--tokens", "20", "--new-tokens", "2", "--html", str(html),
                     "--csv", str(csv))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert all(op in html.read_text() for op in ("router", "expert.gate", "expert.down"))
    import csv as csv_module

    rows = list(csv_module.DictReader(csv.read_text().splitlines()))
    down = next(row for row in rows if row["op"] == "expert.down" and row["phase"] == "prefill")
    assert int(down["macs"]) == 20 * 2 * 4096 * 14336 and int(down["layers"]) == 32  # per layer: T k D F


def test_the_html_page_draws_tokens_per_expert_layer_by_layer_from_the_routers_choices():
    """The page's heatmap is the routers' choices of a real run: each cell the tokens an expert got in a layer over
    every pass, each row k x the tokens the layer saw, and the same counts the run's own capture of the choices
    gives."""
    import numpy as np

    from minitransformer.models.model import Model
    from minitransformer.models.weights import as_tree, expected_shapes
    from minitransformer.views.html_report import generation_data, generation_fragment, tokens_per_expert

    rng = np.random.default_rng(3)
    tensors = {
        name: rng.standard_normal(shape).astype(np.float32) * 0.5 for name, shape in expected_shapes(SMALL).items()
    }
    model = Model(SMALL, as_tree(tensors, SMALL), source="memory")
    prompt = rng.integers(0, 100, 9).tolist()
    out = model.generate(prompt, max_new_tokens=4, stop_at_eos=False)
    tokens = tokens_per_expert(generation_data(out)["document"])
    seen = len(prompt) + 3  # the prefill's 9 positions and 3 decode steps of one
    assert tokens.shape == (2, 8) and (tokens.sum(axis=1) == SMALL.top_k * seen).all()
    # The same choices, captured: the chosen experts of the prompt and of each new token, run anew.
    _, cache = model.run_with_cache(prompt + out.new_tokens[:3], names="blocks.*.moe.chosen")
    for layer in range(2):
        chosen = np.asarray(cache[f"blocks.{layer}.moe.chosen"]).reshape(-1)
        assert (np.bincount(chosen, minlength=8) == tokens[layer]).all()
    page = generation_fragment(out)
    assert page.count('class="expert-load"') == 1 and "as this run's routers chose" in page
    assert "layer 1, expert 0: " in page
