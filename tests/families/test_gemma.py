"""The Gemma family's quirks (Gemma 2, Gemma 3's text model) against transformers (what every family owes runs in
test_conformance.py, on the same models): each layer's own window, captures of the stages Gemma adds (soft-caps,
sandwich norms, q and k norms), config.json keys in older spellings as transformers reads them, and a Gemma 3
checkpoint of the whole model refused by name.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
pytest.importorskip("transformers", reason="transformers is not installed")

import torch  # noqa: E402
import transformers  # noqa: E402
from conformance_configs import FAMILIES  # noqa: E402
from family_checks import (  # noqa: E402
    transformers_parameters,
    worst,
)

from minitransformer import load_model  # noqa: E402
from minitransformer.verbs.params import parameters  # noqa: E402

SLIDING, FULL = "sliding_attention", "full_attention"

FAMILY = "gemma"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
CONFIGS = SPEC.configs


def prompt(config_name: str, n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(0, CONFIGS[config_name]["vocab_size"], n).tolist()


def test_each_layer_has_its_own_window_and_the_windows_cut(made):
    directory, _, hf = made("gemma3-local-rope-linear")
    ours = load_model(directory)
    ids = prompt("gemma3-local-rope-linear", 20)
    _, cache = ours.run_with_cache(ids, names="blocks.*.attn.weights")
    with torch.no_grad():
        theirs = hf(torch.tensor([ids]), output_attentions=True).attentions
    for i, window in enumerate([6, 6, None, 6]):
        weights = cache[f"blocks.{i}.attn.weights"]
        assert worst(weights, theirs[i][0]) <= 1
        assert (weights[:, -1, : 20 - window] == 0).all() if window else (weights[:, -1, :] > 0).all()


# Inside a block, transformers' submodules show their outputs to torch forward hooks: Gemma's stages by their names.
SUBMODULES = {"input_layernorm": "ln_1", "self_attn.o_proj": "attn.out", "post_attention_layernorm": "post_attn_norm",
              "pre_feedforward_layernorm": "ln_2", "mlp.down_proj": "mlp.down",
              "post_feedforward_layernorm": "post_mlp_norm", "": "resid_post"}  # fmt: skip


@pytest.mark.parametrize("name", ["gemma2-softcaps-window7", "gemma3-local-rope-linear", "gemma3-pattern6-final-cap"])
def test_captures_of_gemma_stages_equal_transformers_submodules(name, made):
    directory, _, hf = made(name)
    model = load_model(directory)
    ids = prompt(name, 16, seed=1)
    seen: dict[str, np.ndarray] = {}
    handles = []

    def keep(key):
        def hook(module, args, out):
            seen[key] = (out[0] if isinstance(out, tuple) else out)[0].numpy()

        return hook

    handles.append(hf.model.embed_tokens.register_forward_hook(keep("embed_scale")))
    for i, layer in enumerate(hf.model.layers):
        submodules = dict(SUBMODULES)
        if model.config.qk_norm:
            submodules |= {"self_attn.q_norm": "attn.q_norm", "self_attn.k_norm": "attn.k_norm"}
        for theirs, ours in submodules.items():
            module = layer.get_submodule(theirs) if theirs else layer
            handles.append(module.register_forward_hook(keep(f"blocks.{i}.{ours}")))
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    logits, cache = model.run_with_cache(ids)
    ratios = {k: worst(cache[k], v) for k, v in seen.items()}
    assert len(ratios) == 1 + len(submodules) * model.config.n_layer
    assert max(ratios.values()) <= 1, ratios
    assert np.abs(cache["embed_scale"] - cache["embed"] * np.float32(model.config.n_embd**0.5)).max() == 0
    for i in range(model.config.n_layer):
        assert worst(cache[f"blocks.{i}.attn.weights"], out.attentions[i][0]) <= 1
    cap = model.config.attn_logit_softcapping
    if cap is not None:  # the scores were capped, and the cap bit
        scaled, capped = cache["blocks.0.attn.scaled"], cache["blocks.0.attn.softcapped"]
        assert np.abs(capped).max() < cap < np.abs(scaled).max()
        np.testing.assert_allclose(capped, cap * np.tanh(scaled / cap), rtol=1e-6, atol=1e-6)
    final = model.config.final_logit_softcapping
    if final is not None:
        assert worst(cache["final_softcap"], out.logits[0]) <= 1 and np.abs(logits).max() < final
        assert np.abs(cache["logits"]).max() > np.abs(cache["final_softcap"]).max()
    else:
        assert "final_softcap" not in model.stage_table.stages and worst(logits, out.logits[0]) <= 1


# config.json in the spellings older transformers wrote (and the published Gemma 3 configs use): read as
# transformers 5 reads them, the logits say so.
OLD_SPELLINGS = {
    "gemma3-rope-local-base-freq-and-rope-scaling": ("gemma3-local-rope-linear", {
        "rope_parameters": None, "rope_theta": 5000.0, "rope_local_base_freq": 100.0,
        "rope_scaling": {"type": "linear", "factor": 4.0}}),
    "gemma3-sliding-window-pattern": ("gemma3-pattern6-final-cap", {"layer_types": None,
                                                                    "sliding_window_pattern": 2}),
    "gemma2-rope-theta": ("gemma2-softcaps-window7", {"rope_parameters": None, "rope_theta": 77.0,
                                                      "layer_types": None}),
}  # fmt: skip


@pytest.mark.parametrize("case", OLD_SPELLINGS)
def test_older_config_spellings_mean_what_transformers_makes_of_them(case, made, tmp_path):
    import shutil

    fixture, change = OLD_SPELLINGS[case]
    source, _, _ = made(fixture)
    directory = tmp_path / case
    shutil.copytree(source, directory)
    hf = json.loads((directory / "config.json").read_text())
    hf = {k: v for k, v in (hf | change).items() if v is not None or k not in change}
    (directory / "config.json").write_text(json.dumps(hf))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    ids = prompt(fixture, 40)
    with torch.no_grad():
        expected = theirs(torch.tensor([ids])).logits[0]
    ours = load_model(directory)
    assert list(ours.config.layer_types) == list(theirs.config.layer_types)
    assert worst(ours.logits(ids), expected) <= 1, case


def test_a_gemma3_checkpoint_of_the_whole_model_is_refused_by_name_and_its_config_counted(made, tmp_path):
    """A Gemma3ForConditionalGeneration checkpoint keeps its text model under model.language_model.: its config is
    read (count, params), its weights refused by name, where the same weights saved as Gemma3ForCausalLM load."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from minitransformer import UserError
    from minitransformer.models.config import load_config
    from minitransformer.verbs.validate import validate

    source, _, hf = made("gemma3-local-rope-linear")
    directory = tmp_path / "gemma3"
    shutil.copytree(source, directory)
    text = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": text}))
    config = load_config(directory / "config.json")
    assert config.model_type == "gemma3" and parameters(config).total == transformers_parameters(hf.config)
    text_model = load_model(directory)  # text-model names (Gemma3ForCausalLM's): they load, and validate reads them
    out = io.StringIO()
    assert validate(text_model, steps=3, out=out) and "Gemma3ForCausalLM" in out.getvalue(), out.getvalue()
    tensors = load_file(directory / "model.safetensors")
    save_file({k.replace("model.", "model.language_model.", 1): v for k, v in tensors.items()},
              directory / "model.safetensors", metadata={"format": "pt"})  # fmt: skip
    with pytest.raises(UserError, match=r"unexpected tensor language_model\.\S+ for a gemma3 model \(read as its "
                                        r"text model"):  # fmt: skip
        load_model(directory)
