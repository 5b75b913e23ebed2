"""Qwen3-Next's quirks against transformers (what every family owes runs in test_conformance.py, on the same models;
what it shares with Qwen3.5 is held in test_qwen35.py): the fused in-projections cut apart as transformers'
fix_query_key_value_ordering cuts them, the DeltaNet states in the cache after a prompt past a chunk, each decode step
and a pass from the state, and the count within one chunk."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.families.qwen35.config import CHUNK, LINEAR  # noqa: E402

FAMILY = "qwen3_next"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
prompt = SPEC.prompt_ids


@pytest.mark.parametrize("name", SPEC.configs)
def test_the_cut_of_the_fused_projections_is_transformers_ordering(made, name):
    """Layer 0's in_proj_qkvz and in_proj_ba outputs, cut by transformers' own fix_query_key_value_ordering (q, k
    and v side by side as its conv reads them; z, b, a a value head each), against our linear.cut's four outputs."""
    _, ours, hf = made(name)
    ids = prompt(name, 20, seed=3)
    module, seen = hf.model.layers[0].linear_attn, {}
    hooks = [module.in_proj_qkvz.register_forward_hook(lambda m, a, out: seen.__setitem__("qkvz", out)),
             module.in_proj_ba.register_forward_hook(lambda m, a, out: seen.__setitem__("ba", out))]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
            q, k, v, z, b, a = module.fix_query_key_value_ordering(seen["qkvz"], seen["ba"])
    finally:
        for hook in hooks:
            hook.remove()
    qkv = torch.cat([x.reshape(1, len(ids), -1) for x in (q, k, v)], dim=-1)
    _, cache = ours.run_with_cache(ids, names="blocks.0.linear_attn.in_proj_*")
    for capture, theirs in (("qkv", qkv), ("z", z.reshape(1, len(ids), -1)), ("b", b), ("a", a)):
        assert checks.worst(cache[f"blocks.0.linear_attn.in_proj_{capture}"], theirs[0].numpy()) <= 1, capture


@pytest.mark.parametrize(
    "name, n, then", [("grouped-dense-layer-yarn", CHUNK + 1, 5), ("step2-interval2-bias-tied", 1, 2)]
)
def test_the_states_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each DeltaNet layer's conv state and delta-rule state against transformers' cache, and each pass's logits,
    after a prompt (past a chunk; of one position), each of 3 decode steps and a pass from the state."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    linear = sum(kind.startswith(LINEAR) for kind in ours.config.layer_types)
    assert len(compared) == 5 * (1 + 2 * linear), compared
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


@pytest.mark.parametrize("name", SPEC.configs)
def test_count_equals_a_real_run_and_the_closed_form_within_one_chunk(made, name):
    _, ours, _ = made(name)
    checks.count_equals_a_real_run_and_the_closed_form(ours, 5, 3)  # a prompt shorter than a chunk
