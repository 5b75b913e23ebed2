"""The Qwen3 config, read from a Hugging Face config.json (transformers' Qwen3Config and its defaults), and the presets
of the Qwen3 dense models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): head_dim is its own number (128 unless the config says
otherwise), attention_bias puts biases on q, k, v and o alike, and a sliding window applies to the layers that
`layer_types` (or use_sliding_window and max_window_layers) name, not to every layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import UserError
from .. import rotary
from ..config import (
    FULL,
    SLIDING,
    check_dtype,
    check_layer_kinds,
    check_model_type,
    check_positive,
    flag,
    llama_keys,
)
from ..llama.config import LlamaConfig, preset

QWEN3_MODEL_TYPES = ("qwen3",)
# Qwen3Config's defaults for what a config.json leaves out
DEFAULTS = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "intermediate_size": 22016,
            "vocab_size": 151936, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6, "hidden_act": "silu"}  # fmt: skip


@dataclass(frozen=True)
class Qwen3Config(LlamaConfig):
    """A Qwen3 decoder: the Llama block, with q and k RMS-normalised per head (gains of dh) before the rotation.

    `sliding_window` is the window of the layers that have one; `layer_kinds` says which (None: every layer,
    if there is a window).
    """

    layer_kinds: tuple[str, ...] | None = None  # transformers' layer_types, where the layers differ
    model_type: str = "qwen3"
    name: str = field(default="qwen3", compare=False)

    family = "qwen3"
    json_keys = LlamaConfig.json_keys | {"layer_kinds": "layer_types"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layer_kinds is not None:
            check_layer_kinds(self.layer_kinds, self.n_layer)

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.layer_kinds if self.layer_kinds is not None else super().layer_types

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if self.layer_types[layer] == SLIDING else None

    def prefix(self, n_layer: int) -> Qwen3Config:
        kinds = None if self.layer_kinds is None else self.layer_kinds[:n_layer]
        return replace(self, n_layer=n_layer, layer_kinds=kinds)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["layer_kinds"] = None if self.layer_kinds is None else list(self.layer_kinds)
        return d

    def to_hf_dict(self) -> dict:
        window = self.sliding_window is not None
        return super().to_hf_dict() | {
            "head_dim": self.d_head, "attention_bias": self.qkv_bias, "use_sliding_window": window,
            "sliding_window": self.sliding_window, "layer_types": list(self.layer_types),
        }  # fmt: skip

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "qwen3") -> Qwen3Config:
        """Read a transformers Qwen3Config dict (as config.json holds it), with Qwen3Config's defaults."""
        check_model_type(hf, QWEN3_MODEL_TYPES, "a Qwen3 model")
        check_dtype(hf)
        if "head_dim" in hf and hf["head_dim"] is None:
            raise UserError("config head_dim=None: a Qwen3 model needs its head size (Qwen3Config's default is 128)")
        rope = rotary.read(hf)
        rotary.refuse_partial({}, rope)
        # As Qwen3Config reads them: the window exists only under use_sliding_window; layer_types, when absent, makes
        # the layers from max_window_layers on sliding ones.
        use_window = flag(hf, "use_sliding_window")
        window = hf.get("sliding_window", 4096) if use_window else None
        n_layer = hf.get("num_hidden_layers", 32)
        check_positive("num_hidden_layers", n_layer)
        kinds = hf.get("layer_types")
        if kinds is None:
            first = hf.get("max_window_layers", 28)
            if not isinstance(first, int) or isinstance(first, bool):
                raise UserError(f"config max_window_layers must be an integer, not {first!r}")
            kinds = [SLIDING if window is not None and i >= first else FULL for i in range(n_layer)]
        if not isinstance(kinds, list) or len(kinds) != n_layer or not set(kinds) <= {FULL, SLIDING}:
            raise UserError(
                f"config layer_types={kinds!r} is not supported: one of {FULL}, {SLIDING} for each "
                f"of the {n_layer} layers"
            )
        if window is None and SLIDING in kinds:
            raise UserError(
                "config layer_types has sliding_attention layers but use_sliding_window is false "
                "(no window for them): set use_sliding_window or make those layers full_attention"
            )
        if window is not None and SLIDING not in kinds:
            window = None  # no layer uses it (max_window_layers >= num_hidden_layers)
        bias = flag(hf, "attention_bias")
        layer_kinds = None if len(set(kinds)) == 1 else tuple(kinds)  # one kind: sliding_window says which
        keys = llama_keys(hf, DEFAULTS, rope)
        return cls(**keys, qkv_bias=bias, o_bias=bias, sliding_window=window, layer_kinds=layer_kinds, name=name)


# The Qwen3 dense models, from the config.json of Qwen/Qwen3-0.6B, -1.7B, -4B, -8B, -14B and -32B: head_dim 128,
# rope_theta 1,000,000, vocabulary 151,936, 40,960 positions, rms_norm_eps 1e-6, no biases, no sliding window
# (use_sliding_window false), bos 151643, eos 151645; each one's layers, heads, key/value heads, width, MLP width, and
# whether its embeddings are tied.
QWEN3: dict[str, Any] = {"head_dim": 128, "rope_theta": 1000000.0, "bos_token_id": 151643, "eos_token_id": 151645}
PRESETS: dict[str, Qwen3Config] = {
    name: preset(Qwen3Config, name, L, H, Hkv, D, F, 151936, 40960, tie_word_embeddings=tied, **QWEN3)
    for name, L, H, Hkv, D, F, tied in (
        ("qwen3-0.6b", 28, 16, 8, 1024, 3072, True),
        ("qwen3-1.7b", 28, 16, 8, 2048, 6144, True),
        ("qwen3-4b", 36, 32, 8, 2560, 9728, True),
        ("qwen3-8b", 36, 32, 8, 4096, 12288, False),
        ("qwen3-14b", 40, 40, 8, 5120, 17408, False),
        ("qwen3-32b", 64, 64, 8, 5120, 25600, False),
    )
}
