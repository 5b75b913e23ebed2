"""Qwen3's parameters: every preset's total equals transformers' count of the same config.json on the meta device
(and the totals the Qwen3 model cards state), and every tensor has its kind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer.families.qwen3.config import PRESETS
from minitransformer.families.qwen3.family import ARCHITECTURE
from minitransformer.families.table import config_from_hf_dict
from minitransformer.verbs.params import parameters

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402

# Totals stated for two of them (issue), and the model cards' rounded sizes for the others.
STATED = {"qwen3-0.6b": 596_049_920, "qwen3-8b": 8_190_735_360}
CARDS = {"qwen3-0.6b": 0.6e9, "qwen3-1.7b": 1.7e9, "qwen3-4b": 4.0e9, "qwen3-8b": 8.2e9, "qwen3-14b": 14.8e9,
         "qwen3-32b": 32.8e9}  # fmt: skip


def config_json(c) -> dict:
    """The preset's config.json, as the Qwen3 model's own (the keys that shape its parameters and its pass)."""
    return {"model_type": "qwen3", "vocab_size": c.vocab_size, "hidden_size": c.n_embd, "intermediate_size": c.n_inner,
            "num_hidden_layers": c.n_layer, "num_attention_heads": c.n_head, "num_key_value_heads": c.n_kv_head,
            "head_dim": c.head_dim, "max_position_embeddings": c.n_positions, "rms_norm_eps": c.norm_eps,
            "rope_theta": c.rope_theta, "tie_word_embeddings": c.tie_word_embeddings, "attention_bias": False,
            "use_sliding_window": False, "sliding_window": None, "max_window_layers": c.n_layer,
            "bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id}  # fmt: skip


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_is_transformers_count_of_its_config_json(name):
    config = PRESETS[name]
    hf = config_json(config)
    theirs = checks.transformers_parameters(transformers.AutoConfig.for_model(**hf))
    assert parameters(config).total == theirs
    assert config_from_hf_dict(hf, name) == config  # the preset is what its config.json reads as
    assert theirs == STATED.get(name, theirs)
    assert abs(theirs - CARDS[name]) < 0.05 * CARDS[name]


@pytest.mark.parametrize("bias, tied", [(False, False), (True, True)])
def test_kinds_name_every_tensor_and_add_up(bias, tied):
    config = config_from_hf_dict({"model_type": "qwen3", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 20,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "head_dim": 6, "attention_bias": bias, "tie_word_embeddings": tied}, "x")  # fmt: skip
    p = parameters(config)
    assert sum(p.kinds.values()) == p.total == sum(t.count for t in p.tensors)
    assert p.kinds["norms"] == 2 * (2 * 16 + 2 * 6) + 16  # ln_1, ln_2 [D] and q_norm, k_norm [dh] a layer; ln_f
    assert p.kinds.get("biases", 0) == bias * 2 * (4 * 6 + 2 * 2 * 6 + 16)  # q, k, v and o
    assert ARCHITECTURE.layout.kind("layers.1.self_attn.k_norm.weight", config) == "norms"
    hf = {"model_type": "qwen3", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 20, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6, "attention_bias": bias,
          "tie_word_embeddings": tied}  # fmt: skip
    assert p.total == checks.transformers_parameters(transformers.AutoConfig.for_model(**hf))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 4, 6]), st.integers(1, 40),
       st.integers(2, 100), st.booleans(), st.booleans(), st.one_of(st.none(), st.integers(0, 3)))  # fmt: skip
def test_config_json_counts_agree_with_transformers(L, Hkv, G, dh, F, V, bias, tied, window_from):
    """Any small Qwen3 config.json, read by us and by transformers, counts the same (a window changes nothing)."""
    hf = {"model_type": "qwen3", "hidden_size": 8, "intermediate_size": F, "num_hidden_layers": L,
          "num_attention_heads": Hkv * G, "num_key_value_heads": Hkv, "head_dim": dh, "vocab_size": V,
          "attention_bias": bias, "tie_word_embeddings": tied, "use_sliding_window": window_from is not None,
          "sliding_window": 3, "max_window_layers": window_from or 0}  # fmt: skip
    assert parameters(config_from_hf_dict(hf, "random")).total == checks.transformers_parameters(
        transformers.AutoConfig.for_model(**hf))  # fmt: skip
