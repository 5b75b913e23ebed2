"""TransformerLens's bridge beside our model, on the conformance suite's random models (saved once a session).

TransformerLens (`pip install -e '.[lens]'`) is needed; without it these tests skip, unless
MINITRANSFORMER_REQUIRE_LENS is set (CI sets it), where they fail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "families"))

# One config of each family TransformerLens's bridge and we both run: GPT-2, Llama, Qwen3.5 (its DeltaNet and gated
# attention), Mamba-2
MODELS = {"gpt2": ("gpt2", "heads5-inner37"), "llama": ("llama", "llama-gqa-bias"), "qwen3_5": ("qwen3_5", "dense"),
          "mamba2": ("mamba2", "groups")}  # fmt: skip
# And those whose branches are normed before they are added (sandwich and post norms), for the names alone
NAMED_ONLY = {"gemma2": ("gemma", "gemma2-softcaps-window7"), "gemma3": ("gemma", "gemma3-local-rope-linear"),
              "olmo2": ("olmo2", "gqa-bias-head-dim")}  # fmt: skip
PROMPT = [5, 17, 3, 42, 9, 11, 23]
TOLERANCE = 1e-5  # relative to the reference's largest value (at least 1)


def require_lens():
    """TransformerLens's bridge class, or a skip (a failure where MINITRANSFORMER_REQUIRE_LENS is set)."""
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        if os.environ.get("MINITRANSFORMER_REQUIRE_LENS"):
            pytest.fail(
                "MINITRANSFORMER_REQUIRE_LENS is set but transformer-lens is not installed: pip install -e '.[lens]'"
            )
        pytest.skip("transformer-lens is not installed here: pip install -e '.[lens]' to check against it")
    return TransformerBridge


_BRIDGES: dict = {}


def bridged(tmp_path_factory, key: str, dtype: str = "float32"):
    """(our model, TransformerLens's bridge) of one of MODELS, each made once a session."""
    bridge_class = require_lens()
    import torch
    from conformance_configs import made
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from minitransformer import load_model

    if (key, dtype) not in _BRIDGES:
        directory, ours, _ = made(tmp_path_factory, *{**MODELS, **NAMED_ONLY}[key])
        if (key, "float32") not in _BRIDGES:
            # The bridge wants a tokenizer; ours read ids: a word per id, saved apart from the checkpoint
            vocab = ours.config.vocab_size
            words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
            words.pre_tokenizer = pre_tokenizers.Whitespace()
            where = tmp_path_factory.mktemp(f"{key}-words")
            PreTrainedTokenizerFast(tokenizer_object=words, unk_token="t0", pad_token="t0", bos_token="t1",
                                    eos_token="t1").save_pretrained(where)  # fmt: skip
            tokenizer = AutoTokenizer.from_pretrained(where)
        else:
            tokenizer = _BRIDGES[key, "float32"][1].tokenizer
        bridge = bridge_class.boot_transformers(str(directory), device="cpu", tokenizer=tokenizer,
                                                dtype=getattr(torch, dtype))  # fmt: skip
        model = ours if dtype == "float32" else load_model(directory, dtype=dtype)
        _BRIDGES[key, dtype] = (model, bridge)
    return _BRIDGES[key, dtype]


def gap(ours, theirs) -> float:
    """max |ours - theirs| over the finite entries of theirs, relative to theirs' largest (at least 1); inf where the
    shapes differ or where one masks (inf or -1e30 and beyond) what the other does not."""
    theirs = theirs.detach().double().numpy() if hasattr(theirs, "detach") else np.asarray(theirs, dtype=np.float64)
    ours = np.asarray(ours, dtype=np.float64)
    if ours.shape != theirs.shape:
        return np.inf
    kept, ours_kept = np.isfinite(theirs) & (np.abs(theirs) < 1e30), np.isfinite(ours) & (np.abs(ours) < 1e30)
    if (kept != ours_kept).any():
        return np.inf
    if not kept.any():
        return 0.0
    return float(np.abs(ours - theirs)[kept].max() / max(1.0, np.abs(theirs[kept]).max()))
