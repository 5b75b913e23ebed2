"""EXAONE 4 (transformers' Exaone4ForCausalLM): OLMo 2's post-norm block with Qwen3's q and k norms (each head over its
dh numbers), a sliding window on the layers layer_types names, and, wherever a window is set, no rotary positions on
the full layers (NoPE: Exaone4Attention turns q and k only where sliding_window is None or its layer slides)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ..config import FULL, SLIDING, check_windows
from ..gemma.config import periodic
from ..keys import SIZE, TOKENS, WINDOW, Key, Kind, eps, key, layer_kinds
from ..llama.config import LlamaConfig, llama3_scaling, preset
from ..llama.family import SYMBOLS
from ..llama.reference import llama_like, note
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import PostNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys
from ..smollm3.family import LAYER_TYPES, NOPE

PATTERN_WHAT = "a positive integer, or a string with layer_types beside it"
PATTERN_KIND = Kind(PATTERN_WHAT, lambda v: (type(v) is int and v > 0) or isinstance(v, str), shape=True)
KINDS = layer_kinds(FULL, SLIDING, FULL + NOPE)
PATTERN = Key("sliding_window_pattern", 4, PATTERN_KIND)


def written(c: Exaone4Config) -> dict:
    return {"layer_types": [k.removesuffix(NOPE) for k in c.layer_types]}


def kinds(hf: dict, values: dict) -> tuple[str, ...]:
    """Each layer's kind: the file's layer_types, or Exaone4Config's rule where it has none (a full layer in every
    sliding_window_pattern); the full layers NoPE (full_attention_nope) wherever a window is set."""
    window, given = values["sliding_window"], LAYER_TYPES.get(hf)
    if given is None:
        pattern = PATTERN.get(hf)
        if window is None or isinstance(pattern, str):  # transformers 5.24 fails on both (a pattern of 0; a string)
            said = "sliding_window=null" if window is None else f"sliding_window_pattern={pattern!r}"
            why = "is not supported (Exaone4Config cannot read it); give layer_types"
            raise UserError(f"config {said} without layer_types {why}")
        given = periodic(values["n_layer"], pattern)
    if window is not None and SLIDING not in given:
        turns = "EXAONE 4 would turn no layer (its full layers have no positions wherever a window is set)"
        raise UserError(f"config sliding_window={window} with no sliding_attention layer is not supported: {turns}")
    return tuple(kind + NOPE if window is not None and kind == FULL else kind for kind in given)


@dataclass(frozen=True)
class Exaone4Config(LlamaConfig):
    """OLMo 2's block with q and k RMS-normed per head; sliding_window on the layers layer_types names sliding; the
    others (full_attention) without rotary positions where a window is set (full_attention_nope)."""

    n_kv_head: int = key("num_key_value_heads", 32, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    sliding_window: int | None = key("sliding_window", 4096, WINDOW)
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "exaone4"
    layer_types: tuple[str, ...] = key(
        "layer_types", None, KINDS, read=kinds, rule=kinds, reads=(LAYER_TYPES, PATTERN), write=written
    )

    what = "an EXAONE 4 model"
    classes = {"exaone4": "Exaone4ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)

    def validate(self) -> None:
        check_windows(self)
        super().validate()

    def rope(self, layer: int = 0) -> Rope | None:
        return None if self.layer_types[layer].endswith(NOPE) else super().rope(layer)


# EXAONE-4.0-32B (LGAI-EXAONE/EXAONE-4.0-32B): 64 layers, 40 heads of 128 sharing 8 key/value heads, 5120 wide, MLP
# 27,392, three sliding layers of a 4,096 window to a global one, rope_theta 1e6 and llama3 x16 over 8,192 positions,
# untied, as EXAONE 4.5's text model (built on the 4.0-32B) states them (ollama's and TensorRT-LLM's tests quote its
# config.json); its vocabulary of 102,400 and context of 131,072 as its model page says; its token ids and rms_norm_eps
# as EXAONE-4.0-1.2B's config.json has them (the same tokenizer; Megatron-Bridge's fixture and a quantized copy).
LONG = dict(head_dim=128, rope_theta=1e6, rope_scaling=llama3_scaling(16.0, 8192), bos_token_id=1, eos_token_id=361)
PRESETS = {"exaone-4.0-32b": preset(Exaone4Config, "exaone-4.0-32b", 64, 40, 8, 5120, 27392, 102400, 131072, **LONG)}
EXAONE4 = Decoder(PostNorm(GroupedQueryAttention(qk_norm=PER_HEAD, reads="x"), GatedMLP(reads="x")), symbols=SYMBOLS)
REFERENCE = llama_like(note("EXAONE 4"), 4)  # q and k norms beside two
ARCHITECTURE = composed(
    "exaone4", EXAONE4, reference=REFERENCE, config=Exaone4Config, presets=PRESETS, label="EXAONE 4"
)
