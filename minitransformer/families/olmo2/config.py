"""The OLMo 2 config, read from a Hugging Face config.json (transformers' Olmo2Config and its defaults), and the
presets of OLMo 2 models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): attention_bias puts biases on q, k, v and o, the MLP
never has them, there is no sliding window (Olmo2Model has none, whatever config.json says), and head_dim, which
Olmo2Config does not define, is honoured when a config.json has it, as transformers' Olmo2Attention reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import rotary
from ..config import check_dtype, check_model_type, flag, llama_keys
from ..llama.config import LlamaConfig

OLMO2_MODEL_TYPES = ("olmo2",)
# Olmo2Config's defaults for what a config.json leaves out (num_key_value_heads None: one per query head)
DEFAULTS = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "intermediate_size": 11008,
            "vocab_size": 50304, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "eos_token_id": 50279}  # fmt: skip


@dataclass(frozen=True)
class Olmo2Config(LlamaConfig):
    """An OLMo 2 decoder: the Llama block with its two RMSNorms moved onto the branches' outputs (before each residual
    add) and q and k RMS-normalised over their whole projections (H dh and Hkv dh numbers) before the rotation."""

    rms_norm_eps: float = 1e-5
    model_type: str = "olmo2"
    name: str = field(default="olmo2", compare=False)

    family = "olmo2"

    def to_hf_dict(self) -> dict:
        return super().to_hf_dict() | {"attention_bias": self.qkv_bias}

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "olmo2") -> Olmo2Config:
        """Read a transformers Olmo2Config dict (as config.json holds it), with Olmo2Config's defaults."""
        check_model_type(hf, OLMO2_MODEL_TYPES, "an OLMo 2 model")
        check_dtype(hf)
        rope = rotary.read(hf)
        rotary.refuse_partial({}, rope)
        bias = flag(hf, "attention_bias")
        return cls(**llama_keys(hf, DEFAULTS, rope), qkv_bias=bias, o_bias=bias, name=name)


# OLMo 2, from the config.json of allenai/OLMo-2-1124-7B and allenai/OLMo-2-1124-13B: one key/value head per query
# head, rope_theta 500,000, rms_norm_eps 1e-6, vocabulary 100,352, context 4,096, untied, no biases, eos 100257.
PRESETS: dict[str, Olmo2Config] = {
    "olmo-2-7b": Olmo2Config(n_layer=32, n_head=32, n_kv_head=32, n_embd=4096, n_inner=11008, vocab_size=100352,
                             n_positions=4096, rms_norm_eps=1e-6, rope_theta=500000.0, eos_token_id=100257,
                             name="olmo-2-7b"),
    "olmo-2-13b": Olmo2Config(n_layer=40, n_head=40, n_kv_head=40, n_embd=5120, n_inner=13824, vocab_size=100352,
                              n_positions=4096, rms_norm_eps=1e-6, rope_theta=500000.0, eos_token_id=100257,
                              name="olmo-2-13b"),
}  # fmt: skip
