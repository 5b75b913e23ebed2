"""Write a small random Qwen3.5 (Gated DeltaNet layers and a full-attention layer) that transformers itself makes.

    python scripts/make_small_hybrid.py /tmp/small-hybrid    # then: minitransformer crosscheck --model /tmp/small-hybrid

No Qwen3.5's weights can be downloaded here; this is transformers' own Qwen3_5ForCausalLM of a small config (4 layers,
three Gated DeltaNet layers before a full-attention one, d_model 32, 2 key heads and 4 value heads of 8 in the
DeltaNet layers), every parameter moved by N(0, 0.2) noise so that the logits spread, saved with save_pretrained.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

CONFIG = dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=512)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(Qwen3_5TextConfig(**CONFIG), dtype=torch.float32).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    model.save_pretrained(args.directory)
    print(f"wrote {args.directory}: {sum(p.numel() for p in model.parameters()):,} parameters")


if __name__ == "__main__":
    main()
