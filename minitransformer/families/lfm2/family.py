"""LFM2 (transformers' Lfm2ForCausalLM): a hybrid of double-gated short convolutions (families/parts/short_conv.py)
and Qwen3's grouped-query attention (q and k RMS-normed per head), each layer's mixer followed by a SwiGLU MLP whose
width LFM2's own rule adjusts; the final norm is `embedding_norm`, the unembedding tied by default."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, replace
from typing import Any

from ...engine.kvcache import KeysValues, State
from ..config import FULL
from ..keys import FLAG, POSITIVE_NUMBER, SIZE, TOKENS, Fixed, Key, Refusal, eps, key, layer_kinds, null
from ..llama.config import LlamaConfig, preset
from ..llama.family import SYMBOLS as LLAMA_SYMBOLS
from ..llama.reference import llama_like, note
from ..parts.attention import PER_HEAD, GroupedQueryAttention
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..parts.short_conv import ShortConv
from ..qwen3moe.config import INDICES
from ..rotary import YARN_ROPE_TYPES, RopeKeys

CONV = "conv"  # a short-conv layer (layer_types), beside full_attention
LAYERS, WIDTHS = layer_kinds(CONV, FULL), ("conv_dim", "conv_dim_out", "block_dim")
FULL_ATTN_IDXS = Key("full_attn_idxs", None, INDICES.or_null())  # older files' spelling of layer_types
INTERMEDIATE, BLOCK_FF_DIM = Key("intermediate_size", MISSING, SIZE), Key("block_ff_dim", None, SIZE.or_null())
TIED, TIE_EMBEDDING = Key("tie_word_embeddings", True, FLAG), Key("tie_embedding", None, FLAG.or_null())


def kinds(hf: dict, values: dict) -> list[str]:
    """Lfm2Config's rule where a file has no layer_types: attention in the layers full_attn_idxs names (every layer
    where it names none), a short conv in the others."""
    idxs = FULL_ATTN_IDXS.get(hf)
    return [FULL if idxs is None or i in idxs else CONV for i in range(values["n_layer"])]


def newer(older: Key, newer: Key) -> dict:
    """A value as Lfm2Config's __post_init__ reads it: the older spelling where the file has it, over the newer."""
    read = lambda hf, values: older.get(hf) if hf.get(older.json) is not None else newer.get(hf)  # noqa: E731
    return {"read": read, "reads": (older, newer)}


def not_hidden(value, hf: dict) -> bool:
    return value != hf.get("hidden_size")


@dataclass(frozen=True)
class Lfm2Config(LlamaConfig):
    """An LFM2: short-conv and attention layers (layer_types), each with a SwiGLU MLP of width d_ff (intermediate_size
    as LFM2's rule adjusts it); no biases but the short conv's (conv_bias), no window."""

    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    n_inner: int = key("intermediate_size", kind=SIZE, **newer(BLOCK_FF_DIM, INTERMEDIATE))
    auto_adjust: bool = key("block_auto_adjust_ff_dim", True, replace(FLAG, shape=True))  # the MLP width's rule
    ffn_multiplier: float = key("block_ffn_dim_multiplier", 1.0, replace(POSITIVE_NUMBER, shape=True))
    multiple_of: int = key("block_multiple_of", 256, SIZE)
    conv_kernel: int = key("conv_L_cache", 3, SIZE)  # L
    conv_bias: bool = key("conv_bias", False, FLAG)
    n_positions: int = key("max_position_embeddings", 128000, SIZE)
    norm_eps: float = eps("norm_eps", 1e-5)
    hidden_act: str = key("hidden_act", Fixed("silu"))
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG, **newer(TIE_EMBEDDING, TIED))
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    rope_theta: float = 1000000.0
    model_type: str = "lfm2"
    layer_types: tuple[str, ...] = key("layer_types", None, LAYERS, rule=kinds, reads=(FULL_ATTN_IDXS,))

    what = "an LFM2"
    classes = {"lfm2": "Lfm2ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)
    refusals = (  # the older keys transformers ignores, where another value would change the model
        Refusal("block_ffn_dim_multiplier", "(null) is not supported: Lfm2Config refuses it", null, show=lambda v: ""),
        *(Refusal(json, "other than hidden_size is not supported", not_hidden) for json in WIDTHS),
        Refusal("use_pos_enc", "is not supported: LFM2's attention always turns q and k", lambda v, hf: v is False),
        Refusal("block_use_swiglu", "is not supported: LFM2's MLP is SwiGLU", lambda v, hf: v is False),
    )

    @property
    def d_ff(self) -> int:
        """The MLP's width, Lfm2MLP's rule: intermediate_size, or where block_auto_adjust_ff_dim 2/3 of it, times
        block_ffn_dim_multiplier, rounded up to a multiple of block_multiple_of (LFM2-1.2B: 12,288 -> 8,192)."""
        if not self.auto_adjust:
            return self.n_inner
        width = int(self.ffn_multiplier * int(2 * self.n_inner / 3))
        return self.multiple_of * -(-width // self.multiple_of)

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return {"L": self.conv_kernel}

    def layer_cache(self, layer: int) -> KeysValues | State:
        """An attention layer keeps its keys and values; a conv layer the last L - 1 values of u = B * x, [L - 1, D]."""
        if self.layer_types[layer].startswith(CONV):
            return State((("conv", (self.conv_kernel - 1, self.n_embd)),))
        return super().layer_cache(layer)


# LiquidAI/LFM2-1.2B's config.json, the official file out of reach here, as copies quote it (the fine-tunes'
# hbpkillerX/lfm2-sft-model and saranshagarwal2020/p-vector; FastFlowLM/LFM2-1.2B-NPU2 for the older keys): 16 layers
# of 2048, 32 heads sharing 8 key/value heads (of 64), attention in layers 2, 5, 8, 10, 12, 14 (full_attn_idxs), the
# others a short conv of kernel 3 without biases, block_ff_dim 12288 auto-adjusted (x 1.0, multiple of 256) to 8192,
# vocabulary 65536, 128,000 positions, rope_theta 1,000,000, norm_eps 1e-5, tied, bos 1, eos 7.
ONE_B = dict(layer_types=tuple(FULL if i in (2, 5, 8, 10, 12, 14) else CONV for i in range(16)), eos_token_id=7)
PRESETS = {"lfm2-1.2b": preset(Lfm2Config, "lfm2-1.2b", 16, 32, 8, 2048, 12288, 65536, 128000, **ONE_B)}

MLP = GatedMLP(names=("w1", "w3", "w2"))
ATTENTION = GroupedQueryAttention(qk_norm=PER_HEAD, names=("out_proj", "q_layernorm", "k_layernorm"))
NORM = RMSNorm(description="RMSNorm gains (q_layernorm and k_layernorm included)")
SYMBOLS = LLAMA_SYMBOLS + "; L the short conv's kernel (L - 1 values of u kept)"


def block(mixer: Any, name: str, mlp: Any = MLP) -> PreNorm:
    """A layer of LFM2's: x + mixer(RMSNorm(x)), then x + mlp(RMSNorm(x)), under its checkpoint's names."""
    return PreNorm(mixer, mlp, NORM, ("operator_norm", name, "ffn_norm", "feed_forward"))


BLOCKS = ByKind({CONV: block(ShortConv(), "conv"), FULL: block(ATTENTION, "self_attn")})
LFM2 = Decoder(BLOCKS, NORM, final_norm="embedding_norm", symbols=SYMBOLS, kind_order=(CONV, FULL))


class Lfm2Formulas(HybridFormulas):
    """Short-conv layers and attention layers, each with the MLP (or the experts: LFM2-MoE's)."""

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """An attention layer's decode step at t keys against its products with weights (its attention's and MLP's)."""
        block = self.decoder.block.blocks[FULL]
        return block.mixer.attention_vs_weights(c, block.mlp)


def norms(c: Lfm2Config) -> int:
    """Its RMSNorms, for the float64 reference: two a layer, two more (q and k) in each attention layer, the final."""
    return 2 * c.n_layer + 2 * sum(not kind.startswith(CONV) for kind in c.layer_types) + 1


REFERENCE = llama_like(note("LFM2"), norms=norms)
ARCHITECTURE = composed("lfm2", LFM2, Lfm2Formulas, REFERENCE, config=Lfm2Config, presets=PRESETS, label="LFM2")
