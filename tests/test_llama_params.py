"""The Llama family's parameter table: each tensor by its HF name, kinds that add up, totals that transformers agrees with."""

from __future__ import annotations

import pytest

from minitransformer.config import config_from_hf_dict


@pytest.mark.parametrize("model_type, biases", [
    ("llama", (True, True, True)),  # LlamaConfig: attention_bias on q, k, v and o; mlp_bias on the MLP
    ("mistral", (False, False, False)),  # MistralAttention and MistralMLP: bias=False, whatever the config says
    ("qwen2", (True, False, False)),  # Qwen2Attention: bias=True on q, k, v only; Qwen2MLP: bias=False
])  # fmt: skip
def test_biases_are_read_only_where_transformers_has_them(model_type, biases):
    hf = {"model_type": model_type, "hidden_size": 16, "intermediate_size": 7, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 11, "attention_bias": True,
          "mlp_bias": True}  # fmt: skip
    config = config_from_hf_dict(hf, "x")
    assert (config.qkv_bias, config.o_bias, config.mlp_bias) == biases
