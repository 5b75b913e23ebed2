"""The Gemma family without weights: its config.json read with transformers' defaults and every option it does not
compute refused by name; its presets' parameters against the published totals and transformers' own count on the
meta device; count = the closed form; the count report's sliding-window lines and the KV cache per layer type."""

from __future__ import annotations

import pytest
from published_configs import GEMMA3_4B  # google/gemma-3-4b-pt's config.json: the text model in text_config

from minitransformer import UserError
from minitransformer.families.gemma.config import FULL, SLIDING, GemmaConfig
from minitransformer.families.table import PRESETS, config_from_hf_dict
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation
from minitransformer.verbs.memory import kv_cache_bytes_after, memory_dict
from minitransformer.verbs.params import kind_of, parameters
from minitransformer.views.count_report import count_report

GEMMA_PRESETS = [name for name, c in PRESETS.items() if c.family == "gemma"]

# Totals published for these checkpoints (the model cards and their safetensors metadata); gemma-3-4b: its text
# model, which transformers counts below.
PUBLISHED = {"gemma-2-2b": 2_614_341_888, "gemma-2-9b": 9_241_705_984, "gemma-3-1b": 999_885_952}


def tiny(**options) -> dict:
    return {"model_type": "gemma2", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 4,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 50,
            "max_position_embeddings": 64, "sliding_window": 4} | options  # fmt: skip


def test_gemma_2_2b_has_2_614_341_888_parameters():
    p = parameters(PRESETS["gemma-2-2b"])
    assert p.total == 2_614_341_888 == formulas.parameters(PRESETS["gemma-2-2b"])
    L, D = 26, 2304
    assert p.kinds["norms"] == 4 * L * D + D and "qk_norms" not in p.kinds and p.tied_embeddings
    assert kind_of("layers.3.pre_feedforward_layernorm.weight", PRESETS["gemma-2-2b"]) == "norms"


@pytest.mark.parametrize("name", GEMMA_PRESETS)
def test_every_gemma_preset_equals_transformers_meta_count(name):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from family_checks import transformers_parameters

    c = PRESETS[name]
    options = dict(vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.n_inner,
                   num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head,
                   head_dim=c.head_dim, sliding_window=c.sliding_window, layer_types=list(c.layer_types))  # fmt: skip
    hf = (transformers.Gemma2Config if c.model_type == "gemma2" else transformers.Gemma3TextConfig)(**options)
    total = parameters(c).total
    assert total == formulas.parameters(c) == transformers_parameters(hf) == PUBLISHED.get(name, total)
    if name == "gemma-3-4b":  # the published config.json reads as the preset, and its text model's count
        assert config_from_hf_dict(GEMMA3_4B, "gemma-3-4b") == c
        text = transformers.Gemma3Config(text_config=GEMMA3_4B["text_config"]).text_config
        assert transformers_parameters(text) == total  # 3,880,263,168: the text model of the 4.3 B


def test_a_gemma3_config_is_read_as_its_text_model_with_transformers_defaults():
    c = config_from_hf_dict(GEMMA3_4B, "x")
    assert (c.n_head, c.n_kv_head, c.d_head, c.vocab_size, c.n_positions) == (8, 4, 256, 262208, 131072)
    assert c.layer_types == (SLIDING,) * 5 + (FULL,) + (SLIDING,) * 5 + (FULL,) + (SLIDING,) * 5 + (FULL,) + (
        SLIDING,
    ) * 5 + (FULL,) + (SLIDING,) * 5 + (FULL,) + (SLIDING,) * 4  # fmt: skip
    assert (c.rope_theta, c.local_rope_theta, dict(c.rope_scaling or ()), c.local_rope_scaling) == (
        1_000_000.0, 10_000.0, {"factor": 8.0, "rope_type": "linear"}, None)  # fmt: skip
    assert c.qk_norm and c.attn_logit_softcapping is None and c.final_logit_softcapping is None
    assert "gemma3" in c.checkpoint_kind and "text model" in c.checkpoint_kind
    assert c.prefix(7).layer_types == c.layer_types[:7]


@pytest.mark.parametrize("change, message", [
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention=true"),
    ({"layer_types": [SLIDING, "chunked_attention", FULL, FULL]}, "layer_types=['sliding_attention', 'chunked_attention'"),
    ({"layer_types": [SLIDING, FULL]}, "layer_types must name 4 layers"),
    ({"sliding_window": None}, "layer_types has sliding_attention layers but sliding_window is null"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "rope type 'yarn' is not supported"),
    ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}, "partial_rotary_factor=0.5"),
    ({"hidden_activation": None}, "hidden_activation=None is not supported"),
    ({"hidden_activation": "swiglu"}, "config hidden_activation='swiglu' is not supported"),
    ({"attn_logit_softcapping": 0}, "attn_logit_softcapping must be a positive number"),
    ({"dtype": "float8"}, "dtype='float8' is not supported"),
    ({"model_type": "gemma3_text", "rope_parameters": {"rope_type": "default", "rope_theta": 5.0}},
     "rope_parameters must hold 'full_attention' and 'sliding_attention'"),
    ({"model_type": "gemma3_text", "rope_parameters": {FULL: {"rope_type": "dynamic", "factor": 2.0}}},
     "rope type 'dynamic' is not supported"),
    ({"model_type": "gemma3", "text_config": "tiny"}, "text_config must be an object"),
])  # fmt: skip
def test_options_it_does_not_compute_are_refused_by_name(change, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("[", r"\[")):
        config_from_hf_dict(tiny(**change), "x")


def test_layer_types_follow_transformers_rules_when_absent():
    assert config_from_hf_dict(tiny(), "x").layer_types == (SLIDING, FULL, SLIDING, FULL)
    gemma3 = config_from_hf_dict(tiny(model_type="gemma3_text", num_hidden_layers=7), "x")
    assert gemma3.layer_types == (SLIDING,) * 5 + (FULL, SLIDING)
    assert [gemma3.layer_window(i) for i in range(7)] == [4] * 5 + [None, 4]
    # Gemma 3 ignores attn_logit_softcapping, as transformers' Gemma3Attention does (it never passes it on)
    assert (
        config_from_hf_dict(tiny(model_type="gemma3_text", attn_logit_softcapping=5.0), "x").attn_logit_softcapping
        is None
    )
    assert config_from_hf_dict(tiny(attn_logit_softcapping=5.0), "x").attn_logit_softcapping == 5.0


@pytest.mark.parametrize("name", GEMMA_PRESETS)
def test_count_of_a_preset_equals_the_closed_form_past_its_window(name):
    c = PRESETS[name]
    n_prompt = c.sliding_window + 300  # past the window and the row chunk
    counted = count_generation(c, n_prompt, 3)
    assert counted.totals.macs == formulas.generation_macs(c, n_prompt, 3)
    assert [n for _, n in counted.prefill.groups] == [c.layer_types.count(SLIDING), c.layer_types.count(FULL)]
    windowed, full = (next(r for r in records if r.op == "scores") for records, _ in counted.decodes[-1].groups)
    assert windowed.out_shape[-1] == c.sliding_window and full.out_shape[-1] == n_prompt + 2


def test_the_count_report_says_what_the_window_saves_and_the_kv_cache_per_layer_type():
    c = PRESETS["gemma-2-2b"]
    count = count_generation(c, 8000, 2)
    text = count_report(count)
    assert "gemma-2-2b: gemma2 (Gemma family), 26 layers" in text and "sliding window 4,096 on 13 of 26 layers" in text
    assert "Sliding window: 13 of 26 layers (50.0%) are local, each attending to at most W = 4,096 positions" in text
    # The KV cache after 8,001 positions: 13 sliding layers hold 4,096, 13 full ones 8,001; K and V of 4 x 256.
    per_layer_position = 2 * 4 * 256 * 4
    kept, everything = 13 * per_layer_position * (4096 + 8001), 26 * per_layer_position * 8001
    assert kv_cache_bytes_after(c, 8001) == kept
    m = memory_dict(count, 10.0)["kv_cache"]
    assert m["bytes"] == kept and m["layer_types"][SLIDING] == {
        "layers": 13,
        "positions": 4096,
        "bytes": 13 * 4096 * per_layer_position,
    }
    assert m["bytes_at_context"] == 13 * per_layer_position * (4096 + 8192)
    saved = everything - kept
    assert f"the window saves {saved / 1e6:.3g} MB ({100 * saved / everything:.1f}%)" in text
    assert "positions here by layer type, sliding_attention 13 x 4,096, full_attention 13 x 8,001" in text
    without = formulas.generation_macs(c, 8000, 2, windows=False)
    assert without > count.totals.macs  # the windows cut the prefill's scores past 4,096
    assert (
        "each sliding_attention layer (13; t = 4,096)" in text and "each full_attention layer (13; t = 8,001)" in text
    )


def test_a_config_without_sliding_layers_has_no_window_lines():
    c = config_from_hf_dict(tiny(layer_types=[FULL] * 4), "x")
    text = count_report(count_generation(c, 10, 2))
    assert isinstance(c, GemmaConfig) and c.sliding_window is None  # the key is there, no layer uses it
    assert "Sliding window:" not in text and "sliding window" not in text


def test_the_html_page_shows_the_kv_cache_per_layer_type():
    from minitransformer.views.html_report import count_data, page

    html = page(count_data(count_generation(PRESETS["gemma-2-2b"], 5000, 2)))
    assert "by layer type: sliding_attention 13 x 4,096 positions, full_attention 13 x 5,001 positions" in html


@pytest.mark.parametrize("T, window", [(300, 64), (100, 500)])
def test_the_activation_estimate_holds_a_mask_for_each_window_and_is_close_to_the_measured_peak(T, window):
    import numpy as np
    from shared_checks import estimated_and_measured_peak

    from minitransformer.models.model import Model
    from minitransformer.models.weights import as_tree, expected_shapes

    config = config_from_hf_dict(tiny(hidden_size=64, intermediate_size=96, num_attention_heads=4, head_dim=16,
                                      vocab_size=100, max_position_embeddings=T + 1, sliding_window=window), "x")  # fmt: skip
    rng = np.random.default_rng(0)
    tensors = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in expected_shapes(config).items()}
    model = Model(config, as_tree(tensors, config), source="memory")
    estimate, peak = estimated_and_measured_peak(model, T)
    assert 0.9 * estimate <= peak <= 1.5 * estimate, (peak, estimate)
    if T > 128:  # in row chunks the attention's working set differs between the kinds too: the masks alone below
        return
    # Two masks, [T, T] each (a pass from position 0 sees keys 0..T-1 on both kinds of layer), where a model whose
    # layers all attend fully holds one.
    count = count_generation(config, T, 1)
    one_kind = count_generation(config_from_hf_dict(tiny(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                                         head_dim=16, vocab_size=100, max_position_embeddings=T + 1,
                                                         layer_types=[FULL] * 4), "x"), T, 1)  # fmt: skip
    two, one = (memory_dict(c, 10.0)["activations"]["prefill"] for c in (count, one_kind))
    assert two["stage"] == one["stage"] and two["bytes"] - one["bytes"] == 4 * T * T
