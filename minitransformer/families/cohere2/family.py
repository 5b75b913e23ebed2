"""Cohere2 (transformers' Cohere2ForCausalLM: Command R7B, Command A): the Llama family's parts in a parallel block,
x + attention(h) + MLP(h) with the one h = LayerNorm(x) (a LayerNorm without biases); layers alternating a sliding
window and full attention (three sliding, one full by default), rotary positions on the sliding layers alone, on
neighbouring pairs of each head's numbers, none on the full layers (NoPE); the logits multiplied by logit_scale."""

from __future__ import annotations

from dataclasses import dataclass

from ...engine.ops import constant
from ...engine.stages import Stage
from ...engine.tape import Tape
from ..config import FULL, SLIDING, check_windows, slides
from ..keys import FLAG, NUMBER, SIZE, TOKENS, WINDOW, Key, Refusal, eps, key, layer_kinds
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import Parallel
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import GatedMLP
from ..parts.norms import LayerNorm
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys
from . import reference

PATTERN = Key("sliding_window_pattern", 4, SIZE)  # the older spelling of layer_types: every 4th layer full


def kinds(hf: dict, values: dict) -> tuple[str, ...]:
    """Cohere2Config's layer_types where the file has none: every sliding_window_pattern-th layer full, the rest
    sliding."""
    return tuple(SLIDING if (i + 1) % PATTERN.get(hf) else FULL for i in range(values["n_layer"]))


def not_(value):
    """A refusal of every value of a Cohere key but the one transformers' Cohere2 computes (it reads none of them)."""
    return lambda given, hf: given != value


COMPUTES = "is not supported: transformers' Cohere2 (which reads no such key) computes"


@dataclass(frozen=True)
class Cohere2Config(LlamaConfig):
    n_positions: int = key("max_position_embeddings", 8192, SIZE)
    norm_eps: float = eps("layer_norm_eps", 1e-5)
    qkv_bias: bool = key("attention_bias", False, FLAG)  # q, k, v and o alike
    o_bias: bool = key("attention_bias", False, FLAG)
    sliding_window: int | None = key("sliding_window", 4096, WINDOW)
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 5, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 255001, TOKENS)
    logit_scale: float = key("logit_scale", 0.0625, NUMBER)
    model_type: str = "cohere2"
    layer_types: tuple[str, ...] = key("layer_types", None, layer_kinds(FULL, SLIDING), rule=kinds, reads=(PATTERN,))

    what = "a Cohere2 model"
    classes = {"cohere2": "Cohere2ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES, top_level=True),)
    # The 2024 files' own keys, which transformers reads not at all: each refused where it says other than the code does
    refusals = (
        Refusal("use_parallel_block", f"{COMPUTES} the parallel block", not_(True)),
        Refusal("use_gated_activation", f"{COMPUTES} a gated MLP", not_(True)),
        Refusal("rotary_pct", f"{COMPUTES} rotary on every number of a head", lambda pct, hf: pct not in (1, 1.0)),
        Refusal("position_embedding_type", f"{COMPUTES} rope_gptj (neighbouring pairs)", not_("rope_gptj")),
    )

    def validate(self) -> None:
        check_windows(self)
        super().validate()

    def rope(self, layer: int = 0) -> Rope | None:
        """Rotary positions on the sliding layers, none on the full ones (Cohere2Attention turns q and k only where
        its layer has a window)."""
        return super().rope(layer) if slides(self.layer_types[layer]) else None


# As Gemma's final_softcap, a step after the logits: their scale (no products)
FINAL_SCALE = Stage("final_scale", ("final_scale",), "scale", "logits = logits x logit_scale", "logits [R, V]")


def scaled(logits, config: Cohere2Config, tape: Tape):
    return tape.stage(FINAL_SCALE, logits * constant(logits, config.logit_scale), "R V")


# Command R7B's config.json as an abliterated copy keeps every key of it (huihui-ai/c4ai-command-r7b-12-2024-
# abliterated, transformers 4.48; _name_or_path CohereForAI/c4ai-command-r7b-12-2024): a window of 4,096 on three
# layers of four, rope_theta 50,000, logit_scale 0.25, tied.
PRESETS = {"command-r7b": preset(Cohere2Config, "command-r7b", 32, 32, 8, 4096, 14336, 256000, 8192, head_dim=128,
                                 rope_theta=50000.0, logit_scale=0.25)}  # fmt: skip
NORM = LayerNorm(bias=False, description="LayerNorm gains (no biases)")
COHERE2 = Decoder(
    Parallel(GroupedQueryAttention(interleaved=True), GatedMLP(), NORM), NORM, after_logits=scaled, symbols=SYMBOLS
)
ARCHITECTURE = composed("cohere2", COHERE2, config=Cohere2Config, presets=PRESETS, label="Cohere2", reference=reference)
