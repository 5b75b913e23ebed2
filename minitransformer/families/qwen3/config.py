"""The Qwen3 config: each field under its config.json key with transformers' Qwen3Config default, and the presets of
the Qwen3 dense models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): head_dim is its own number (128 unless the config says
otherwise), attention_bias puts biases on q, k, v and o alike, and a sliding window applies to the layers that
`layer_types` (or use_sliding_window and max_window_layers) name, not to every layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import FULL, SLIDING, check_windows
from ..keys import FLAG, LAYER_COUNT, SIZE, TOKENS, WINDOW, Key, Kind, key, layer_kinds
from ..llama.config import LlamaConfig, preset
from ..rotary import YARN_ROPE_TYPES, RopeKeys

# As Qwen3Config reads them (Qwen3-MoE's and SmolLM3's too): the window exists only under use_sliding_window;
# layer_types, when absent, makes the layers from max_window_layers on sliding ones.
USE_SLIDING_WINDOW = Key("use_sliding_window", False, FLAG)
SLIDING_WINDOW = Key("sliding_window", 4096, WINDOW)
MAX_WINDOW_LAYERS = Key("max_window_layers", 28, Kind("an integer", lambda n: type(n) is int, shape=True))


def used_window(window: Key = SLIDING_WINDOW) -> Any:
    """The sliding_window field of a config that reads it (`window`: with its class's default) only under
    use_sliding_window, and writes both."""
    return key(
        "sliding_window",
        None,
        WINDOW,
        read=lambda hf, values: window.get(hf) if USE_SLIDING_WINDOW.get(hf) else None,
        reads=(window, USE_SLIDING_WINDOW),
        write=lambda c: {"use_sliding_window": c.sliding_window is not None, "sliding_window": c.sliding_window},
    )


def sliding_from(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Qwen3Config's layer_types where the file has none: sliding from max_window_layers on, if there is a window."""
    first, window = MAX_WINDOW_LAYERS.get(hf), values["sliding_window"] is not None
    return tuple(SLIDING if window and i >= first else FULL for i in range(values["n_layer"]))


def uniform_or_list(kinds: tuple[str, ...]) -> list[str] | None:
    return None if len(set(kinds)) == 1 else list(kinds)  # one kind: sliding_window says which


@dataclass(frozen=True)
class Qwen3Config(LlamaConfig):
    """A Qwen3 decoder: the Llama block, with q and k RMS-normalised per head (gains of dh) before the rotation.

    `sliding_window` is the window of the layers `layer_types` names sliding_attention."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE)
    n_inner: int = key("intermediate_size", 22016, SIZE)
    vocab_size: int = key("vocab_size", 151936, SIZE)
    n_kv_head: int = key("num_key_value_heads", 32, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", 128, SIZE)
    n_positions: int = key("max_position_embeddings", 32768, SIZE)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    sliding_window: int | None = used_window()
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS)
    model_type: str = "qwen3"
    layer_types: tuple[str, ...] = key(
        "layer_types",
        None,
        layer_kinds(FULL, SLIDING),
        rule=sliding_from,
        reads=(MAX_WINDOW_LAYERS,),
        dict_key="layer_kinds",
        dict_value=uniform_or_list,
    )

    what = "a Qwen3 model"
    classes = {"qwen3": "Qwen3ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)

    def validate(self) -> None:
        check_windows(self, "use_sliding_window is false (no window for them)")
        super().validate()


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
