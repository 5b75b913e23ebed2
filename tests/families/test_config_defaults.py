"""A config.json read as the file spells it, in every family: a key that changes the model's shapes and that the file
leaves out is refused, follows from the file's other keys, or takes transformers' default with a note on stderr that
says which and what (families/config.py's SIZE states the rule; each family's declaration marks its keys); and a key the file gives wrongly is refused
under the file's own spelling, never under the field it fills (mamba2's head_dim once came back as ssm_head_dim).

One preset of each model_type is the complete config.json (its config writes every key it reads); taking keys out of
it, or spoiling them, is how each family is driven."""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from conftest import run_cli
from minitransformer import UserError
from minitransformer.families.keys import Fixed, listed
from minitransformer.families.table import ARCHITECTURES, PRESETS, read_config
from minitransformer.models.config import load_config


def one_preset_per_model_type() -> dict[str, dict]:
    """model_type -> the config.json of its first preset (as transformers reads it)."""
    found: dict[str, dict] = {}
    for config in PRESETS.values():
        hf = config.to_hf_dict()
        found.setdefault(hf["model_type"], hf)
    return found


CONFIGS = one_preset_per_model_type()
# Every config.json key that sets a model's shapes in some family (each family's declaration says which of its keys do)
SHAPE_KEYS = frozenset().union(*(architecture.config.shape_keys() for architecture in ARCHITECTURES.values()))

# Shape keys whose absence the family resolves from the file's other keys, as transformers does, so no default is
# taken for them: by model_type, the key and what it then is.
FOLLOWS = {
    ("gpt2", "n_inner"): "4 n_embd",
    ("llama", "num_key_value_heads"): "num_attention_heads (one key/value head a query head)",
    ("olmo2", "num_key_value_heads"): "num_attention_heads",
    ("olmo3", "num_key_value_heads"): "num_attention_heads",
    ("olmo3", "layer_types"): "Olmo3Config's rule: three sliding layers to a full one",
    ("exaone4", "head_dim"): "hidden_size / num_attention_heads, as Exaone4Attention's getattr",
    ("phi3", "num_key_value_heads"): "num_attention_heads",
    ("qwen3_moe", "head_dim"): "hidden_size / num_attention_heads",
    ("ernie4_5_moe", "head_dim"): "hidden_size / num_attention_heads (Ernie4_5_MoeConfig has no head_dim of its own)",
    ("cohere2", "num_key_value_heads"): "num_attention_heads",
    ("cohere2", "head_dim"): "hidden_size / num_attention_heads, as Cohere2Config's __post_init__ sets it",
    ("cohere2", "layer_types"): "Cohere2Config's rule: every sliding_window_pattern-th layer full, the rest sliding",
    ("gemma4_text", "layer_types"): "Gemma4TextConfig's rule: five sliding layers to a full one, the last full",
    ("qwen3_moe", "mlp_only_layers"): "none: every layer sparse",
    ("mixtral", "sliding_window"): "none: MixtralConfig's default is no window",
    ("phi3", "sliding_window"): "none: Phi3Config's default is no window",
    ("qwen3", "sliding_window"): "none: use_sliding_window is false",
    ("qwen3_moe", "sliding_window"): "none: use_sliding_window is false",
    ("smollm3", "sliding_window"): "none: use_sliding_window is false",
    ("smollm3", "layer_types"): "SmolLM3Config's rule: full attention, sliding in the NoPE layers where windowed",
    ("lfm2", "layer_types"): "Lfm2Config's rule: attention in the layers full_attn_idxs names (all without it)",
    ("qwen3_next", "layer_types"): "Qwen3NextConfig's rule: every full_attention_interval-th layer full attention",
    ("qwen3_next", "mlp_only_layers"): "none: every layer sparse",
    ("gemma2", "layer_types"): "Gemma 2's rule: sliding and full layers alternate",
    ("gpt_oss", "layer_types"): "GptOssConfig's rule: sliding and full layers alternate",
    ("deepseek_v32", "mlp_layer_types"): "first_k_dense_replace dense layers, then sparse",
    ("deepseek_v4", "layer_types"): "DeepseekV4Config's rule: two 128:1 layers, then 4:1 and 128:1 in turn",
    ("deepseek_v4", "mlp_layer_types"): "DeepseekV4Config's rule: the first num_hash_layers (3) hash-routed",
    ("deepseek_v4", "partial_rotary_factor"): "DeepseekV4Config's rule: qk_rope_head_dim / head_dim, or 1/8",
    ("deepseek_v4", "compress_rates"): "DeepseekV4Config's: 4 and 128 (or compress_rate_csa / _hca)",
    ("deepseek_v3", "num_key_value_heads"): "not read: MLA gives every head its own keys and values",
    ("deepseek_v32", "num_key_value_heads"): "not read: MLA gives every head its own keys and values",
    ("glm4_moe_lite", "mlp_layer_types"): "Glm4MoeLiteConfig's rule: the first layer dense, then sparse",
    ("glm4_moe_lite", "num_key_value_heads"): "not read: MLA gives every head its own keys and values",
    ("glm_moe_dsa", "indexer_types"): "GlmMoeDsaConfig's rule: index_topk_freq 1, every layer its own indexer",
    ("glm_moe_dsa", "mlp_layer_types"): "first_k_dense_replace dense layers, then sparse",
    ("glm_moe_dsa", "num_key_value_heads"): "not read: MLA gives every head its own keys and values",
    ("nemotron_h", "moe_intermediate_size"): "not read: this model has no experts",
    ("nemotron_h", "moe_shared_expert_intermediate_size"): "not read: this model has no experts",
    ("nemotron_h", "moe_latent_size"): "none: experts work in the model's width",
    ("bamba", "attn_layer_indices"): "none: every layer Mamba-2, as BambaConfig's default",
    ("bamba", "mamba_d_head"): "auto: mamba_expand hidden_size / mamba_n_heads, as BambaConfig computes it",
    ("granitemoehybrid", "layer_types"): "every layer Mamba-2, as GraniteMoeHybridConfig's default",
    ("granitemoehybrid", "mamba_d_head"): "auto: mamba_expand hidden_size / mamba_n_heads",
    ("granitemoehybrid", "num_key_value_heads"): "num_attention_heads",
    ("falcon_h1", "mamba_d_head"): "auto: mamba_d_ssm / mamba_n_heads",
    ("falcon_h1", "num_key_value_heads"): "num_attention_heads",
    ("mamba", "intermediate_size"): "expand hidden_size, as MambaConfig's __post_init__ sets it",
    ("mamba", "time_step_rank"): "auto: ceil(hidden_size / 16)",
    ("falcon_mamba", "intermediate_size"): "expand hidden_size",
    ("falcon_mamba", "time_step_rank"): "auto: ceil(hidden_size / 16)",
    ("jamba", "mamba_dt_rank"): "auto: ceil(hidden_size / 16), as JambaConfig's __post_init__ sets it",
    ("kimi_linear", "layer_types"): "KimiLinearConfig's rule: linear_attn_config's lists, or layers 4, 8, ... full",
    ("kimi_linear", "mlp_layer_types"): "first_k_dense_replace dense layers, then sparse",
    ("kimi_linear", "num_key_value_heads"): "not read: MLA gives every head its own keys and values",
    ("minimax", "layer_types"): "MiniMaxConfig's rule: softmax and lightning layers alternate, softmax first",
    ("minimax", "head_dim"): "hidden_size / num_attention_heads",
    ("minimax", "num_key_value_heads"): "num_attention_heads",
    ("falcon_h1", "head_dim"): "hidden_size / num_attention_heads",
    ("llama4_text", "layer_types"): "Llama4TextConfig's rule: chunked where no_rope_layers turns and a chunk is set",
    ("llama4_text", "moe_layers"): "Llama4TextConfig's rule: every interleave_moe_layer_step-th layer",
    ("llama4_text", "no_rope_layers"): "Llama4TextConfig's rule: every no_rope_layer_interval-th layer NoPE",
}


def load(tmp_path: Path, hf: dict, capsys) -> tuple[object, list[str]]:
    """The config a config.json holding `hf` loads into, or the UserError it is refused with; and the notes said."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    try:
        config = load_config(path)
    except UserError as err:
        config = err
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    return config, captured.err.splitlines()


def noted(notes: list[str]) -> dict[str, object]:
    """The key and value each note names: "... has no KEY: transformers' default for T, VALUE, taken (...)"."""
    found = {}
    for line in notes:
        match = re.fullmatch(r"minitransformer: note: .* has no ([\w.]+): transformers' default for \w+, (.+), taken "
                             r"\(it sets the model's shapes\)", line)  # fmt: skip
        assert match, line
        found[match[1]] = json.loads(match[2])
    return found


@pytest.mark.parametrize("model_type", CONFIGS)
def test_a_complete_config_json_loads_without_a_note(tmp_path, capsys, model_type):
    config, notes = load(tmp_path, CONFIGS[model_type], capsys)
    assert not isinstance(config, UserError), config
    assert notes == []


@pytest.mark.parametrize("model_type", CONFIGS)
def test_a_shape_key_left_out_is_refused_follows_from_the_others_or_is_said_once(tmp_path, capsys, model_type):
    complete = CONFIGS[model_type]
    for key in [k for k in complete if k in SHAPE_KEYS]:
        hf = {k: v for k, v in complete.items() if k != key}
        (tmp_path / key).mkdir()
        config, notes = load(tmp_path / key, hf, capsys)
        said = noted(notes)
        assert len(said) == len(notes), notes  # a line a key
        assert set(said) <= SHAPE_KEYS and not set(said) & set(hf), (key, notes)  # only shape keys the file lacks
        if isinstance(config, UserError) or (model_type, key) in FOLLOWS:
            continue
        assert said, f"{model_type}: {key} left out, read without a note and without refusal"
        if key in said and isinstance(said[key], int):  # the default said is the one the model took
            assert config.to_hf_dict()[key] == said[key], (key, said[key], config.to_hf_dict()[key])


@pytest.mark.parametrize("model_type", CONFIGS)
def test_a_key_that_is_not_a_shape_key_left_out_takes_its_default_without_a_note(tmp_path, capsys, model_type):
    complete = CONFIGS[model_type]
    hf = {k: v for k, v in complete.items() if k in SHAPE_KEYS or k == "model_type"}
    config, notes = load(tmp_path, hf, capsys)
    assert not isinstance(config, UserError), config
    assert notes == []


def test_the_issue_s_two_silent_defaults_are_said_on_stderr_once_each_and_the_count_is_unchanged(tmp_path):
    qwen = {k: v for k, v in CONFIGS["qwen3_5_text"].items() if k != "linear_num_value_heads"}
    mamba = {k: v for k, v in CONFIGS["mamba2"].items() if k != "n_groups"}
    for name, hf, key, value in (("qwen", qwen, "linear_num_value_heads", 32), ("mamba", mamba, "n_groups", 8)):
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(hf))
        done = run_cli("count", "--config", str(path), "--tokens", "10")
        full = tmp_path / name / "full.json"
        full.write_text(json.dumps({**hf, key: value}))
        same = run_cli("count", "--config", str(full), "--tokens", "10")
        assert done.returncode == 0 and same.returncode == 0, done.stderr + same.stderr
        assert done.stderr.splitlines() == [
            f"minitransformer: note: {path} has no {key}: transformers' default for {hf['model_type']}, {value}, "
            f"taken (it sets the model's shapes)"
        ], done.stderr
        assert same.stderr == ""
        assert done.stdout.replace(str(path), str(full)) == same.stdout  # the note is all that differs


def test_a_multimodal_checkpoint_s_text_config_is_named_by_its_dotted_key(tmp_path, capsys):
    text = {k: v for k, v in CONFIGS["qwen3_5_text"].items() if k not in ("linear_conv_kernel_dim", "architectures")}
    config, notes = load(tmp_path, {"model_type": "qwen3_5", "text_config": text}, capsys)
    assert noted(notes) == {"text_config.linear_conv_kernel_dim": 4}, notes
    assert config.linear_kernel == 4


# --- errors name the key as the file spells it -----------------------------------------------------------------
def spelled(key: str, message: str) -> bool:
    """`key` named in `message` as a whole key (head_dim, not the tail of ssm_head_dim)."""
    return re.search(rf"(?<![\w.]){re.escape(key)}(?!\w)", message) is not None


@pytest.mark.parametrize("model_type", CONFIGS)
def test_every_size_given_wrongly_is_refused_under_the_file_s_own_key(tmp_path, capsys, model_type):
    complete = CONFIGS[model_type]
    sizes = [k for k, v in complete.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0
             and k in SHAPE_KEYS and (model_type, k) not in FOLLOWS]  # fmt: skip
    assert sizes
    for key in sizes:
        (tmp_path / key).mkdir()
        config, _ = load(tmp_path / key, {**complete, key: "64"}, capsys)
        assert isinstance(config, UserError), f"{model_type}: {key}='64' was read"
        assert spelled(key, str(config)), f"{model_type}: {key}='64' refused as: {config}"


@pytest.mark.parametrize("model_type, key, value, message", [
    ("mamba2", "head_dim", "64", "config head_dim must be a positive integer, not '64'"),
    ("mamba2", "num_heads", 0, "config num_heads must be a positive integer, not 0"),
    ("nemotron_h", "ssm_state_size", 1.5, "config ssm_state_size must be a positive integer, not 1.5"),
    ("qwen3_5_text", "linear_num_value_heads", True, "config linear_num_value_heads must be a positive integer, not True"),
    ("qwen3_moe", "moe_intermediate_size", -1, "config moe_intermediate_size must be a positive integer, not -1"),
    ("deepseek_v3", "routed_scaling_factor", "2.5", "config routed_scaling_factor must be a positive number, not '2.5'"),
    ("gemma2", "hidden_activation", "swish2", "config hidden_activation='swish2' is not supported"),
    ("mixtral", "num_experts_per_tok", 9, "config num_experts_per_tok=9 exceeds num_local_experts=8"),
    ("gpt_oss", "num_local_experts", 0, "config num_local_experts must be a positive integer, not 0"),
    ("gemma3_text", "layer_types", 3, "config layer_types must be a list, not 3"),
    ("deepseek_v32", "mlp_layer_types", "dense", "config mlp_layer_types must be a list, not 'dense'"),
])  # fmt: skip
def test_named_refusals(tmp_path, capsys, model_type, key, value, message):
    config, _ = load(tmp_path, {**CONFIGS[model_type], key: value}, capsys)
    assert isinstance(config, UserError) and str(config).startswith(message), config


def test_a_numpy_number_is_taken_as_the_number_it_holds():
    """GPT2Config(n_layer=np.int64(2)) was refused: "n_layer must be a positive integer ..., not np.int64(2)"."""
    import numpy as np

    from minitransformer.families.gpt2.config import GPT2Config

    sizes = dict(n_layer=2, n_head=2, n_embd=8, n_positions=16, vocab_size=32, norm_eps=2.0**-20)
    python, numpy = GPT2Config(**sizes), GPT2Config(**{k: np.float32(v) if k == "norm_eps" else np.int64(v)
                                                       for k, v in sizes.items()})  # fmt: skip
    assert numpy == python and json.dumps(numpy.to_dict()) == json.dumps(python.to_dict()), numpy
    assert type(numpy.n_layer) is int and type(numpy.norm_eps) is float, (type(numpy.n_layer), type(numpy.norm_eps))
    with pytest.raises(
        UserError, match=re.escape("config n_layer must be a positive integer of at most 10,000, not 0")
    ):
        GPT2Config(**{**sizes, "n_layer": np.int64(0)})


# --- the defaults are transformers' ---------------------------------------------------------------------------
# Keys that transformers' config class reads without declaring a default of its own (an attribute its model reads with
# getattr, an older spelling its __post_init__ converts): why each is read with ours.
UNDECLARED = {
    "head_dim": "absent: D / H, as the attention's getattr(config, 'head_dim', D // H)",
    "qk_rope_head_dim": "DeepSeek-V4's older spelling, which DeepseekV4Config folds into partial_rotary_factor",
    "compress_ratios": "DeepSeek-V4's older spelling of layer_types (each layer's rate), folded in by __post_init__",
    "num_hash_layers": "DeepSeek-V4's older spelling of mlp_layer_types (its first layers hash-routed)",
    "sliding_window_pattern": "Gemma 3's older spelling of layer_types: a full layer in 6, as Gemma3TextConfig converts",
    "full_attention_interval": "Qwen3.5's older spelling of layer_types: a full layer in 4, as its config converts",
    "hybrid_override_pattern": "Nemotron-H's older spelling of layers_block_type (a property of NemotronHConfig)",
    "block_ff_dim": "LFM2's older spelling of intermediate_size, which Lfm2Config's __post_init__ takes over it",
    "tie_embedding": "LFM2's older spelling of tie_word_embeddings, which Lfm2Config's __post_init__ takes over it",
    "index_topk_pattern": "GLM-5's F/S spelling of indexer_types, which GlmMoeDsaConfig converts (none: by frequency)",
    "index_topk_freq": "GLM-5's rule for indexer_types, which GlmMoeDsaConfig reads from its kwargs (1: all full)",
    "index_skip_topk_offset": "the first layer that rule may share, GlmMoeDsaConfig's kwarg (2)",
    "intermediate_size": "Mamba's: expand hidden_size, which MambaConfig's __post_init__ sets where a file has none",
    "linear_attn_config": "Kimi Linear's published spelling of its KDA shapes and layers (full_attn_layers and kda_layers "
    "from 1), which KimiLinearConfig's __post_init__ reads over linear_head_dim, linear_num_heads, "
    "linear_conv_kernel_dim and its rule for layer_types",
    "first_k_dense_replace": "Kimi Linear's rule for mlp_layer_types, which KimiLinearConfig reads from its kwargs (1)",
}
TYPES = [(t, a.config) for a in ARCHITECTURES.values() for t in a.config.classes]


def declared(config) -> list:
    """Every key a family's config declares: its fields' and those their rules and readers read."""
    found, todo = [], [entry for _, entry in config.keys()]
    while todo:
        entry = todo.pop(0)
        found.append(entry)
        todo += entry.reads
    return found


@pytest.mark.parametrize("model_type, config", TYPES, ids=[t for t, _ in TYPES])
def test_every_default_declared_is_transformers_own(model_type, config):
    """Where a file leaves a key out, the family takes what transformers 5.24's config class of its model_type takes:
    its class default (those a file must give, those a model type reads not at all, and those read by rules of
    their own aside)."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    theirs = type(transformers.AutoConfig.for_model(model_type))
    compared = 0
    for entry in declared(config):
        ours = entry.default_for(model_type)
        if ours is MISSING or isinstance(ours, Fixed) or entry.required or entry.read is not None:
            continue
        their = getattr(theirs, entry.json, property())
        if isinstance(their, property):
            assert entry.json in UNDECLARED, f"{model_type}: {entry.json} has no default in {theirs.__name__}"
            continue
        assert listed(ours) == listed(their), (model_type, entry.json, ours, their)
        compared += 1
    assert compared >= 5, compared


CLASSES = list({id(a.config): (name, a.config) for name, a in ARCHITECTURES.items()}.values())


@pytest.mark.parametrize("name, config", CLASSES, ids=[name for name, _ in CLASSES])
def test_every_config_class_built_from_its_defaults_is_a_model_or_says_what_it_needs(name, config):
    """The API's config classes called with nothing but what they require (the Llama family's sizes are required
    arguments): a model of transformers' defaults, or a UserError that says what to give (LFM2-MoE's layer_types,
    which Lfm2MoeConfig has no default for), never an exception from inside."""
    required = {f.name: 64 for f in fields(config) if f.default is MISSING and f.default_factory is MISSING}
    try:
        built = config(**required)
    except UserError as error:
        assert str(error).startswith("config "), (name, str(error))
        return
    assert built.n_layer > 0 and built.n_embd > 0, (name, built.n_layer, built.n_embd)


# Every mixture's k of E is checked once, for every family (ModelConfig.__post_init__), under the family's own keys:
# a config.json asking each token for more experts than there are is refused by name, never run.
MIXTURES = {config.family: config for config in PRESETS.values() if config.n_experts}  # a preset of each


@pytest.mark.parametrize("family", sorted(MIXTURES))
def test_every_mixture_refuses_more_experts_a_token_than_it_has(tmp_path, capsys, family):
    preset = MIXTURES[family]
    hf = preset.to_hf_dict()
    k_key, e_key = preset.key("top_k"), preset.key("n_experts")
    assert hf[e_key] == preset.n_experts, (e_key, hf.get(e_key), preset.n_experts)
    config, _ = load(tmp_path, {**hf, k_key: preset.n_experts + 1}, capsys)
    message = f"config {k_key}={preset.n_experts + 1} exceeds {e_key}={preset.n_experts}"
    assert isinstance(config, UserError) and str(config) == message, (family, str(config), message)


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_quantized_weights_are_refused_in_every_family_naming_their_method(model_type):
    """No family reads quantized weights (fp8 blocks with their scales, MXFP4, NVFP4, GPTQ...): a quantization_config
    is refused by name and method, in every family, a count's config too (its bytes would be another model's); a null
    one is no quantization."""
    hf = CONFIGS[model_type]
    for method in ("fp8", "modelopt", "gptq"):
        with pytest.raises(UserError, match=rf"config quantization_config \({method}"):
            read_config(hf | {"quantization_config": {"quant_method": method}}, name=model_type)
    assert read_config(hf | {"quantization_config": None}, name=model_type) == read_config(hf, name=model_type)


def test_a_multimodal_checkpoint_s_quantization_is_refused_too():
    """nvidia/Gemma-4-31B-IT-NVFP4's config.json: Gemma 4's wrapper, its quantization_config beside text_config."""
    wrapper = {"model_type": "gemma4", "text_config": CONFIGS["gemma4_text"]}
    with pytest.raises(UserError, match=r"config quantization_config \(modelopt\) is not supported"):
        read_config(wrapper | {"quantization_config": {"quant_method": "modelopt"}}, name="gemma-4-31b-nvfp4")
    assert read_config(wrapper, name="gemma-4-31b")[0].n_layer == CONFIGS["gemma4_text"]["num_hidden_layers"]
