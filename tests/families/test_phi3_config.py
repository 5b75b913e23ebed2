"""The Phi-3 family's config: config.json read as transformers' Phi3Config reads it, every option that changes
inference honoured or refused by name, presets whose parameters equal transformers' count of the same config."""

from __future__ import annotations

import pytest

from minitransformer import UserError
from minitransformer.families.phi3.config import PRESETS, Phi3Config
from minitransformer.families.table import config_from_hf_dict
from minitransformer.verbs import formulas
from minitransformer.verbs.params import parameters

BASE = {"model_type": "phi3", "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50, "max_position_embeddings": 200,
        "original_max_position_embeddings": 64, "pad_token_id": 0, "eos_token_id": 2}  # fmt: skip
S4 = [1.0, 1.5, 2.0, 4.0]  # 4 factors: half of a head of 8 numbers


def read(**options) -> Phi3Config:
    config = config_from_hf_dict({**BASE, **options}, "x")
    assert isinstance(config, Phi3Config)
    return config


# Keys that transformers reads in its own way: each case's reading, checked against Phi3Config's below.
AS_TRANSFORMERS_READS = {
    "top-level-theta-and-partial": {"rope_theta": 300.0, "partial_rotary_factor": 0.5},
    "rope-parameters-win-over-top-level": {"rope_parameters": {"rope_type": "default", "rope_theta": 20.0},
                                           "rope_theta": 300.0, "partial_rotary_factor": 0.5},
    "partial-in-rope-parameters": {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}},
    "longrope-old-spelling": {"rope_scaling": {"type": "longrope", "short_factor": S4, "long_factor": S4[::-1]}},
    "yarn-read-as-longrope": {"rope_scaling": {"type": "yarn", "short_factor": S4, "long_factor": S4}},
    "top-level-original-wins": {"rope_scaling": {"type": "longrope", "short_factor": S4, "long_factor": S4,
                                                 "original_max_position_embeddings": 50}},
    "rope-scaling-replaces-rope-parameters": {
        "rope_scaling": {"rope_type": "longrope", "short_factor": S4, "long_factor": S4, "attention_factor": 1.5},
        "rope_parameters": {"rope_type": "default", "rope_theta": 5.0}},
}  # fmt: skip


@pytest.mark.parametrize("case", AS_TRANSFORMERS_READS)
def test_the_rope_keys_are_read_as_phi3config_reads_them(case):
    transformers = pytest.importorskip("transformers")
    options = AS_TRANSFORMERS_READS[case]
    theirs = transformers.Phi3Config(**{k: v for k, v in {**BASE, **options}.items() if k != "model_type"})
    rope = theirs.rope_parameters
    ours = read(**options)
    assert ours.rope_theta == rope["rope_theta"]
    assert ours.partial_rotary_factor == rope["partial_rotary_factor"]
    assert (ours.rope_scaling is not None) == (rope["rope_type"] == "longrope")
    if ours.rope_scaling is not None:
        mine = dict(ours.rope_scaling)
        assert ours.original_max_position_embeddings == rope["original_max_position_embeddings"] == 64
        assert list(mine["short_factor"]) == rope["short_factor"] and list(mine["long_factor"]) == rope["long_factor"]
        assert mine.get("attention_factor") == rope.get("attention_factor")


def test_transformers_defaults_fill_what_a_config_json_leaves_out():
    config = config_from_hf_dict({"model_type": "phi3"}, "x")  # Phi3Config's defaults: Phi-3-mini's shapes
    assert config == Phi3Config(n_layer=32, n_head=32, n_embd=3072, n_inner=8192, vocab_size=32064)
    assert (config.n_kv_head, config.n_positions, config.norm_eps, config.eos_token_id) == (32, 4096, 1e-5, 32000)
    assert config.sliding_window is None and config.rope_scaling is None and config.rotary_dim == 96


def test_the_attention_factor_is_longropes():
    scaled = read(rope_scaling={"type": "longrope", "short_factor": S4, "long_factor": S4})
    assert scaled.attention_factor == pytest.approx(
        (1 + 1.1394342831883648 / 4.1588830833596715) ** 0.5
    )  # ln 3.125, ln 64
    given = read(rope_scaling={"type": "longrope", "short_factor": S4, "long_factor": S4, "factor": 1.0})
    assert given.attention_factor == 1.0  # an extension of at most 1: no factor
    assert read().attention_factor == 1.0


REFUSED = {
    "rope type 'linear' is not supported for phi3": {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
    "rope type 'su'": {"rope_scaling": {"type": "su", "short_factor": S4, "long_factor": S4}},
    "per layer type": {"rope_parameters": {"full_attention": {"rope_type": "default"}}},
    "short_factor has 3 numbers": {"rope_scaling": {"type": "longrope", "short_factor": S4[:3], "long_factor": S4}},
    "needs long_factor": {"rope_scaling": {"type": "longrope", "short_factor": S4}},
    "'longrope' with beta_fast is not supported": {"rope_scaling": {"type": "longrope", "short_factor": S4,
                                                                   "long_factor": S4, "beta_fast": 32}},
    "head_dim=4": {"head_dim": 4},
    "partial_rotary_factor=0.4 turns 3 of each head's 8": {"partial_rotary_factor": 0.4},
    "partial_rotary_factor=0.1": {"partial_rotary_factor": 0.1},
    "dtype='float8_e4m3fn'": {"dtype": "float8_e4m3fn"},
    "hidden_act='mish'": {"hidden_act": "mish"},
    "sliding_window must be a positive integer": {"sliding_window": 0},
    "tie_word_embeddings must be true or false": {"tie_word_embeddings": "false"},
}  # fmt: skip


@pytest.mark.parametrize("message", REFUSED)
def test_what_it_does_not_compute_is_refused_by_name(message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read(**REFUSED[message])


def test_what_phi3_does_not_read_is_not_read():
    """Phi3Attention and Phi3MLP have no biases whatever attention_bias says (Phi-3's config.json carries it false);
    num_key_value_heads null means one per query head, as Phi3Config's __post_init__ makes it."""
    config = read(attention_bias=True, num_key_value_heads=None)
    assert config == read(num_key_value_heads=4) and config.n_kv_head == 4
    with pytest.raises(UserError, match="num_key_value_heads must be a positive integer, not 0"):
        read(num_key_value_heads=0)


def test_partial_rotary_factor_of_three_quarters_of_a_head_of_eight_turns_six():
    assert read(partial_rotary_factor=0.75).rotary_dim == 6


# The presets' parameter totals, against transformers' own count of the same config on the meta device, and the
# total the model card publishes (Phi-3-mini and Phi-3.5-mini: 3.8B; Phi-3-medium: 14B).
PUBLISHED = {"phi-3-mini": 3_821_079_552, "phi-3-medium": 13_960_238_080, "phi-3.5-mini": 3_821_079_552}


def official_json(c: Phi3Config) -> dict:
    """The preset written back as its model's config.json spells it (rope_scaling with "type", as Phi-3's do)."""
    rope = None if c.rope_scaling is None else {
        "long_factor": list(dict(c.rope_scaling)["long_factor"]), "short_factor": list(dict(c.rope_scaling)["short_factor"]),
        "type": "longrope"}  # fmt: skip
    return {"model_type": "phi3", "hidden_size": c.n_embd, "intermediate_size": c.n_inner, "num_hidden_layers": c.n_layer,
            "num_attention_heads": c.n_head, "num_key_value_heads": c.n_kv_head, "vocab_size": c.vocab_size,
            "max_position_embeddings": c.n_positions, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "rope_scaling": rope, "sliding_window": c.sliding_window, "bos_token_id": 1,
            "eos_token_id": 32000, "pad_token_id": 32000, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}  # fmt: skip


@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_reads_back_from_its_config_json_and_has_transformers_parameter_count(name):
    c = PRESETS[name]
    hf = official_json(c)
    assert config_from_hf_dict(hf, name) == c
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from family_checks import transformers_parameters

    theirs = transformers.Phi3Config(**{k: v for k, v in hf.items() if k != "model_type"})
    if c.rope_scaling is not None:  # transformers reads the same LongRoPE: 48 factors each, trained on 4,096
        assert theirs.rope_parameters["rope_type"] == "longrope"
        assert theirs.rope_parameters["original_max_position_embeddings"] == c.original_max_position_embeddings
    total = transformers_parameters(theirs)
    assert parameters(c).total == formulas.parameters(c) == total == PUBLISHED[name]
