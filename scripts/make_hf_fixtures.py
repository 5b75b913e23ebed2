"""Write small Hugging Face GPT-2 models and transformers' own logits for them, as test fixtures.

    python scripts/make_hf_fixtures.py            # writes tests/fixtures/hf/<name>/

Each fixture is a random-initialised GPT2LMHeadModel saved with save_pretrained (config.json +
model.safetensors), plus logits.npz: for several token-id prompts, transformers' float32 logits at
every position. The configs cover the options that change inference: head counts other than 12, a
single head, n_inner not 4D, small n_positions (a prompt fills it), other epsilons, every supported
activation family, unscaled and layer-scaled attention, untied embeddings, float16 storage, keys
without the "transformer." prefix plus a stored mask buffer, and a sharded checkpoint.

Every parameter (LayerNorm gains and biases included, which transformers initialises to 1 and 0)
is perturbed, so a stage that ignores a parameter cannot pass.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "hf"

FIXTURES = {
    "tiny": dict(n_layer=2, n_head=4, n_embd=64, n_positions=32, vocab_size=512),
    "odd_heads": dict(n_layer=3, n_head=3, n_embd=48, n_inner=100, n_positions=16, vocab_size=300,
                      layer_norm_epsilon=1e-3),
    "exact_gelu_layer_scaled": dict(n_layer=3, n_head=2, n_embd=32, n_positions=24, vocab_size=257,
                                    activation_function="gelu", scale_attn_by_inverse_layer_idx=True,
                                    reorder_and_upcast_attn=True),
    "relu_unscaled_untied": dict(n_layer=2, n_head=8, n_embd=64, n_inner=64, n_positions=20, vocab_size=400,
                                 activation_function="relu", scale_attn_weights=False, tie_word_embeddings=False),
    "one_head_silu": dict(n_layer=2, n_head=1, n_embd=24, n_positions=12, vocab_size=128,
                          activation_function="silu", layer_norm_epsilon=1e-6),
    "quick_gelu_fp16": dict(n_layer=2, n_head=4, n_embd=32, n_positions=16, vocab_size=200,
                            activation_function="quick_gelu"),
    "gelu_fast_unprefixed": dict(n_layer=2, n_head=2, n_embd=32, n_positions=16, vocab_size=211,
                                 activation_function="gelu_fast"),
    "tanh_sharded": dict(n_layer=4, n_head=4, n_embd=32, n_positions=16, vocab_size=150,
                         activation_function="tanh"),
}  # fmt: skip


def build(name: str, options: dict, seed: int) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    return perturbed(GPT2LMHeadModel(GPT2Config(**options, bos_token_id=0, eos_token_id=0)).eval())


def perturbed(model):
    """Every parameter moved by N(0, 0.2) noise (norms and biases too), so that no option's effect hides
    behind transformers' near-identity initialisation."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model


def reference_logits(reference, ids: list[list[int]]) -> dict[str, np.ndarray]:
    """ids_i and logits_i (every position, float32) of each prompt, as transformers computes them."""
    arrays = {}
    with torch.no_grad():
        for i, prompt in enumerate(ids):
            arrays[f"ids_{i}"] = np.array(prompt, dtype=np.int64)
            arrays[f"logits_{i}"] = reference(torch.tensor([prompt])).logits[0].numpy().astype(np.float32)
    return arrays


def prompts(vocab_size: int, n_positions: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lengths = [1, 5, n_positions]  # a single token, a short prompt, and one that fills the context
    return [rng.integers(0, vocab_size, n).tolist() for n in lengths]


def save(name: str, model: GPT2LMHeadModel, directory: Path) -> None:
    if name.endswith("fp16"):  # both sides then compute in float32 on the upcast float16 weights
        model.half().save_pretrained(directory)
    elif name.endswith("sharded"):
        model.save_pretrained(directory, max_shard_size="40KB")
    else:
        model.save_pretrained(directory)
    if name.endswith("unprefixed"):
        # The layout of OpenAI's converted checkpoints: no "transformer." prefix, plus the mask buffers.
        path = directory / "model.safetensors"
        tensors = {k.removeprefix("transformer."): v for k, v in load_file(path).items()}
        n = model.config.n_positions
        for i in range(model.config.n_layer):
            tensors[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, n, n), dtype=np.uint8))
        save_file(tensors, path, metadata={"format": "pt"})
    (directory / "generation_config.json").unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    for seed, (name, options) in enumerate(FIXTURES.items()):
        directory = args.out / name
        shutil.rmtree(directory, ignore_errors=True)
        model = build(name, options, seed)
        save(name, model, directory)
        reference = GPT2LMHeadModel.from_pretrained(directory, dtype=torch.float32).eval()
        ids = prompts(options["vocab_size"], options["n_positions"], seed)
        np.savez_compressed(directory / "logits.npz", **reference_logits(reference, ids))
        meta = {"transformers_config": options, "prompts": len(ids), "seed": seed}
        (directory / "fixture.json").write_text(json.dumps(meta, indent=1) + "\n")
        size = sum(f.stat().st_size for f in directory.iterdir())
        print(f"{name:28s} {size / 1024:7.1f} KiB  prompts of {[len(p) for p in ids]} tokens")


if __name__ == "__main__":
    main()
