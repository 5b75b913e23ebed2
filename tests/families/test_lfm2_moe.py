"""LFM2-MoE's quirk against transformers (what every family owes runs in test_conformance.py, on the same models; its
layers are LFM2's, tests/families/test_lfm2.py): the sigmoid router whose expert bias only chooses, each sparse
layer's choice and gates transformers' own, and the bias not counted among the parameters."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

FAMILY = "lfm2_moe"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]


@pytest.mark.parametrize("name", ["every-kind-bias-scaled", "sparse-no-bias-no-renorm"])
def test_each_sparse_layer_s_choice_and_gates_are_transformers_router_s(made, name):
    """Lfm2MoeTopKRouter's experts and weights (the k largest s + b, their s over their sum + 1e-6 where
    norm_topk_prob, times routed_scaling_factor), layer by layer, against our moe.chosen and moe.gates; where the
    bias is on, it moves the choice of some token (the moved bias is not zero, and chooses otherwise than s)."""
    _, ours, hf = made(name)
    ids = SPEC.prompt_ids(name, 60, seed=4)
    seen: dict = {}
    sparse = [i for i, kind in enumerate(ours.config.layer_types) if not kind.endswith("_dense")]
    hooks = [hf.model.layers[i].feed_forward.gate.register_forward_hook(
        lambda m, a, out, i=i: seen.__setitem__(i, (out[1].numpy(), out[2].numpy(), a[0].numpy())))
        for i in sparse]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    _, cache = ours.run_with_cache(ids, names="blocks.*.moe.*")
    moved = 0
    for i in sparse:
        weights, experts, h = seen[i]
        assert (cache[f"blocks.{i}.moe.chosen"] == experts).all(), i
        assert checks.worst(cache[f"blocks.{i}.moe.gates"], weights) <= 1, i
        scores = 1 / (1 + np.exp(-h @ hf.model.layers[i].feed_forward.gate.weight.detach().numpy().T))
        unbiased = np.argsort(-scores, axis=-1, kind="stable")[:, : ours.config.top_k]
        moved += int((np.sort(unbiased, axis=-1) != np.sort(experts, axis=-1)).any(axis=-1).sum())
    assert (moved > 0) == ours.config.use_expert_bias, moved


def test_the_expert_bias_is_a_buffer_not_a_parameter(made):
    _, ours, hf = made("every-kind-bias-scaled")
    c, layout = ours.config, ours.architecture.layout
    assert layout.kind("layers.2.feed_forward.expert_bias", c) == "router_bias"
    assert "model.layers.2.feed_forward.expert_bias" in dict(hf.named_buffers())
    assert ours.architecture.formulas.parameters(c) == sum(p.numel() for p in hf.parameters())
