"""OLMo 3's own quirk, beside its conformance configs: an older config.json's rope_theta and rope_scaling are the full
layers' rope alone, as Olmo3Config reads them; the sliding layers keep the default rope at 500,000 whatever the
file's rope_theta (transformers' class is the judge, on the config alone: no model is made)."""

from __future__ import annotations

import pytest

from minitransformer.families.config import FULL, SLIDING
from minitransformer.families.table import config_from_hf_dict

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

SMALL = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 4,
         "num_attention_heads": 4, "max_position_embeddings": 256}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize("older", [{"rope_theta": 1000.0, "rope_scaling": YARN}, {"rope_theta": 1000.0}, {}],
                         ids=["theta-and-yarn", "theta", "neither"])  # fmt: skip
def test_an_older_file_s_rope_is_the_full_layers_and_the_sliding_ones_keep_the_default(older):
    theirs = transformers.Olmo3Config(**SMALL, **older).rope_parameters
    ours = config_from_hf_dict({"model_type": "olmo3", **SMALL, **older}, "small")
    full, local = ours.rope(ours.layer_types.index(FULL)), ours.rope(ours.layer_types.index(SLIDING))
    assert {"rope_theta": full.theta, "rope_type": full.kind, **full.parameters} == theirs[FULL], (full, theirs)
    assert {"rope_theta": local.theta, "rope_type": local.kind} == theirs[SLIDING], (local, theirs)
    assert local.theta == 500000.0
