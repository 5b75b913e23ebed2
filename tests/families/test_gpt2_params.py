"""The parameter table: each tensor by its HF name, kinds that add up, totals that transformers agrees with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer import GPT2Config
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY
from minitransformer.families.table import PRESETS
from minitransformer.verbs import formulas
from minitransformer.verbs.params import kind_of, parameters
from minitransformer.views.params_report import params_report

KINDS = GPT2_FAMILY.layout.kinds


def test_gpt2_small_has_124_439_808_parameters():
    p = parameters(PRESETS["gpt2"])
    assert p.total == 124_439_808
    D, V, P, L = 768, 50257, 1024, 12
    assert p.kinds == {
        "token_embedding": V * D,
        "position_embedding": P * D,
        "attention_qkv": L * D * 3 * D,
        "attention_out": L * D * D,
        "mlp_up": L * D * 4 * D,
        "mlp_down": L * 4 * D * D,
        "biases": L * (3 * D + D + 4 * D + D),
        "layer_norms": L * 4 * D + 2 * D,
    }
    assert p.tied_embeddings and "unembedding" not in p.kinds
    assert len(p.tensors) == 2 + 12 * L + 2


def test_named_like_the_checkpoint_and_every_kind_accounted():
    p = parameters(PRESETS["distilgpt2"])
    names = [t.name for t in p.tensors]
    assert names[:3] == ["wte.weight", "wpe.weight", "h.0.ln_1.weight"] and names[-2:] == ["ln_f.weight", "ln_f.bias"]
    layer_5 = {"h.5.attn.c_attn.weight", "h.5.attn.c_proj.weight", "h.5.mlp.c_fc.weight", "h.5.mlp.c_proj.bias"}
    assert layer_5 <= set(names)
    assert (
        kind_of("h.3.attn.c_proj.weight", p.config) == "attention_out"
        and kind_of("h.3.mlp.c_proj.weight", p.config) == "mlp_down"
    )
    assert kind_of("h.3.attn.c_attn.bias", p.config) == "biases" and kind_of("ln_f.bias", p.config) == "layer_norms"
    with pytest.raises(ValueError):
        kind_of("h.3.attn.masked_bias", p.config)
    assert sum(p.kinds.values()) == p.total == sum(t.count for t in p.tensors)


def test_untied_head_is_a_separate_tensor_counted():
    tied = parameters(GPT2Config(n_layer=2, n_head=2, n_embd=8, vocab_size=30))
    untied = parameters(GPT2Config(n_layer=2, n_head=2, n_embd=8, vocab_size=30, tie_word_embeddings=False))
    assert untied.total - tied.total == 30 * 8
    assert untied.kinds["unembedding"] == 30 * 8 and untied.tensors[-1].name == "lm_head.weight"
    assert "also the unembedding (tied: counted once)" in params_report(tied)
    assert "lm_head.weight" in params_report(untied) and "counted once" not in params_report(untied)
    assert set(untied.to_dict()["kinds"]) == set(KINDS)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 100), st.integers(1, 64), st.integers(1, 16), st.one_of(st.none(), st.integers(1, 500)),
       st.integers(1, 100_000), st.integers(1, 9000), st.booleans())  # fmt: skip
def test_table_equals_the_closed_form(n_layer, d_head, n_head, n_inner, vocab, ctx, tied):
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_head * d_head, n_inner=n_inner, vocab_size=vocab,
                        n_positions=ctx, tie_word_embeddings=tied)  # fmt: skip
    assert parameters(config).total == formulas.parameters(config)


def test_gpt3_175b():
    """12 L D^2 + 13 L D + (V + P) D + 2 D with tied embeddings: the "175B" of the paper, to three figures."""
    assert parameters(PRESETS["gpt3-175b"]).total == 174_604_259_328


@pytest.mark.parametrize("config", [
    dict(n_layer=2, n_head=2, n_embd=16, vocab_size=100, n_positions=32),
    dict(n_layer=3, n_head=4, n_embd=32, n_inner=50, vocab_size=77, n_positions=20),
    dict(n_layer=1, n_head=1, n_embd=8, vocab_size=10, n_positions=5, tie_word_embeddings=False),
    dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024),
], ids=["tiny", "n_inner", "untied", "gpt2"])  # fmt: skip
def test_agrees_with_transformers_num_parameters(config):
    transformers = pytest.importorskip("transformers", reason="transformers (the hf extra) is not installed")
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config))
    assert parameters(GPT2Config(**config)).total == hf.num_parameters()


@pytest.mark.parametrize("wrong", [None, "gpt2", ["gpt2"]], ids=repr)
def test_what_is_no_config_is_refused_in_words(wrong):
    """parameters(None) or ("gpt2") ended in an AttributeError in the family table, a list in lru_cache's TypeError."""
    from minitransformer.errors import UserError

    with pytest.raises(UserError) as refused:
        parameters(wrong)
    print(refused.value)
    assert f"parameters counts a model's config (model.config, PRESETS[name]), not {wrong!r}" in str(refused.value)
    assert parameters(PRESETS["gpt2"]) is parameters(PRESETS["gpt2"])  # still worked out once
