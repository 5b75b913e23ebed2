"""OLMo 2's parameters: each preset's total equals transformers' count of the same config.json on the meta device
and the model cards' sizes (7.3B, 13.7B), and every tensor has its kind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer.families.olmo2.config import PRESETS
from minitransformer.families.table import config_from_hf_dict
from minitransformer.verbs.params import parameters

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402

CARDS = {"olmo-2-7b": 7.3e9, "olmo-2-13b": 13.7e9}


def config_json(c) -> dict:
    """The keys of the preset's config.json (allenai/OLMo-2-1124-7B, -13B) that shape its parameters and its pass."""
    return {"model_type": "olmo2", "vocab_size": c.vocab_size, "hidden_size": c.n_embd, "intermediate_size": c.n_inner,
            "num_hidden_layers": c.n_layer, "num_attention_heads": c.n_head, "num_key_value_heads": c.n_kv_head,
            "max_position_embeddings": c.n_positions, "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta,
            "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False, "eos_token_id": 100257,
            "pad_token_id": 100277}  # fmt: skip


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_is_transformers_count_of_its_config_json(name):
    config = PRESETS[name]
    hf = config_json(config)
    theirs = checks.transformers_parameters(transformers.AutoConfig.for_model(**hf))
    assert parameters(config).total == theirs
    assert config_from_hf_dict(hf, name) == config
    assert abs(theirs - CARDS[name]) < 0.01 * CARDS[name]


def test_olmo_2_7b_has_7_298_617_344_parameters():
    """V D (embedding) + V D (head) + L (4 D^2 + 3 D F + 4 D) + D: its four norms of D a layer, q and k's included."""
    V, D, F, L = 100352, 4096, 11008, 32
    assert (
        parameters(PRESETS["olmo-2-7b"]).total == 2 * V * D + L * (4 * D * D + 3 * D * F + 4 * D) + D == 7_298_617_344
    )


@pytest.mark.parametrize("bias, tied", [(False, False), (True, True)])
def test_kinds_name_every_tensor_and_add_up(bias, tied):
    hf = {"model_type": "olmo2", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 20, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6, "attention_bias": bias,
          "tie_word_embeddings": tied}  # fmt: skip
    p = parameters(config_from_hf_dict(hf, "x"))
    assert sum(p.kinds.values()) == p.total == sum(t.count for t in p.tensors)
    assert p.kinds["norms"] == 2 * (2 * 16 + 4 * 6 + 2 * 6) + 16  # two of D, q_norm [H dh], k_norm [Hkv dh]; ln_f
    assert p.kinds.get("biases", 0) == bias * 2 * (4 * 6 + 2 * 2 * 6 + 16)  # q, k, v and o
    assert p.total == checks.transformers_parameters(transformers.AutoConfig.for_model(**hf))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 4, 6]), st.booleans(),
       st.integers(1, 40), st.integers(2, 100), st.booleans(), st.booleans())  # fmt: skip
def test_config_json_counts_agree_with_transformers(L, Hkv, G, dh, own_dh, F, V, bias, tied):
    """Any small OLMo 2 config.json, read by us and by transformers, counts the same."""
    H = Hkv * G
    hf = {"model_type": "olmo2", "hidden_size": H * (dh + 2 if own_dh else dh), "intermediate_size": F,
          "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": Hkv, "vocab_size": V,
          "attention_bias": bias, "tie_word_embeddings": tied} | ({"head_dim": dh} if own_dh else {})  # fmt: skip
    assert parameters(config_from_hf_dict(hf, "random")).total == checks.transformers_parameters(
        transformers.AutoConfig.for_model(**hf))  # fmt: skip
