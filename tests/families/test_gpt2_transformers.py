"""GPT-2's quirks against transformers (what every family owes is in test_conformance.py): the full 124M shape, odd
configs with contexts of a few positions (in float32 and float64), and reorder_and_upcast_attn.

Skipped (with the reason) only where torch or transformers is not installed; CI installs both.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REAL_GPT2
from minitransformer import load_model, load_tokenizer

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from family_checks import RELATIVE_FLOAT64, float64_batch_against_truth  # noqa: E402 - it imports torch

PROMPTS = ["The capital of France is", "Hello, my dog is cute and", "def f(x):\n    return x *", "日本語 🤖  spaces"]


def save_random_hf_model(directory, seed: int, **config):
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config)).eval()
    with torch.no_grad():  # LayerNorm gains/biases and linear biases start at 1 and 0: move them
        for name, param in model.named_parameters():
            if "ln" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.1)
    model.save_pretrained(directory)
    return model


@pytest.fixture(scope="module")
def gpt2_shape(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf") / "gpt2-random"
    reference = save_random_hf_model(directory, seed=1234)  # GPT2Config() defaults: the 124M shape
    return reference, load_model(directory)


def hf_greedy(reference, ids: list[int], steps: int):
    """transformers' own greedy decoding with its KV cache: tokens and each step's logits."""
    tokens, logits = [], []
    with torch.no_grad():
        out = reference(torch.tensor([ids]), use_cache=True)
        for _ in range(steps):
            last = out.logits[0, -1].numpy()
            logits.append(last)
            tokens.append(int(np.argmax(last)))
            out = reference(torch.tensor([[tokens[-1]]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens, logits


def test_124m_logits_match_at_every_position(gpt2_shape):
    reference, ours = gpt2_shape
    assert ours.config.n_layer == 12 and ours.config.n_embd == 768 and ours.config.vocab_size == 50257
    tok = load_tokenizer()
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        with torch.no_grad():
            theirs = reference(torch.tensor([ids])).logits[0].numpy()
        mine = ours.logits(ids)
        assert mine.shape == theirs.shape
        assert np.abs(mine - theirs).max() <= 1e-4, prompt


def test_124m_in_float64_matches_transformers_in_float64_within_1e_9(gpt2_shape):
    _, ours32 = gpt2_shape
    ours = load_model(ours32.source, dtype="float64")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(ours32.source, dtype=torch.float64).eval()
    ids = [load_tokenizer().encode(prompt)[:5] for prompt in PROMPTS]
    with torch.no_grad():
        expected = theirs(torch.tensor(ids)).logits.numpy()
    logits = ours.logits(ids)
    assert logits.dtype == expected.dtype == np.float64
    assert np.abs(logits - expected).max() <= 1e-9 * max(1.0, np.abs(expected).max())
    generated = ours.generate(ids[0], max_new_tokens=4, stop_at_eos=False, ledger=False).new_tokens
    with torch.no_grad():
        assert generated == theirs.generate(torch.tensor(ids[:1]), max_new_tokens=4, do_sample=False, eos_token_id=None,
                                            pad_token_id=0)[0, 5:].tolist()  # fmt: skip


def test_124m_greedy_tokens_match_step_by_step(gpt2_shape):
    reference, ours = gpt2_shape
    tok = load_tokenizer()
    for prompt in PROMPTS[:2]:
        ids = tok.encode(prompt)
        their_tokens, their_logits = hf_greedy(reference, ids, steps=10)
        cache = ours.new_cache()
        step_logits = ours.run(ids, cache=cache)[-1]
        for step, (token, logits) in enumerate(zip(their_tokens, their_logits)):
            assert np.abs(step_logits - logits).max() <= 1e-4, (prompt, step)
            assert int(np.argmax(step_logits)) == token, (prompt, step)
            step_logits = ours.run([token], cache=cache)[-1]
        generated = ours.generate(prompt, max_new_tokens=10, stop_at_eos=False, ledger=False)
        assert generated.new_tokens == their_tokens


ODD_CONFIGS = [
    dict(n_layer=2, n_head=5, n_embd=80, n_inner=37, n_positions=9, vocab_size=777, layer_norm_epsilon=1e-2),
    dict(n_layer=3, n_head=6, n_embd=48, n_positions=40, vocab_size=50257, activation_function="gelu",
         scale_attn_by_inverse_layer_idx=True),
    dict(n_layer=1, n_head=16, n_embd=32, n_inner=8, n_positions=7, vocab_size=64, activation_function="silu",
         scale_attn_weights=False, tie_word_embeddings=False),
]  # fmt: skip


@pytest.mark.parametrize("config", ODD_CONFIGS, ids=["heads5-inner37", "exact-gelu-layer-scaled", "untied-unscaled"])
def test_odd_configs_match_live(config, tmp_path):
    reference = save_random_hf_model(tmp_path, seed=7, **config)
    ours = load_model(tmp_path)
    rng = np.random.default_rng(0)
    for length in (1, 3, config["n_positions"]):
        ids = rng.integers(0, config["vocab_size"], length).tolist()
        with torch.no_grad():
            theirs = reference(torch.tensor([ids])).logits[0].numpy()
        assert np.abs(ours.logits(ids) - theirs).max() <= 1e-4, (config, length)


def test_reorder_and_upcast_attn_changes_nothing_but_rounding(tmp_path):
    """transformers takes its reordered path (scale folded into Q K^T by baddbmm) in eager attention only;
    we always scale after Q K^T. Same maths: the logits agree within the parity tolerance."""
    config = dict(n_layer=3, n_head=4, n_embd=64, n_positions=32, vocab_size=300, scale_attn_by_inverse_layer_idx=True,
                  reorder_and_upcast_attn=True)  # fmt: skip
    save_random_hf_model(tmp_path, seed=11, **config)
    reference = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    reordered = []
    for block in reference.transformer.h:  # count the calls of the reordered path: it must be the one compared
        plain = block.attn._upcast_and_reordered_attn
        block.attn._upcast_and_reordered_attn = lambda *a, plain=plain, **k: reordered.append(1) or plain(*a, **k)
    ours = load_model(tmp_path)
    assert ours.config.reorder_and_upcast_attn is True
    ids = np.random.default_rng(0).integers(0, 300, 32).tolist()
    with torch.no_grad():
        theirs = reference(torch.tensor([ids])).logits[0].numpy()
    assert len(reordered) == 3
    assert np.abs(ours.logits(ids) - theirs).max() <= 1e-4


@pytest.mark.parametrize("config", ODD_CONFIGS, ids=["heads5-inner37", "exact-gelu-layer-scaled", "untied-unscaled"])
def test_odd_configs_in_float64_are_within_1e_9_of_the_float64_truth(config, tmp_path):
    save_random_hf_model(tmp_path, seed=5, **config)
    ids = np.random.default_rng(3).integers(0, config["vocab_size"], (2, config["n_positions"]))
    assert float64_batch_against_truth(tmp_path, ids) <= RELATIVE_FLOAT64


@pytest.mark.skipif(not (REAL_GPT2 / "model.safetensors").exists(), reason="needs real GPT-2 weights in weights/gpt2")
class TestRealGPT2:
    def test_capital_of_france(self):
        model = load_model(REAL_GPT2)
        result = model.generate("The capital of France is", max_new_tokens=1, candidates=10)
        assert result.text == " the"
        assert " Paris" in [c.token for c in result.candidates]

    def test_transformers_own_greedy_example(self):
        model = load_model(REAL_GPT2)
        result = model.generate([464, 3290], max_new_tokens=18, stop_at_eos=False)
        assert [464, 3290, *result.new_tokens] == [464, 3290, 373, 1043, 287, 257, 2214, 1474, 262, 16246, 286,
                                                   2688, 290, 2688, 27262, 13, 198, 198, 464, 3290]  # fmt: skip
