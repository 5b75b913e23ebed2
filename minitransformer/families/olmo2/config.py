"""The OLMo 2 config: each field under its config.json key with transformers' Olmo2Config default, and the presets of
OLMo 2 models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): attention_bias puts biases on q, k, v and o, the MLP
never has them, there is no sliding window (Olmo2Model has none, whatever config.json says), and head_dim, which
Olmo2Config does not define, is honoured when a config.json has it, as transformers' Olmo2Attention reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..keys import FLAG, LAYER_COUNT, SIZE, TOKENS, Group, eps, key
from ..llama.config import LlamaConfig, preset
from ..rotary import YARN_ROPE_TYPES, RopeKeys


@dataclass(frozen=True)
class Olmo2Config(LlamaConfig):
    """An OLMo 2 decoder: the Llama block with its two RMSNorms moved onto the branches' outputs (before each residual
    add) and q and k RMS-normalised over their whole projections (H dh and Hkv dh numbers) before the rotation."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE)
    n_inner: int = key("intermediate_size", 11008, SIZE)
    vocab_size: int = key("vocab_size", 50304, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", None, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 50279, TOKENS)
    model_type: str = "olmo2"

    what = "an OLMo 2 model"
    classes = {"olmo2": "Olmo2ForCausalLM"}
    groups: ClassVar[tuple[Group, ...]] = (RopeKeys(YARN_ROPE_TYPES),)


# OLMo 2, from the config.json of allenai/OLMo-2-1124-7B and allenai/OLMo-2-1124-13B: one key/value head per query
# head, rope_theta 500,000, rms_norm_eps 1e-6, vocabulary 100,352, context 4,096, untied, no biases, eos 100257.
PRESETS: dict[str, Olmo2Config] = {
    name: preset(
        Olmo2Config, name, L, H, H, D, F, 100352, 4096, norm_eps=1e-6, rope_theta=500000.0, eos_token_id=100257
    )
    for name, L, H, D, F in (("olmo-2-7b", 32, 32, 4096, 11008), ("olmo-2-13b", 40, 40, 5120, 13824))
}
