"""GLM-4-0414 (transformers' Glm4ForCausalLM): the Llama family's parts, with four norms a block (a norm on each
branch's output beside the norms before them, each plain w, not Gemma's 1 + w), Phi-3's gate and up in one product,
biases on q, k and v, and rotary positions on the first half of each head, its neighbouring pairs turned in place."""

from __future__ import annotations

from dataclasses import dataclass

from ..keys import FLAG, SIZE, TOKENS, eps, key
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS
from ..llama.reference import llama_like, note
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import Sandwich
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.mlps import FusedGatedMLP
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys, partial_rotary

EOS = (151329, 151336, 151338)  # Glm4Config's ids where the file gives none (or null)


@dataclass(frozen=True)
class Glm4Config(LlamaConfig):
    n_kv_head: int = key("num_key_value_heads", 2, SIZE)
    head_dim: int | None = key("head_dim", 128, SIZE)
    n_positions: int = key("max_position_embeddings", 131072, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1.5625e-07)
    qkv_bias: bool = key("attention_bias", True, FLAG)  # q, k and v; o_proj has none
    partial_rotary_factor: float = 0.5  # the share of each head rotary turns (the rope group reads it)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", None, TOKENS, rule=lambda hf, values: list(EOS))
    model_type: str = "glm4"

    what = "a GLM-4 model"
    classes = {"glm4": "Glm4ForCausalLM"}
    # transformers 5's rope_parameters or an older file's top-level rope_theta and partial_rotary_factor
    groups = (RopeKeys(YARN_ROPE_TYPES, refused=(), top_level=True, share=partial_rotary(0.5)),)

    def rope(self, layer: int = 0) -> Rope:
        """The first int(dh x partial_rotary_factor) numbers of each head turn, as transformers rounds."""
        turned = int(self.d_head * self.partial_rotary_factor)
        return Rope(turned, self.rope_theta, self.rope_scaling, self.n_positions)


# GLM-4-9B-0414's config.json as a fine-tune re-saves it (ccui46/hazardworld_per_chunk_act_glm_tokfix_diffPrompt_2000,
# transformers 5.5.3; GLM-4-9B-0414 derivatives all say 32768 positions and rms_norm_eps 1e-5); its eos the copy's.
NINE_B = dict(norm_eps=1e-5, eos_token_id=151329)
PRESETS = {"glm-4-9b-0414": preset(Glm4Config, "glm-4-9b-0414", 40, 32, 2, 4096, 13696, 151552, 32768, **NINE_B)}
# Its four norms: before the attention, after it, before the MLP (Llama's name), after it.
NORMS = ("input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm")
SANDWICH = Sandwich(GroupedQueryAttention(interleaved=True), FusedGatedMLP(), names=("self_attn", "mlp", *NORMS))
GLM4 = Decoder(SANDWICH, symbols=SYMBOLS)
REFERENCE = llama_like(note("GLM-4"), 4)  # its four norms a layer
ARCHITECTURE = composed("glm4", GLM4, reference=REFERENCE, config=Glm4Config, presets=PRESETS, label="GLM-4")
