"""Live comparison of the Llama family with transformers: greedy generation token for token (past a Mistral
window), logits at every position, hidden states, attention weights and each submodule's output.

The models are the committed fixtures (tests/fixtures/hf_llama) and a few odd configs made here. Skipped
(with the reason) only where torch or transformers is not installed; CI installs both.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from conftest import hf_llama_fixture_dirs, run_cli
from minitransformer import load_model

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from conformance_configs import LLAMA_SHORT_CONTEXTS as ODD_CONFIGS  # noqa: E402 - it imports torch
from family_checks import RELATIVE_FLOAT64, float64_batch_against_truth  # noqa: E402

TOLERANCE = 1e-4  # relative to the logits' scale, as validate.py states it
FIXTURES = {d.name: d for d in hf_llama_fixture_dirs()}


@cache
def pair(name: str):
    """(ours, theirs) for a fixture; attention weights are only returned by transformers' eager attention."""
    directory = FIXTURES[name]
    theirs = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                               attn_implementation="eager").eval()  # fmt: skip
    return load_model(directory), theirs


def worst(ours: np.ndarray, theirs) -> float:
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    return float(np.abs(ours - theirs).max())


def allowed(reference) -> float:
    reference = reference.detach().numpy() if hasattr(reference, "detach") else reference
    return TOLERANCE * max(1.0, float(np.abs(reference).max()))


@pytest.mark.parametrize("name", FIXTURES)
def test_greedy_generation_equals_transformers_generate_token_for_token(name):
    ours, theirs = pair(name)
    prompt = np.load(FIXTURES[name] / "logits.npz")["ids_1"].tolist()
    steps = ours.config.n_positions - len(prompt)  # to the end of the context
    assert steps >= 35
    window = ours.config.sliding_window
    assert window is None or len(prompt) + steps > 5 * window  # far past the window
    with torch.no_grad():
        out = theirs.generate(torch.tensor([prompt]), max_new_tokens=steps, do_sample=False, eos_token_id=None,
                              pad_token_id=0, output_logits=True, return_dict_in_generate=True)  # fmt: skip
    their_tokens = out.sequences[0, len(prompt) :].tolist()
    assert len(their_tokens) == steps

    # Step by step with our KV cache: each step's logits, then the token both chose.
    cache = ours.new_cache()
    logits = ours.run(prompt, cache=cache)[-1]
    for step, token in enumerate(their_tokens):
        their_logits = out.logits[step][0]
        assert worst(logits, their_logits) <= allowed(their_logits), (name, step)
        assert int(np.argmax(logits)) == token, (name, step)
        if step + 1 < steps:
            logits = ours.run([token], cache=cache)[-1]
    generated = ours.generate(prompt, max_new_tokens=steps, stop_at_eos=False, ledger=False, candidates=0)
    assert generated.new_tokens == their_tokens


def compare_with_outputs(model, hf, ids) -> dict[str, float]:
    """|difference| / allowed for every tensor output_attentions and output_hidden_states expose."""
    logits, cache = model.run_with_cache(ids)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    n = model.config.n_layer
    assert len(out.attentions) == n and len(out.hidden_states) == n + 1
    pairs = {"logits": (logits, out.logits[0]), "embed": (cache["embed"], out.hidden_states[0][0])}
    for i in range(n):  # [H, T, t]: with a sliding window, zero outside it on both sides
        pairs[f"blocks.{i}.attn.weights"] = (cache[f"blocks.{i}.attn.weights"], out.attentions[i][0])
    for i in range(n - 1):  # hidden_states[i + 1] is block i's output, except the last, which is after the norm
        pairs[f"blocks.{i}.resid_post"] = (cache[f"blocks.{i}.resid_post"], out.hidden_states[i + 1][0])
    pairs["ln_f"] = (cache["ln_f"], out.hidden_states[n][0])
    return {name: worst(a, b) / allowed(b) for name, (a, b) in pairs.items()}


@pytest.mark.parametrize("name", FIXTURES)
def test_hidden_states_and_attention_weights_equal_transformers(name):
    model, hf = pair(name)
    ids = np.load(FIXTURES[name] / "logits.npz")["ids_2"][:24].tolist()
    ratios = compare_with_outputs(model, hf, ids)
    assert len(ratios) == 2 + 2 * model.config.n_layer
    bad = {k: v for k, v in ratios.items() if v > 1}
    assert not bad, f"{name}: beyond {TOLERANCE} x scale: {bad}"
    if model.config.sliding_window:  # the window really cut something off
        _, cache = model.run_with_cache(ids, names="blocks.0.attn.weights")
        assert not cache["blocks.0.attn.weights"][:, -1, : len(ids) - model.config.sliding_window].any()


# Inside a block, transformers' submodules show their outputs to torch forward hooks.
SUBMODULES = {"input_layernorm": "ln_1", "self_attn.q_proj": "attn.q_proj", "self_attn.k_proj": "attn.k_proj",
              "self_attn.v_proj": "attn.v_proj", "self_attn.o_proj": "attn.out", "post_attention_layernorm": "ln_2",
              "mlp.gate_proj": "mlp.gate", "mlp.up_proj": "mlp.up", "mlp.act_fn": "mlp.act",
              "mlp.down_proj": "mlp.down", "": "resid_post"}  # fmt: skip


@pytest.mark.parametrize("name", ["llama_gqa_bias", "qwen2_bias_bf16", "mistral_window"])
def test_every_submodule_output_and_the_rotary_stage_equal_transformers(name):
    model, hf = pair(name)
    ids = np.load(FIXTURES[name] / "logits.npz")["ids_2"][:16].tolist()
    seen: dict[str, np.ndarray] = {}
    handles = []

    def keep(name):
        def hook(module, args, out):
            seen[name] = (out[0] if isinstance(out, tuple) else out)[0].numpy()

        return hook

    for i, layer in enumerate(hf.model.layers):
        for theirs, ours in SUBMODULES.items():
            module = layer.get_submodule(theirs) if theirs else layer
            handles.append(module.register_forward_hook(keep(f"blocks.{i}.{ours}")))
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    _, cache = model.run_with_cache(ids)
    assert len(seen) == len(SUBMODULES) * model.config.n_layer
    ratios = {k: worst(cache[k], v) / allowed(v) for k, v in seen.items()}
    assert max(ratios.values()) <= 1, ratios

    # RoPE: our rotated q and k equal transformers' rotary embedding applied to our unrotated ones.
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    T = len(ids)
    positions = torch.arange(T)[None]
    cos, sin = hf.model.rotary_emb(torch.zeros(1, T, model.config.d_head), positions)
    for i in range(model.config.n_layer):
        q, k = (torch.from_numpy(np.ascontiguousarray(cache[f"blocks.{i}.attn.{x}"]))[None] for x in "qk")
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
        assert worst(cache[f"blocks.{i}.attn.q_rot"], q_rot[0]) <= 1e-5
        assert worst(cache[f"blocks.{i}.attn.k_rot"], k_rot[0]) <= 1e-5
    assert np.abs(cache["blocks.1.attn.q_rot"] - cache["blocks.1.attn.q"]).max() > 0.1  # it did rotate


def test_a_decode_step_past_the_window_captures_the_last_row_of_a_full_recompute():
    model, hf = pair("mistral_window")
    W = model.config.sliding_window
    ids = np.load(FIXTURES["mistral_window"] / "logits.npz")["ids_2"][:20].tolist()
    kv = model.new_cache()
    model.run(ids[:-1], cache=kv)
    _, step = model.run_with_cache(ids[-1:], all_positions=False, kv_cache=kv)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    H, first = model.config.n_head, len(ids) - W  # the earliest position the last query may see
    for i in range(model.config.n_layer):
        weights, theirs = step[f"blocks.{i}.attn.weights"], out.attentions[i][0][:, -1:, :].numpy()
        assert weights.shape == (H, 1, W)  # the cache hands back the window only
        assert not theirs[..., :first].any()
        assert worst(weights, theirs[..., first:]) <= TOLERANCE
    assert worst(step["blocks.0.resid_post"], out.hidden_states[1][0][-1:]) <= TOLERANCE
    assert worst(step["logits"], out.logits[0][-1:]) <= allowed(out.logits[0])


@pytest.mark.parametrize("name", ODD_CONFIGS)
def test_odd_configs_match_live_one_by_one_and_in_a_batch(name, tmp_path):
    config_class, options = ODD_CONFIGS[name]
    torch.manual_seed(11)
    hf = transformers.AutoModelForCausalLM.from_config(config_class(**options), dtype=torch.float32).eval()
    with torch.no_grad():
        for param in hf.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    rng = np.random.default_rng(0)
    n, V = options["max_position_embeddings"], options["vocab_size"]
    for length in (1, 3, n):
        ids = rng.integers(0, V, length).tolist()
        with torch.no_grad():
            theirs = hf(torch.tensor([ids])).logits[0]
        assert worst(ours.logits(ids), theirs) <= allowed(theirs), (name, length)
    batch = rng.integers(0, V, (3, n))
    with torch.no_grad():
        theirs = hf(torch.from_numpy(batch)).logits
    assert worst(ours.logits(batch), theirs) <= allowed(theirs)


@pytest.mark.parametrize("name", ODD_CONFIGS)
def test_odd_configs_in_float64_are_within_1e_9_of_the_float64_truth(name, tmp_path):
    config_class, options = ODD_CONFIGS[name]
    torch.manual_seed(13)
    hf = transformers.AutoModelForCausalLM.from_config(config_class(**options), dtype=torch.float32)
    with torch.no_grad():
        for param in hf.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    hf.save_pretrained(tmp_path)
    ids = np.random.default_rng(4).integers(0, options["vocab_size"], (3, options["max_position_embeddings"]))
    assert float64_batch_against_truth(tmp_path, ids) <= RELATIVE_FLOAT64


def test_the_validate_command_says_ok_on_a_mistral():
    # mistral_window's context (48) holds validate's longest built-in prompt (30 tokens) plus 8 steps.
    result = run_cli("validate", "--model", str(FIXTURES["mistral_window"]), "--steps", "8")
    assert result.returncode == 0, result.stderr
    assert "MistralForCausalLM" in result.stdout and "all OK" in result.stdout and "NOT OK" not in result.stdout


# Keys that transformers reads differently from what their names suggest, for a family (see test_llama_config).
AS_TRANSFORMERS_READS = {
    "llama-ignores-sliding-window": ("llama_mha", {"sliding_window": 4}),
    "mistral-ignores-biases": ("mistral_window", {"attention_bias": True, "mlp_bias": True}),
    "qwen2-ignores-mlp-bias": ("qwen2_bias_bf16", {"mlp_bias": True, "attention_bias": False}),
    "rope-scaling-replaces-rope-parameters": ("llama_gqa_bias", {"rope_scaling": {"type": "linear", "factor": 4.0}}),
    "rope-type-wins-over-type": ("llama_gqa_bias", {"rope_scaling": {"rope_type": "linear", "type": "default",
                                                                      "factor": 2.0}, "rope_theta": 300.0}),
}  # fmt: skip


@pytest.mark.parametrize("case", AS_TRANSFORMERS_READS)
def test_config_keys_mean_what_transformers_makes_of_them(case, tmp_path):
    import json
    import shutil

    fixture, change = AS_TRANSFORMERS_READS[case]
    directory = tmp_path / fixture
    shutil.copytree(FIXTURES[fixture], directory)
    hf = json.loads((directory / "config.json").read_text()) | change
    (directory / "config.json").write_text(json.dumps(hf))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    ids = np.load(directory / "logits.npz")["ids_2"].tolist()
    with torch.no_grad():
        expected = theirs(torch.tensor([ids])).logits[0]
    assert worst(load_model(directory).logits(ids), expected) <= allowed(expected), case
