"""Every preset of every family against transformers: its config.json (config.to_hf_dict, what `minitransformer
config --preset` prints) loaded by transformers on the meta device (no memory, no download) makes a model whose
parameters number what `params` says and whose every tensor has the name and shape ours expects."""

from __future__ import annotations

import json

import pytest

from minitransformer.families.table import PRESETS, architecture_of
from minitransformer.models.weights import expected_shapes
from minitransformer.verbs.params import parameters

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")


@pytest.mark.parametrize("name", PRESETS)
def test_transformers_reads_the_preset_s_config_json_as_the_same_model(name):
    from transformers.core_model_loading import revert_weight_conversion

    config = PRESETS[name]
    hf = transformers.AutoConfig.for_model(**json.loads(json.dumps(config.to_hf_dict())))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    assert type(model).__name__ == config.to_hf_dict()["architectures"][0]  # the class the config.json names
    assert sum(p.numel() for p in model.parameters()) == parameters(config).total
    # the names and shapes of the checkpoint transformers would save (its fused experts split back as on the Hub)
    prefix = architecture_of(config).layout.prefix
    theirs = {name.removeprefix(prefix): tuple(t.shape)
              for name, t in revert_weight_conversion(model, model.state_dict()).items()}  # fmt: skip
    if config.tie_word_embeddings:
        theirs.pop("lm_head.weight", None)  # the embedding's, tied: not saved
    assert theirs == expected_shapes(config)
