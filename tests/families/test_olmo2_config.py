"""An OLMo 2 config.json is read as transformers' Olmo2Config reads it (its defaults; head_dim when it has one; no
sliding window whatever it says), or refused by name in one line."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from minitransformer import UserError
from minitransformer.families.olmo2.config import Olmo2Config
from minitransformer.families.table import config_from_hf_dict

SMALL = {"model_type": "olmo2", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip


def read(**change) -> Olmo2Config:
    config = config_from_hf_dict(SMALL | change, "small")
    assert isinstance(config, Olmo2Config)
    return config


def test_what_a_config_json_leaves_out_is_olmo2configs_default():
    config = config_from_hf_dict({"model_type": "olmo2"}, "default")
    assert (config.n_layer, config.n_embd, config.n_head, config.n_kv_head, config.d_head, config.d_ff) == (
        32, 4096, 32, 32, 128, 11008)  # fmt: skip
    assert (config.vocab_size, config.n_positions, config.norm_eps, config.rope_theta) == (50304, 2048, 1e-5,
                                                                                               10000.0)  # fmt: skip
    assert config.eos_token_id == 50279 and not config.tie_word_embeddings
    assert not config.qkv_bias and not config.o_bias and not config.mlp_bias and config.sliding_window is None
    assert read(num_key_value_heads=None).n_kv_head == 4  # None: one per query head


def test_head_dim_is_read_where_a_config_json_has_it_and_d_over_h_where_not():
    assert read().d_head == 4 and read(head_dim=6).d_head == 6


def test_attention_bias_is_on_q_k_v_and_o_never_the_mlp():
    config = read(attention_bias=True, mlp_bias=True)
    assert config.qkv_bias and config.o_bias and not config.mlp_bias


def test_keys_olmo2_does_not_read_change_nothing():
    assert read(sliding_window=4, use_sliding_window=True, mlp_bias=True) == read()


REFUSED = [
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 4.0}}, "rope type 'dynamic' is not supported"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
     "config partial_rotary_factor=0.5 is not supported"),
    ({"num_key_value_heads": 3}, "num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
    ({"head_dim": 5}, "config head_dim=5 is odd"),
    ({"hidden_act": "gelu_10"}, "config hidden_act='gelu_10' is not supported"),
    ({"dtype": "int8"}, "config dtype='int8' is not supported"),
    ({"attention_bias": "false"}, "config attention_bias must be true or false"),
    ({"rms_norm_eps": 0}, "config rms_norm_eps must be a positive number, not 0"),
]  # fmt: skip


@pytest.mark.parametrize("change, message", REFUSED, ids=[m[:40] for _, m in REFUSED])
def test_what_transformers_would_compute_differently_is_refused_by_name(change, message):
    with pytest.raises(UserError) as refusal:
        read(**change)
    assert message in str(refusal.value) and "\n" not in str(refusal.value)


def test_the_command_line_refuses_in_one_line_with_exit_status_2(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMALL | {"rope_scaling": {"rope_type": "dynamic", "factor": 2}}))
    result = run_cli("count", "--model", str(tmp_path), "--tokens", "5")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("minitransformer: error: config rope type 'dynamic' is not supported (supported: default, "
                             "linear, llama3, yarn)\n")  # fmt: skip
