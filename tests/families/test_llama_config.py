"""A Llama-family config.json is honoured as transformers reads it, or refused by name in one line: never
silently computed some other way."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import hf_llama_fixture_dirs, run_cli
from minitransformer import UserError, load_model

FIXTURES = {d.name: d for d in hf_llama_fixture_dirs()}


def with_config(tmp_path, fixture: str, change: dict, drop: tuple[str, ...] = ()):
    """A copy of a fixture whose config.json differs as given (weights and logits unchanged)."""
    directory = tmp_path / fixture
    shutil.copytree(FIXTURES[fixture], directory)
    hf = json.loads((directory / "config.json").read_text())
    hf = {k: v for k, v in hf.items() if k not in drop} | change
    (directory / "config.json").write_text(json.dumps(hf))
    return directory


def rope(kind: str) -> dict:
    return {"rope_type": kind, "rope_theta": 10000.0, "factor": 2.0}


REFUSED = [
    ("llama_mha", {"model_type": "falcon"}, (), "config model_type='falcon' is not supported (supported: gpt2, "
                                               "llama, mistral, qwen2"),
    ("llama_mha", {"model_type": "bloom"}, (), "model_type='bloom' is not supported"),
    ("llama_mha", {"model_type": "mpt"}, (), "model_type='mpt' is not supported"),
    ("llama_mha", {"model_type": "rwkv"}, (), "model_type='rwkv' is not supported"),
    ("llama_mha", {"rope_parameters": rope("dynamic")}, (), "rope type 'dynamic' is not supported (supported: "
                                                            "default, linear, llama3, yarn)"),
    ("llama_mha", {"rope_parameters": rope("longrope")}, (), "rope type 'longrope' is not supported"),
    # transformers 4's spellings of the same
    ("llama_mha", {"rope_theta": 1e4, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, ("rope_parameters",),
     "rope type 'dynamic' is not supported"),
    ("llama_mha", {"rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}}, (),
     "rope type 'longrope' is not supported"),  # beside a rope_parameters of type default: rope_scaling wins
    ("qwen2_bias_bf16", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}, (),
     "config use_sliding_window=true (Qwen2 sliding attention on some layers) is not supported"),
    ("qwen2_bias_bf16", {"layer_types": ["full_attention", "sliding_attention"], "sliding_window": 4}, (),
     "use_sliding_window=true"),
    ("llama_mha", {"partial_rotary_factor": 0.5}, (), "config partial_rotary_factor=0.5 is not supported"),
    ("llama_mha", {"pretraining_tp": 2}, (), "config pretraining_tp=2 is not supported"),
    ("llama_mha", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}}, (),
     "config partial_rotary_factor=0.25 is not supported"),
    ("mistral_window", {"layer_types": ["full_attention", "sliding_attention"]}, (), "config layer_types (Mistral"),
    ("llama_mha", {}, ("hidden_size",), "config.json lacks hidden_size: a llama model needs its shapes spelled out"),
    ("llama_mha", {}, ("intermediate_size",), "config.json lacks intermediate_size"),
    ("mistral_window", {}, ("num_hidden_layers",), "config.json lacks num_hidden_layers: a mistral model"),
    ("qwen2_bias_bf16", {}, ("num_attention_heads", "vocab_size"), "config.json lacks num_attention_heads, vocab_size"),
    ("llama_mha", {"num_key_value_heads": 3}, (), "num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
    ("llama_mha", {"head_dim": 7}, (), "config head_dim=7 is odd; rotary embeddings rotate pairs"),
    ("llama_mha", {"hidden_act": "gelu_10"}, (), "config hidden_act='gelu_10' is not supported"),
    ("llama_mha", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}}, (),
     "rope scaling 'llama3' needs a positive low_freq_factor"),
    ("llama_mha", {"rope_scaling": "linear"}, (), "config rope_scaling must be an object, not 'linear'"),
    ("llama_mha", {"rope_parameters": "linear"}, (), "config rope_parameters must be an object, not 'linear'"),
    ("llama_mha", {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}}, (),
     "config rope_parameters per layer type (full_attention) is not supported"),
    ("llama_mha", {"rope_scaling": ["linear", 2.0]}, (), "config rope_scaling must be an object, not ['linear', 2.0]"),
    ("llama_mha", {"dtype": "int8"}, (), "config dtype='int8' is not supported"),
    ("mistral_window", {"sliding_window": 0}, (), "config sliding_window must be a positive integer, not 0"),
    ("llama_mha", {"rms_norm_eps": "1e-5"}, (), "config rms_norm_eps must be a positive number, not '1e-5'"),
    ("llama_gqa_bias", {"head_dim": 16}, (), "tensor layers.0.self_attn.q_proj.weight has shape [96, 64] but "
                                             "config.json implies [128, 64]"),
]  # fmt: skip


@pytest.mark.parametrize("fixture, change, drop, message", REFUSED,
                         ids=[f"{i}-{m[:40]}" for i, (_, _, _, m) in enumerate(REFUSED)])  # fmt: skip
def test_what_transformers_would_compute_differently_is_refused_by_name(fixture, change, drop, message, tmp_path):
    directory = with_config(tmp_path, fixture, change, drop)
    with pytest.raises(UserError) as refusal:
        load_model(directory)
    assert message in str(refusal.value) and "\n" not in str(refusal.value)


@pytest.mark.parametrize("command", [["generate", "--ids", "1,2"], ["trace", "--ids", "1,2"], ["validate"]])
def test_the_command_line_refuses_them_in_one_line_with_exit_status_2(command, tmp_path):
    directory = with_config(tmp_path, "llama_mha", {"rope_parameters": rope("dynamic")})
    result = run_cli(*command, "--model", str(directory))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "minitransformer: error: config rope type 'dynamic' is not supported (supported: default, " \
                            "linear, llama3, yarn)\n"  # fmt: skip


def stored_logits_match(directory) -> bool:
    model = load_model(directory)
    stored = np.load(directory / "logits.npz")
    return all(np.abs(model.logits(stored[f"ids_{i}"]) - stored[f"logits_{i}"]).max() <= 1e-4 * 10 for i in range(3))


@pytest.mark.parametrize("fixture, change", [
    ("llama_mha", {"sliding_window": 4}),  # LlamaModel has no sliding window, whatever config.json says
    ("mistral_window", {"attention_bias": True, "mlp_bias": True}),  # MistralAttention and MistralMLP have no biases
    ("qwen2_bias_bf16", {"mlp_bias": True, "attention_bias": False}),  # Qwen2: q, k, v biases always, MLP never
    ("qwen2_bias_bf16", {"use_sliding_window": False, "sliding_window": 4, "max_window_layers": 1}),
    ("llama_mha", {"partial_rotary_factor": 1.0, "pretraining_tp": 1, "rope_scaling": None}),
])  # fmt: skip
def test_keys_transformers_ignores_for_a_family_are_ignored_here_too(fixture, change, tmp_path):
    """The stored logits are transformers' for the config without these keys; test_llama_transformers checks that
    transformers computes the same logits with them."""
    directory = with_config(tmp_path, fixture, change)
    reference = load_model(FIXTURES[fixture]).config
    assert load_model(directory).config == reference
    assert stored_logits_match(directory)


def test_a_config_without_num_key_value_heads_has_one_per_query_head(tmp_path):
    directory = with_config(tmp_path, "llama_mha", {}, drop=("num_key_value_heads", "head_dim"))
    config = load_model(directory).config
    assert config.n_kv_head == config.n_head == 4 and config.d_head == 12
    assert stored_logits_match(directory)


def test_rope_scaling_replaces_rope_parameters_whole_as_in_transformers(tmp_path):
    """transformers 5 reads a non-empty rope_scaling instead of rope_parameters, theta included: without a
    top-level rope_theta it is 10,000 again (test_llama_transformers checks transformers computes the same)."""
    linear = {"rope_scaling": {"type": "linear", "factor": 4.0}}
    config = load_model(with_config(tmp_path / "a", "llama_gqa_bias", linear)).config
    assert config.rope_theta == 10000.0 and dict(config.rope_scaling) == {"rope_type": "linear", "factor": 4.0}
    config = load_model(with_config(tmp_path / "b", "llama_gqa_bias", linear | {"rope_theta": 500.0})).config
    assert config.rope_theta == 500.0 and dict(config.rope_scaling)["factor"] == 4.0
    both = {"rope_scaling": {"rope_type": "linear", "type": "default", "factor": 4.0}}  # rope_type wins
    assert (
        dict(load_model(with_config(tmp_path / "c", "llama_gqa_bias", both)).config.rope_scaling)["rope_type"]
        == "linear"
    )


def test_key_value_heads_left_out_default_as_in_transformers(tmp_path):
    """transformers' MistralConfig assumes 8 key/value heads, Qwen2Config 32, LlamaConfig one per query head."""
    transformers = pytest.importorskip("transformers", reason="needs transformers (the hf extra)")
    from minitransformer.families.table import config_from_hf_dict

    HFLlama, HFMistral, HFQwen2 = transformers.LlamaConfig, transformers.MistralConfig, transformers.Qwen2Config

    for hf_class, model_type in ((HFLlama, "llama"), (HFMistral, "mistral"), (HFQwen2, "qwen2")):
        shapes = {"model_type": model_type, "hidden_size": 1024, "intermediate_size": 64, "num_hidden_layers": 1,
                  "num_attention_heads": 32, "vocab_size": 10}  # fmt: skip
        theirs = hf_class(**{k: v for k, v in shapes.items() if k != "model_type"}).num_key_value_heads
        assert config_from_hf_dict(shapes, name="x").n_kv_head == theirs, model_type


def test_a_flag_given_as_a_string_is_refused_not_read_as_true():
    from minitransformer.families.table import config_from_hf_dict

    shapes = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 4, "vocab_size": 10, "tie_word_embeddings": "false"}  # fmt: skip
    with pytest.raises(UserError, match="tie_word_embeddings must be true or false"):
        config_from_hf_dict(shapes, name="x")


@pytest.mark.parametrize(("model_type", "kind"), [("llama", "llama3"), ("qwen2", "yarn"), ("smollm3", "yarn")])
@pytest.mark.parametrize("where", ["neither", "top-level", "both", "nowhere"])
def test_the_trained_context_is_found_where_transformers_finds_it(model_type, kind, where):
    """A rope that reads original_max_position_embeddings: transformers' standardize_rope_params, run again as the
    model builds its rope, takes a top-level key over the rope's own, and without either max_position_embeddings
    (the config class's default where the file has none). Ours refused a rope without it ("needs a positive
    original_max_position_embeddings"; still, where the file had no max_position_embeddings) and read the rope's own
    over a top-level one (logits 7.2 apart on a scale of 4.9)."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from minitransformer.families.table import config_from_hf_dict

    scaling = {"rope_type": kind, "factor": 4.0, **({"low_freq_factor": 1.0, "high_freq_factor": 4.0}
                                                     if kind == "llama3" else {})}  # fmt: skip
    if where == "both":
        scaling["original_max_position_embeddings"] = 64
    hf = dict(model_type=model_type, vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
              num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
              rope_parameters={**scaling, "rope_theta": 1e4},
              **({"original_max_position_embeddings": 128} if where in ("top-level", "both") else {}))  # fmt: skip
    config_class = transformers.AutoConfig.for_model(model_type).__class__
    config = config_class(**json.loads(json.dumps(hf)))  # a copy: transformers fills the rope's dict in place
    config.standardize_rope_params()  # as the model's rope does when it is built: a top-level key is read by then
    theirs = config.rope_parameters["original_max_position_embeddings"]
    if where == "nowhere":  # nor max_position_embeddings: transformers' attribute is its class's default
        hf.pop("max_position_embeddings")
        config = config_class(**json.loads(json.dumps(hf)))
        config.standardize_rope_params()
        theirs = config.rope_parameters["original_max_position_embeddings"]
    ours = dict(config_from_hf_dict(hf, "small").rope(0).parameters)["original_max_position_embeddings"]
    expected = {"neither": 256, "nowhere": config_class().max_position_embeddings}.get(where, 128)
    assert ours == theirs == expected, (ours, theirs)
