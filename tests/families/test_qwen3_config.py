"""A Qwen3 config.json is read as transformers' Qwen3Config reads it (its defaults, its sliding-window keys), or refused
by name in one line: never silently computed some other way."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from minitransformer import UserError
from minitransformer.families.qwen3.config import Qwen3Config
from minitransformer.families.table import config_from_hf_dict

SMALL = {"model_type": "qwen3", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 3,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}  # fmt: skip


def read(**change) -> Qwen3Config:
    config = config_from_hf_dict(SMALL | change, "small")
    assert isinstance(config, Qwen3Config)
    return config


def test_what_a_config_json_leaves_out_is_qwen3configs_default():
    config = config_from_hf_dict({"model_type": "qwen3"}, "default")
    assert (config.n_layer, config.n_embd, config.n_head, config.n_kv_head, config.d_head, config.d_ff) == (
        32, 4096, 32, 32, 128, 22016)  # fmt: skip
    assert (config.vocab_size, config.n_positions, config.norm_eps, config.rope_theta) == (151936, 32768, 1e-6,
                                                                                               10000.0)  # fmt: skip
    assert not config.qkv_bias and not config.o_bias and not config.tie_word_embeddings
    assert config.sliding_window is None and set(config.layer_types) == {"full_attention"}
    assert read(num_key_value_heads=None).n_kv_head == 4  # None: one per query head


def test_the_head_size_is_its_own_number_not_d_over_h():
    without = {k: v for k, v in SMALL.items() if k != "head_dim"}
    assert config_from_hf_dict(without, "x").d_head == 128  # Qwen3Config's default, not 16 / 4


def test_attention_bias_is_on_q_k_v_and_o():
    config = read(attention_bias=True)
    assert config.qkv_bias and config.o_bias and not config.mlp_bias


@pytest.mark.parametrize("change, windows, kinds", [
    ({"sliding_window": 5}, [None, None, None], None),  # use_sliding_window false: no window, whatever the width
    ({"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1}, [None, 5, 5],
     ("full_attention", "sliding_attention", "sliding_attention")),
    ({"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 0}, [5, 5, 5], None),
    ({"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 3}, [None, None, None], None),
    ({"use_sliding_window": True, "sliding_window": 5, "layer_types": ["sliding_attention", "full_attention",
                                                                      "full_attention"]}, [5, None, None],
     ("sliding_attention", "full_attention", "full_attention")),
    ({"use_sliding_window": True}, [None, None, None], None),  # 4096 from layer 28 on: none of these 3 layers
])  # fmt: skip
def test_the_window_falls_on_the_layers_qwen3config_gives_it(change, windows, kinds):
    config = read(**change)
    assert [config.layer_window(i) for i in range(3)] == windows
    assert config.layer_types == (kinds or tuple("sliding_attention" if w else "full_attention" for w in windows))
    assert config.prefix(1).layer_types == config.layer_types[:1]


REFUSED = [
    ({"layer_types": ["sliding_attention", "full_attention", "full_attention"]},
     "config layer_types has sliding_attention layers but use_sliding_window is false"),
    ({"use_sliding_window": True, "layer_types": ["chunked_attention"] * 3},
     "config layer_types=['chunked_attention', 'chunked_attention', 'chunked_attention'] is not supported"),
    ({"layer_types": ["full_attention"]}, "config layer_types must name 3 layers, not 1"),
    ({"use_sliding_window": "yes"}, "config use_sliding_window must be true or false, not 'yes'"),
    ({"use_sliding_window": True, "sliding_window": 0, "max_window_layers": 0},
     "config sliding_window must be a positive integer, not 0"),
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6, "factor": 4.0}}, "rope type 'dynamic' is not supported"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5}},
     "config partial_rotary_factor=0.5 is not supported"),
    ({"head_dim": None}, "config head_dim must be a positive integer, not None"),
    ({"use_sliding_window": True, "max_window_layers": None}, "config max_window_layers must be an integer, not None"),
    ({"num_hidden_layers": "3"}, "config num_hidden_layers must be a positive integer of at most 10,000, not '3'"),
    ({"head_dim": 7}, "config head_dim=7 is odd"),
    ({"num_key_value_heads": 3}, "num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
    ({"hidden_act": "gelu_10"}, "config hidden_act='gelu_10' is not supported"),
    ({"dtype": "int8"}, "config dtype='int8' is not supported"),
    ({"attention_bias": "true"}, "config attention_bias must be true or false"),
]  # fmt: skip


@pytest.mark.parametrize("change, message", REFUSED, ids=[m[:40] for _, m in REFUSED])
def test_what_transformers_would_compute_differently_is_refused_by_name(change, message):
    with pytest.raises(UserError) as refusal:
        read(**change)
    assert message in str(refusal.value) and "\n" not in str(refusal.value)


def test_the_command_line_refuses_in_one_line_with_exit_status_2(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMALL | {"layer_types": ["sliding_attention"] * 3}))
    result = run_cli("count", "--model", str(tmp_path), "--tokens", "5")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("minitransformer: error: config layer_types has sliding_attention layers but ")
    assert result.stderr.count("\n") == 1
