"""Llama 4's text model (transformers' Llama4ForCausalLM, Llama4TextConfig): the Llama block with
- chunked attention on the rotary layers: a query reads only the keys of its own chunk of attention_chunk_size
  positions (8,192 published), each chunk's keys alone counted (engine/row_chunks.py), the cache holding one chunk;
- NoPE global layers (no_rope_layers 0: every fourth by default), full attention without rotary positions, each query
  scaled by its position's temperature (attn_temperature_tuning, floor_scale, attn_scale);
- on the rotary layers, rotary on neighbouring pairs (transformers' complex product of x[2i] + i x[2i+1] with
  e^(i p f_i) is rotary.py's interleaved rotation) and then q and k RMS-normed per head without gains (use_qk_norm);
- in the layers moe_layers or interleave_moe_layer_step name, a mixture in place of the MLP: the top k (1) of the
  router's logits, each chosen expert's gate the sigmoid of its logit, which scales the expert's input; each expert's
  gate and up one [D, 2F] product (3-D tensors stored [in, out]); a shared SwiGLU of the same width F on every token,
  added. Elsewhere a dense SwiGLU of intermediate_size_mlp (Fd).
transformers runs every expert on every token, the others' inputs scaled by 0: ours computes each expert's tokens
alone (crosscheck names the difference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...engine.ledger import keys_in_chunks
from ...engine.row_chunks import ROW_CHUNK, chunked_pairs
from ...errors import UserError
from ..config import FULL
from ..keys import (
    FLAG,
    LAYER_COUNT,
    NUMBER,
    POSITIVE,
    POSITIVE_NUMBER,
    SIZE,
    TOKENS,
    TRUTHY,
    WINDOW,
    Key,
    eps,
    key,
    layer_kinds,
)
from ..llama.config import LlamaConfig, preset
from ..parts.attention import UNWEIGHTED, GroupedQueryAttention
from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.moe import FusedSwiGLUExperts, Mixture, MlpByKind, SharedExpert, TopKSoftmaxRouter
from ..qwen3moe.config import INDICES
from ..qwen3moe.family import DenseMLP, Qwen3MoeFormulas
from ..rotary import Rope, RopeKeys, rope_scaling
from ..smollm3.family import NO_ROPE_LAYERS, NOPE
from . import reference

CHUNKED, MOE = "chunked_attention", "_moe"  # a layer's kind: its attention, "_nope" without rotary, "_moe" experts
INTERVAL = Key("no_rope_layer_interval", 4, POSITIVE)
MOE_LAYERS = Key("moe_layers", None, INDICES.or_null())
STEP = Key("interleave_moe_layer_step", 1, POSITIVE)
CHUNK = Key("attention_chunk_size", 8192, WINDOW)
LAYER_TYPES = Key("layer_types", None, layer_kinds(FULL, CHUNKED).or_null())


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's kind as Llama4TextConfig makes it: rotary where no_rope_layers says 1 (an empty or absent list:
    all but every no_rope_layer_interval-th), chunked where rotary and attention_chunk_size is set (or as layer_types
    says), experts in moe_layers (or every interleave_moe_layer_step-th, the last of each step)."""
    n = values["n_layer"]
    rope = NO_ROPE_LAYERS.get(hf) or [int((i + 1) % INTERVAL.get(hf) != 0) for i in range(n)]
    if len(rope) < n:
        raise UserError(f"config no_rope_layers must name {n} layers (num_hidden_layers), not {len(rope)}")
    moe = MOE_LAYERS.get(hf)
    moe = range(STEP.get(hf) - 1, n, STEP.get(hf)) if moe is None else moe
    chunk = CHUNK.get(hf)
    attention = LAYER_TYPES.get(hf) or [CHUNKED if on and chunk is not None else FULL for on in rope[:n]]
    return [a + ("" if on else NOPE) + (MOE if i in moe else "") for i, (a, on) in enumerate(zip(attention, rope))]


def written(c: Llama4TextConfig) -> dict:
    attention = [k.removesuffix(MOE).removesuffix(NOPE) for k in c.layer_types]
    rope, moe = [int(NOPE not in k) for k in c.layer_types], [i for i, k in enumerate(c.layer_types) if k.endswith(MOE)]
    return {"layer_types": attention, "no_rope_layers": rope, "moe_layers": moe}


KINDS = [a + r + m for a in (FULL, CHUNKED) for r in ("", NOPE) for m in ("", MOE)]
LAYERS = layer_kinds(*KINDS)
READS = (NO_ROPE_LAYERS, INTERVAL, MOE_LAYERS, STEP, CHUNK)  # the keys kinds reads


@dataclass(frozen=True)
class Llama4TextConfig(LlamaConfig):
    """A Llama 4 text model: transformers' Llama4TextConfig defaults (Scout's shapes); n_inner is an expert's width
    (and the shared expert's), dense_inner the dense layers' MLP."""

    n_layer: int = key("num_hidden_layers", 48, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 40, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    n_embd: int = key("hidden_size", 5120, SIZE)
    n_inner: int = key("intermediate_size", 8192, SIZE)  # each expert's width, and the shared expert's
    dense_inner: int = key("intermediate_size_mlp", 16384, SIZE)  # the dense layers' MLP (Fd)
    vocab_size: int = key("vocab_size", 202048, SIZE)
    head_dim: int | None = key("head_dim", 128, SIZE.or_null())  # null: D / H
    n_positions: int = key("max_position_embeddings", 4096 * 32, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    n_experts: int = key("num_local_experts", 16, SIZE)
    top_k: int = key("num_experts_per_tok", 1, SIZE)
    use_qk_norm: bool = key("use_qk_norm", True, FLAG)
    attention_chunk_size: int | None = key("attention_chunk_size", 8192, WINDOW)
    attn_temperature_tuning: bool = key("attn_temperature_tuning", True, TRUTHY)  # published: 4, read as true
    floor_scale: float = key("floor_scale", 8192, POSITIVE_NUMBER)
    attn_scale: float = key("attn_scale", 0.1, NUMBER)
    rope_theta: float = 500000.0
    model_type: str = "llama4_text"
    layer_types: tuple[str, ...] = key("layer_types", None, LAYERS, read=kinds, rule=kinds, reads=READS, write=written)

    what = "a Llama 4 text model"
    classes = {"llama4_text": "Llama4ForCausalLM"}
    groups = (RopeKeys(),)

    def validate(self) -> None:
        super().validate()
        if self.attention_chunk_size is None and any(k.startswith(CHUNKED) for k in self.layer_types):
            raise UserError("config layer_types names chunked_attention layers, and attention_chunk_size is null")

    @property
    def d_shared(self) -> int:
        return self.n_inner  # Llama4TextMLP(config): intermediate_size, as each expert

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {"Fs": self.n_inner}

    def layer_window(self, layer: int) -> int | None:
        """A chunked layer's keys lie within the chunk of positions up to each query: its cache holds a chunk."""
        return self.layer_chunk(layer)

    def layer_chunk(self, layer: int) -> int | None:
        return self.attention_chunk_size if self.layer_types[layer].startswith(CHUNKED) else None

    def rope(self, layer: int = 0) -> Rope | None:
        return None if NOPE in self.layer_types[layer] else super().rope(layer)


class Llama4Formulas(Qwen3MoeFormulas):
    """Qwen3-MoE's products a kind of layer, and a generation's MACs with the chunked layers' own rule: each query
    the keys of its own chunk (row_chunks.chunked_pairs for a pass; keys_in_chunks for the decode steps)."""

    def generation_macs(
        self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
    ) -> int:
        per_pair = config.n_head * (config.d_head + config.d_value)
        passes = [(0, n_prompt)] if use_cache else [(0, t) for t in range(n_prompt, n_prompt + n_new)]
        total = B * n_new * config.vocab_size * config.n_embd  # each pass's logits of its last position
        for i in range(config.n_layer):
            chunk = config.layer_chunk(i) if windows else None
            weights = self.weight_macs_per_position(config, i)
            for past, T in passes:
                total += B * (T * weights + per_pair * pairs(past, T, chunk))
            if use_cache:  # a decode step at position p: its chunk's p mod C + 1 keys, or all p + 1
                last = n_prompt + n_new - 1
                keys = keys_in_chunks(n_prompt, last, chunk) if chunk else (n_prompt + 1 + last) * (n_new - 1) // 2
                total += B * ((n_new - 1) * weights + per_pair * keys)
        return total


def pairs(past: int, T: int, chunk: int | None) -> int:
    """(query, key) pairs of one head a pass computes: in its chunks, or causal attention in row chunks."""
    if chunk is not None:
        return chunked_pairs(past, T, chunk)
    if T <= ROW_CHUNK:
        return T * (past + T)
    m = T // ROW_CHUNK
    return past * T + ROW_CHUNK * ROW_CHUNK * m * (m + 1) // 2 + (T - m * ROW_CHUNK) * T


# Llama-4-Scout-17B-16E's text_config (meta-llama's config.json as its current revision has it, quoted by ports of it:
# aws-neuron's neuronx-distributed-inference Scout mock config, 10,485,760 positions; a Rust port's test of Scout's
# rotary, llama3 rope factor 16, low and high frequency factors 1 over 8,192 original positions), every other number
# as transformers 4.51.0 printed the first revision's Llama4Config (48 layers, 40 heads of 128, 8 key/value heads,
# D 5,120, experts of 8,192, 16 of them, 1 a token, in every layer, dense MLP 16,384, vocabulary 202,048, NoPE every
# fourth layer, chunks of 8,192, qk norm, temperature tuning 4 (true) at floor 8,192 and scale 0.1, rope_theta 500,000,
# eos 200001/200007/200008, untied).
EOS = (200001, 200007, 200008)
SCOUT = dict(head_dim=128, dense_inner=16384, n_experts=16, top_k=1, bos_token_id=200000, eos_token_id=EOS)
# Llama-4-Maverick-17B-128E's text_config as NVIDIA/TensorRT-LLM's tests/unittest/_torch/modeling/
# test_modeling_llama_min_latency.py quotes it (cut there to 2 layers "from 48" and given no_rope_layer_interval 2 "so
# that both RoPE and no-RoPE layers are present": the published file has neither, so every fourth layer NoPE): 128
# experts, experts every second layer (interleave_moe_layer_step 2), no qk norm, no rope scaling, 1,048,576 positions.
SCOUT_KINDS = tuple(CHUNKED + MOE if (i + 1) % 4 else FULL + NOPE + MOE for i in range(48))
MAVERICK_KINDS = tuple((CHUNKED if (i + 1) % 4 else FULL + NOPE) + (MOE if i % 2 else "") for i in range(48))
MAVERICK = dict(layer_types=MAVERICK_KINDS, n_experts=128, use_qk_norm=False)
LLAMA3_16 = rope_scaling(8192, rope_type="llama3", factor=16.0, low_freq_factor=1.0, high_freq_factor=1.0)


def llama4(name: str, P: int, **more: Any) -> Llama4TextConfig:
    return preset(Llama4TextConfig, name, 48, 40, 8, 5120, 8192, 202048, P, **SCOUT | more)


PRESETS = {
    "llama-4-scout-17b-16e": llama4("llama-4-scout-17b-16e", 10485760, layer_types=SCOUT_KINDS, rope_scaling=LLAMA3_16),
    "llama-4-maverick-17b-128e": llama4("llama-4-maverick-17b-128e", 1048576, **MAVERICK),
}

ATTENTION = GroupedQueryAttention(qk_norm=UNWEIGHTED, qk_norm_flag="use_qk_norm", interleaved=True, temperature=True)
EXPERTS = FusedSwiGLUExperts(module="experts", in_out=True, prescaled=True, combined=("moe.routed_out",))
ROUTER, SHARED_EXPERT = TopKSoftmaxRouter(bias=False, sigmoid=True), SharedExpert(module="shared_expert")
MIXTURE = Mixture(
    ROUTER, EXPERTS, SHARED_EXPERT, note="a MoE layer: k experts of E, their inputs scaled by their gates"
)
MLP = MlpByKind({kind: MIXTURE if kind.endswith(MOE) else DenseMLP() for kind in KINDS})
SYMBOLS = (
    "T positions, t keys, D the stream, H heads of dh, Hkv key/value heads, E experts of F, k a token, Fs the "
    "shared expert's (F), F the dense MLP's (intermediate_size_mlp) in its layers, V the vocabulary"
)
NAMES = ("input_layernorm", "self_attn", "post_attention_layernorm", "feed_forward")
DECODER = Decoder(PreNorm(ATTENTION, MLP, names=NAMES), symbols=SYMBOLS)
ARCHITECTURE = composed(
    "llama4_text", DECODER, Llama4Formulas, reference, config=Llama4TextConfig, presets=PRESETS, label="Llama 4"
)
