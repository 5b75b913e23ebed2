"""The Llama family's parameters: each tensor by its HF name, kinds that add up, totals that transformers agrees with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.table import ARCHITECTURES, PRESETS, config_from_hf_dict
from minitransformer.verbs import formulas
from minitransformer.verbs.params import kind_of, parameters
from minitransformer.views.params_report import params_report

LLAMA_PRESETS = [name for name, c in PRESETS.items() if c.family == "llama"]


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


# --- the table ----------------------------------------------------------------------------------------------
def test_llama2_7b_has_6_738_415_616_parameters():
    p = parameters(PRESETS["llama2-7b"])
    assert p.total == 6_738_415_616 == formulas.parameters(PRESETS["llama2-7b"])
    D, F, V, L = 4096, 11008, 32000, 32
    assert p.kinds == {
        "token_embedding": V * D,
        "attention_q": L * D * D,
        "attention_k": L * D * D,
        "attention_v": L * D * D,
        "attention_out": L * D * D,
        "mlp_gate": L * D * F,
        "mlp_up": L * D * F,
        "mlp_down": L * F * D,
        "norms": 2 * L * D + D,
        "unembedding": V * D,
    }
    assert not p.tied_embeddings and "biases" not in p.kinds  # no biases, so no such kind
    assert len(p.tensors) == 1 + 9 * L + 2


# Totals published for these checkpoints (their safetensors metadata): the presets' shapes are theirs.
PUBLISHED = {
    "llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320, "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248, "llama3.1-70b": 70_553_706_496, "llama3.2-1b": 1_235_814_400,
    "mistral-7b": 7_241_732_096, "qwen2.5-0.5b": 494_032_768, "qwen2.5-7b": 7_615_616_512,
}  # fmt: skip


@pytest.mark.parametrize("name", LLAMA_PRESETS)
def test_every_llama_preset_has_its_published_total(name):
    assert parameters(PRESETS[name]).total == formulas.parameters(PRESETS[name]) == PUBLISHED[name]
    assert set(PUBLISHED) == set(LLAMA_PRESETS)


def test_kinds_name_every_llama_tensor_and_add_up():
    config = PRESETS["qwen2.5-0.5b"]  # q, k, v biases; tied embeddings; grouped-query attention
    p = parameters(config)
    assert kind_of("embed_tokens.weight", config) == "token_embedding" and kind_of("norm.weight", config) == "norms"
    assert kind_of("layers.7.self_attn.k_proj.weight", config) == "attention_k"
    assert kind_of("layers.7.self_attn.q_proj.bias", config) == "biases"
    assert kind_of("layers.0.mlp.down_proj.weight", config) == "mlp_down"
    assert kind_of("layers.3.post_attention_layernorm.weight", config) == "norms"
    with pytest.raises(ValueError):
        kind_of("layers.3.self_attn.rotary_emb.inv_freq", config)
    assert sum(p.kinds.values()) == p.total == sum(t.count for t in p.tensors)
    assert p.kinds["biases"] == 24 * (896 + 2 * 128) and p.kinds["attention_k"] == 24 * 128 * 896
    assert p.tied_embeddings and "unembedding" not in p.kinds
    report = params_report(p)
    assert "layers.{i}.self_attn.k_proj.weight" in report and "[128, 896]" in report and "x 24" in report
    assert "14 heads of 64 sharing 2 key/value heads" in report and "tied: counted once" in report
    assert "494,032,768 parameters" in report and "bfloat16 or float16: 988 MB" in report
    assert set(p.to_dict()["kinds"]) <= set(ARCHITECTURES["llama"].layout.kinds)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 50), st.integers(1, 8), st.integers(1, 4), st.sampled_from([2, 8, 64, 128]), st.booleans(),
       st.integers(1, 5000), st.integers(1, 200_000), st.booleans(), st.booleans(), st.booleans(),
       st.booleans())  # fmt: skip
def test_llama_table_equals_the_closed_form(L, Hkv, G, dh, own_dh, F, V, qkv, o, mlp, tied):
    H = Hkv * G
    config = LlamaConfig(n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=H * dh + (8 if own_dh else 0),
                         head_dim=dh if own_dh else None, n_inner=F, vocab_size=V, qkv_bias=qkv, o_bias=o, mlp_bias=mlp,
                         tie_word_embeddings=tied)  # fmt: skip
    assert parameters(config).total == formulas.parameters(config)


# --- against transformers -------------------------------------------------------------------------------------
def hf_dict(config: LlamaConfig) -> dict:
    """The config.json a transformers model of these shapes has (biases as each model type spells them)."""
    d = {"model_type": config.model_type, "hidden_size": config.n_embd, "intermediate_size": config.d_ff,
         "num_hidden_layers": config.n_layer, "num_attention_heads": config.n_head,
         "num_key_value_heads": config.n_kv_head, "head_dim": config.d_head, "vocab_size": config.vocab_size,
         "max_position_embeddings": config.n_positions, "tie_word_embeddings": config.tie_word_embeddings}  # fmt: skip
    if config.model_type == "llama":
        assert config.qkv_bias == config.o_bias
        d |= {"attention_bias": config.qkv_bias, "mlp_bias": config.mlp_bias}
    if config.model_type == "mistral":
        d["sliding_window"] = config.sliding_window
    return d


def transformers_count(hf: dict) -> int:
    """transformers' own count: the model built on the meta device (no memory), a tied embedding counted once."""
    torch = pytest.importorskip("torch", reason="torch (the hf extra) is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers (the hf extra) is not installed")
    config = transformers.AutoConfig.for_model(**hf)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", LLAMA_PRESETS)
def test_every_llama_preset_agrees_with_transformers(name):
    config = PRESETS[name]
    assert parameters(config).total == transformers_count(hf_dict(config))
    assert parameters(config_from_hf_dict(hf_dict(config), name)).total == parameters(config).total


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["llama", "mistral", "qwen2"]), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from([2, 4, 6]), st.booleans(), st.integers(1, 40), st.integers(2, 100), st.booleans(), st.booleans(),
       st.booleans())  # fmt: skip
def test_config_json_counts_agree_with_transformers(model_type, L, Hkv, G, dh, own_dh, F, V, bias, mlp_bias, tied):
    """A config.json of any of the three model types, read by us and by transformers, counts the same."""
    H = Hkv * G
    hf = {"model_type": model_type, "hidden_size": H * (dh + 2 if own_dh else dh), "intermediate_size": F,
          "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": Hkv, "vocab_size": V,
          "attention_bias": bias, "mlp_bias": mlp_bias, "tie_word_embeddings": tied}  # fmt: skip
    if own_dh:
        hf["head_dim"] = dh
    assert parameters(config_from_hf_dict(hf, "random")).total == transformers_count(hf)
