"""The OLMo 2 config, read from a Hugging Face config.json (transformers' Olmo2Config and its defaults), and the
presets of OLMo 2 models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): attention_bias puts biases on q, k, v and o, the MLP
never has them, there is no sliding window (Olmo2Model has none, whatever config.json says), and head_dim, which
Olmo2Config does not define, is honoured when a config.json has it, as transformers' Olmo2Attention reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import UserError
from ..config import flag
from ..llama.config import LlamaConfig, _rope_parameters

OLMO2_MODEL_TYPES = ("olmo2",)


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
        if hf.get("model_type") not in OLMO2_MODEL_TYPES:
            raise UserError(f"config model_type={hf.get('model_type')!r} is not an OLMo 2 model")
        dtype = hf.get("dtype", hf.get("torch_dtype"))
        if dtype not in (None, "float32", "float16", "bfloat16"):
            raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")
        rope = _rope_parameters(hf)
        value = rope.pop("partial_rotary_factor", None)
        if value not in (None, 1, 1.0):
            raise UserError(f"config partial_rotary_factor={value!r} is not supported")
        theta = rope.pop("rope_theta")
        n_head = hf.get("num_attention_heads", 32)
        n_kv_head = hf.get("num_key_value_heads")
        bias = flag(hf, "attention_bias")
        eos = hf.get("eos_token_id", 50279)
        return cls(
            n_layer=hf.get("num_hidden_layers", 32), n_head=n_head, n_embd=hf.get("hidden_size", 4096),
            n_inner=hf.get("intermediate_size", 11008), vocab_size=hf.get("vocab_size", 50304),
            n_kv_head=n_head if n_kv_head is None else n_kv_head, head_dim=hf.get("head_dim"),
            n_positions=hf.get("max_position_embeddings", 2048), rms_norm_eps=hf.get("rms_norm_eps", 1e-5),
            hidden_act=hf.get("hidden_act", "silu"), rope_theta=theta,
            rope_scaling=tuple(sorted(rope.items())) if rope.get("rope_type", "default") != "default" else None,
            qkv_bias=bias, o_bias=bias, tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            bos_token_id=hf.get("bos_token_id"), eos_token_id=tuple(eos) if isinstance(eos, list) else eos, name=name,
        )  # fmt: skip


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
