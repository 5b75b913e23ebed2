"""Falcon-H1's quirk against transformers (what every family owes runs in test_conformance.py, on the same models):
each layer's cache is one handle holding its attention's keys and values beside its Mamba-2 mixer's conv and scan
states, and each of them equals transformers' cache (LinearAttentionAndFullAttentionLayer) after a prompt in chunks,
after each decode step and after a pass from the cache; count says both, for every layer.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.families.table import PRESETS  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402
from minitransformer.verbs.memory import memory_dict  # noqa: E402

FAMILY = "falcon_h1"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]


@pytest.mark.parametrize("name, n", [("multipliers-gated-norm", 2 * 16 + 1), ("norm-first-biases-tied", 40)])
def test_each_layer_s_keys_values_and_states_are_transformers_after_a_prompt_and_each_decode_step(made, name, n):
    """Each layer's conv state and [Hs, P, N] scan state equal transformers' cache's, and each pass's logits
    transformers', after a prompt past a chunk, 3 decode steps and 5 positions from the cache; and its keys (scaled by
    key_multiplier, then turned) and values are transformers' cache's."""
    _, ours, hf = made(name)
    ids = SPEC.prompt_ids(name, n + 5, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    layers = ours.config.n_layer
    assert len(compared) == 5 * (1 + 2 * layers), compared  # 5 passes: the logits, conv and ssm of every layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))

    cache = ours.new_cache(capacity=n)
    ours.run(ids[:n], cache=cache)
    with torch.no_grad():
        theirs = hf(torch.tensor([ids[:n]]), use_cache=True).cache
    for i in range(layers):
        held = cache.layer(i)
        assert set(held.arrays) == {"conv", "ssm"}, i  # one handle: keys, values and the mixer's states
        for mine, their in ((held.keys, theirs.layers[i].keys), (held.values, theirs.layers[i].values)):
            assert checks.worst(mine, their[0]) <= 1, f"layer {i}: {checks.differ(mine, their[0])}"


def test_count_says_every_layer_s_keys_and_values_and_its_state_and_their_bytes():
    """falcon-h1-34b: 72 layers, each 2 x 4 key/value heads of 128 a position beside a state of conv [3, 5120] and
    ssm [32, 128, 256], the same at any context."""
    config = PRESETS["falcon-h1-34b"]
    count = count_generation(config, 1000, 1)
    cache = memory_dict(count, balance=10.0)["cache"]
    (kind, held), *others = cache["layer_types"].items()
    state = 72 * 4 * (3 * 5120 + 32 * 128 * 256)
    assert not others and kind == "hybrid" and held["layers"] == 72 and held["positions"] == 1000
    assert held["holds"] == "keys and values and a state" and held["state"] == {
        "conv": [3, 5120],
        "ssm": [32, 128, 256],
    }
    assert held["state_bytes"] == cache["state_bytes"] == state
    assert held["bytes"] == cache["bytes"] == state + 72 * 4 * 2 * 4 * 128 * 1000


def test_the_7b_preset_is_its_published_shapes_at_the_family_s_rope_theta():
    from published_configs import FALCON_H1_7B

    from minitransformer.families.table import config_from_hf_dict

    assert config_from_hf_dict(FALCON_H1_7B | {"rope_theta": 1e11}, "falcon-h1-7b") == PRESETS["falcon-h1-7b"]
