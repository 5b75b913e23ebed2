"""SmolLM3 (transformers' SmolLM3ForCausalLM): the Llama block, with NoPE layers (no rotary positions) and windows."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ..config import FULL, SLIDING, check_windows
from ..keys import FLAG, POSITIVE, SIZE, TOKENS, WINDOW, Key, Kind, key, layer_kinds
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS
from ..llama.reference import float64_throughout, note
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..qwen3.config import used_window
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys

NOPE = "_nope"  # the kinds of layer without rotary positions: full_attention_nope, sliding_attention_nope
ROPE_OR_NOT = Kind("a list of 1 (RoPE) and 0 (NoPE)", lambda v: isinstance(v, list) and all(x in (0, 1) for x in v))
NO_ROPE_LAYERS = Key("no_rope_layers", None, ROPE_OR_NOT.or_null())
INTERVAL = Key("no_rope_layer_interval", 4, POSITIVE)
LAYER_TYPES = Key("layer_types", None, layer_kinds(FULL, SLIDING).or_null())


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's kind: the file's no_rope_layers and layer_types, or SmolLM3Config's rules where it has none."""
    n, rope = values["n_layer"], NO_ROPE_LAYERS.get(hf)
    rope = [int((i + 1) % INTERVAL.get(hf) != 0) for i in range(n)] if rope is None else rope  # every interval-th NoPE
    if len(rope) < n:
        raise UserError(f"config no_rope_layers must name {n} layers (num_hidden_layers), not {len(rope)}")
    attention = LAYER_TYPES.get(hf) or [SLIDING if values["sliding_window"] and not on else FULL for on in rope[:n]]
    return [kind + ("" if on else NOPE) for kind, on in zip(attention, rope)]


def written(c: SmolLM3Config) -> dict:
    return {"layer_types": [k.removesuffix(NOPE) for k in c.layer_types],
            "no_rope_layers": [int(not k.endswith(NOPE)) for k in c.layer_types]}  # fmt: skip


@dataclass(frozen=True)
class SmolLM3Config(LlamaConfig):
    n_kv_head: int = key("num_key_value_heads", 4, SIZE.or_null(), follows="n_head")
    n_positions: int = key("max_position_embeddings", 32768, SIZE)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    mlp_bias: bool = key("mlp_bias", False, FLAG)
    sliding_window: int | None = used_window(Key("sliding_window", None, WINDOW))  # by default on the NoPE layers
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 128000, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 128001, TOKENS)
    rope_theta: float = 2000000.0
    model_type: str = "smollm3"
    layer_types: tuple[str, ...] = key("layer_types", None, layer_kinds(FULL, SLIDING, FULL + NOPE, SLIDING + NOPE),
        read=kinds, rule=kinds, reads=(NO_ROPE_LAYERS, INTERVAL), write=written)  # fmt: skip

    what = "a SmolLM3 model"
    classes = {"smollm3": "SmolLM3ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)

    def validate(self) -> None:
        check_windows(self, "use_sliding_window is false (no window for them)")
        super().validate()

    def rope(self, layer: int = 0) -> Rope | None:
        return None if self.layer_types[layer].endswith(NOPE) else super().rope(layer)


# SmolLM3-3B's config.json as fine-tunes copy it (sweatSmile/HF-SmolLM3-3B-Math-Formulas-4bit, koutch/0.json_train_
# grpo_v1_dev; NoPE every 4th layer, no window, tied), its rope_theta as GitHub fixtures quote it (the copies cut it).
PRESETS = {"smollm3-3b": preset(SmolLM3Config, "smollm3-3b", 36, 16, 4, 2048, 11008, 128256, 65536,
                                rope_theta=5000000.0, eos_token_id=128012)}  # fmt: skip
SMOLLM3 = Decoder(PreNorm(GroupedQueryAttention(), GatedMLP()), symbols=SYMBOLS)  # the Llama family's decoder
ARCHITECTURE = composed("smollm3", SMOLLM3, config=SmolLM3Config, presets=PRESETS, label="SmolLM3",
                        float64_reference=float64_throughout, float64_note=note("SmolLM3"))  # fmt: skip
