"""Write a small random Mixtral (a mixture of experts) that transformers itself makes, to run and count locally.

    python scripts/make_small_moe.py /tmp/small-moe          # then: minitransformer generate --model /tmp/small-moe ...

No Mixtral's weights can be downloaded here; this is transformers' own MixtralForCausalLM of a small config
(4 layers, d_model 64, 8 experts of width 96, 2 per token, a sliding window of 32), every parameter moved by
N(0, 0.2) noise so that the router's choices and the logits spread, saved with save_pretrained.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, MixtralConfig

CONFIG = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2, sliding_window=32,
              max_position_embeddings=512)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(MixtralConfig(**CONFIG), dtype=torch.float32).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    model.save_pretrained(args.directory)
    print(f"wrote {args.directory}: {sum(p.numel() for p in model.parameters()):,} parameters")


if __name__ == "__main__":
    main()
