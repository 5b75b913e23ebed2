"""Write small Llama-family models (Llama, Mistral, Qwen2) and transformers' own logits for them, as test fixtures.

    python scripts/make_hf_llama_fixtures.py      # writes tests/fixtures/hf_llama/<name>/

The sibling of make_hf_fixtures.py (GPT-2), in the same layout: each fixture is a random-initialised
LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM saved with save_pretrained (config.json +
weights), plus logits.npz (transformers' float32 logits at every position of three token-id prompts:
one token, five, and one that fills the context) and fixture.json (what it was made from and what
it covers). Together they cover the options that change a Llama-family forward pass:

    llama_mha            multi-head (H = Hkv = 4), untied, rms_norm_eps 1e-5, context 64 (validate uses it)
    llama_gqa_bias       8 query heads over 2 KV heads, head_dim 12 != D/H = 8, rope_theta 500,
                         attention and MLP biases, rms_norm_eps 1e-2
    llama3_mqa_tied      one KV head (MQA), llama3 rope scaling with frequencies in all three of its bands
                         (kept, blended, slowed), rope_theta 500,000, tied embeddings
    llama_linear_fp16    linear rope scaling (factor 4), float16 weights
    mistral_window       sliding window of 6 over a 48-position context, GQA, sharded checkpoint
    qwen2_bias_bf16      Qwen2 (biases on q, k and v only), rope_theta 1e6, tied, bfloat16 weights

Every parameter (RMSNorm gains included, which transformers initialises to 1, and biases, which it
sets to 0) is moved by N(0, 0.2) noise, so that logits are far from 0 and a stage that ignores a
parameter cannot pass. The reference logits are computed by reloading what was saved in float32, as
minitransformer loads it (float16 and bfloat16 weights are upcast, then everything is float32).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from make_hf_fixtures import perturbed, prompts, reference_logits  # the GPT-2 fixtures' noise, prompts and logits
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "hf_llama"

CONFIG_CLASSES = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config}

# name: (model_type, transformers config options, how the weights are stored, what the fixture covers)
FIXTURES = {
    "llama_mha": ("llama", dict(
        hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        vocab_size=160, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
    ), "float32", ["mha", "untied", "context 64"]),
    "llama_gqa_bias": ("llama", dict(
        hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
        head_dim=12, vocab_size=128, max_position_embeddings=40, rms_norm_eps=1e-2, attention_bias=True,
        mlp_bias=True, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
    ), "float32", ["gqa 8/2", "head_dim != D/H", "rope_theta 500", "attention bias", "mlp bias", "rms_norm_eps 1e-2"]),
    "llama3_mqa_tied": ("llama", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
        vocab_size=160, max_position_embeddings=80, rms_norm_eps=1e-5, tie_word_embeddings=True,
        # dh = 16: wavelengths 6.3 (< 16: kept), 32 (between 16 and 64: blended), 167 and up (> 64: slowed).
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    ), "float32", ["mqa", "llama3 rope scaling", "rope_theta 500000", "tied"]),
    "llama_linear_fp16": ("llama", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=128, max_position_embeddings=40, tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    ), "float16", ["linear rope scaling", "float16 weights", "gqa 4/2"]),
    "mistral_window": ("mistral", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=160, max_position_embeddings=48, sliding_window=6, tie_word_embeddings=False,
    ), "sharded", ["mistral", "sliding window 6", "gqa 4/2", "sharded"]),
    "qwen2_bias_bf16": ("qwen2", dict(
        hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
        vocab_size=300, max_position_embeddings=40, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    ), "bfloat16", ["qwen2", "qkv bias", "rope_theta 1e6", "tied", "bfloat16 weights"]),
}  # fmt: skip


def build(model_type: str, options: dict, seed: int):
    torch.manual_seed(seed)
    config = CONFIG_CLASSES[model_type](**options)
    return perturbed(AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval())


def save(model, storage: str, directory: Path) -> None:
    if storage == "float16":  # both sides then compute in float32 on the upcast weights
        model.half().save_pretrained(directory)
    elif storage == "bfloat16":
        model.to(torch.bfloat16).save_pretrained(directory)
    elif storage == "sharded":
        model.save_pretrained(directory, max_shard_size="40KB")
    else:
        model.save_pretrained(directory)
    (directory / "generation_config.json").unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    total = 0
    for seed, (name, (model_type, options, storage, covers)) in enumerate(FIXTURES.items(), start=100):
        directory = args.out / name
        shutil.rmtree(directory, ignore_errors=True)
        save(build(model_type, options, seed), storage, directory)
        reference = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        ids = prompts(options["vocab_size"], options["max_position_embeddings"], seed)
        arrays = reference_logits(reference, ids)
        np.savez_compressed(directory / "logits.npz", **arrays)
        meta = {"model_type": model_type, "transformers_config": options, "storage": storage, "covers": covers,
                "prompts": len(ids), "seed": seed}  # fmt: skip
        (directory / "fixture.json").write_text(json.dumps(meta, indent=1) + "\n")
        size = sum(f.stat().st_size for f in directory.iterdir())
        total += size
        print(
            f"{name:20s} {size / 1024:7.1f} KiB  prompts of {[len(p) for p in ids]} tokens  "
            f"max |logit| {max(float(np.abs(v).max()) for k, v in arrays.items() if k.startswith('logits')):.2f}"
        )
    print(f"{'total':20s} {total / 1024:7.1f} KiB")


if __name__ == "__main__":
    main()
