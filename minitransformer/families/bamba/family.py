"""Bamba (transformers' BambaForCausalLM): Nemotron-H's two mixers in the Llama family's pre-norm block. Each layer is
x + Mixer(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)); the mixer is the Mamba-2 mixer (families/parts/mamba2.py, its conv
and scan states in the cache) or, in the layers attn_layer_indices names, grouped-query attention turning the first
half of each head (partial_rotary_factor 0.5), its keys and values in the cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...engine.kvcache import KeysValues, State
from ...errors import UserError
from ..config import ModelConfig, check_multiple
from ..keys import (
    ACTIVATION,
    FLAG,
    INDICES,
    LAYER_COUNT,
    POSITIVE,
    SIZE,
    TOKENS,
    TRUTHY,
    Key,
    Refusal,
    eps,
    key,
    layer_kinds,
    unread,
)
from ..mamba2.config import MixerShapes, time_step_limit
from ..mamba2.family import SYMBOLS as MAMBA2_SYMBOLS
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mamba2 import Mamba2Mixer
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys
from . import reference

MAMBA, FULL = "mamba", "full_attention"  # the kinds of layer, as Nemotron-H names them
LAYERS = layer_kinds(MAMBA, FULL)
ATTENTION_LAYERS = Key("attn_layer_indices", None, INDICES.or_null())
NOT_READ = "is not read by transformers' Bamba (a property there, from attn_layer_indices): give attn_layer_indices"


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's kind: attention in the layers attn_layer_indices names, Mamba-2 in the others (all of them where
    it names none), as BambaConfig.layers_block_type makes them."""
    attention = ATTENTION_LAYERS.get(hf) or ()
    return [FULL if i in attention else MAMBA for i in range(values["n_layer"])]


def written(c: BambaConfig) -> dict:
    return {"attn_layer_indices": [i for i, kind in enumerate(c.layer_types) if kind == FULL]}


def head_size(hf: dict, values: dict) -> Any:
    """mamba_d_head, or "auto" (transformers' default): the mixer's width over its heads, mamba_expand D / Hs."""
    size = hf.get("mamba_d_head", "auto")
    return values["expand"] * values["n_embd"] // values["ssm_heads"] if size in ("auto", None) else size


def other_rotary(dims, hf: dict) -> bool:
    """attn_rotary_emb (older files) other than the numbers transformers turns: half of each head."""
    heads, width = hf.get("num_attention_heads", 32), hf.get("hidden_size", 4096)
    return dims != (hf.get("head_dim") or width // heads) // 2


@dataclass(frozen=True)
class BambaConfig(MixerShapes, ModelConfig):
    """A Bamba: n_layer pre-norm blocks, each a Mamba-2 mixer or attention (layer_types, from attn_layer_indices) and
    a SwiGLU MLP of n_inner."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    layer_types: tuple[str, ...] = key(
        "attn_layer_indices", None, LAYERS, read=kinds, rule=kinds, reads=(ATTENTION_LAYERS,), write=written
    )
    n_embd: int = key("hidden_size", 4096, SIZE)
    vocab_size: int = key("vocab_size", 128000, SIZE)
    n_head: int = key("num_attention_heads", 32, SIZE)
    n_kv_head: int = key("num_key_value_heads", 8, SIZE.or_null(), follows="n_head")
    head_dim: int | None = key("head_dim", None, SIZE.or_null())  # None: D / H
    n_inner: int = key("intermediate_size", 14336, SIZE)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)  # the MLP's and the conv's
    expand: int = key("mamba_expand", 2, SIZE)
    ssm_heads: int = key("mamba_n_heads", 128, SIZE)
    ssm_head_dim: int = key("mamba_d_head", None, SIZE, read=head_size, rule=head_size)
    state_size: int = key("mamba_d_state", 256, SIZE)
    n_groups: int = key("mamba_n_groups", 1, SIZE)
    conv_kernel: int = key("mamba_d_conv", 4, SIZE)
    chunk_size: int = key("mamba_chunk_size", 256, POSITIVE)
    use_bias: bool = key("mamba_proj_bias", False, FLAG)  # in_proj's and out_proj's
    use_conv_bias: bool = key("mamba_conv_bias", True, TRUTHY)
    time_step_limit: tuple[float, float] = time_step_limit()
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    mlp_bias: bool = key("mlp_bias", False, FLAG)
    norm_eps: float = eps("rms_norm_eps", 1e-5)
    n_positions: int = key("max_position_embeddings", 262144, SIZE)
    partial_rotary_factor: float = 0.5
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    sliding_window: None = None
    bos_token_id: int | None = key("bos_token_id", 1, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "bamba"

    what = "a Bamba"
    classes = {"bamba": "BambaForCausalLM"}
    # the rope's own share wins; a top-level partial_rotary_factor is not read (BambaConfig sets 0.5 over it)
    groups = (RopeKeys(YARN_ROPE_TYPES, refused=(), share=("partial_rotary_factor", "", 0.5)),)
    # Read and not refused, since transformers' Bamba computes the same with or without them: z_loss_coefficient
    # (training), use_mamba_kernels, mamba_dt_rank and num_logits_to_keep.
    refusals: ClassVar[tuple[Refusal, ...]] = (
        *unread(NOT_READ, "layer_types", "layers_block_type"),
        Refusal("attn_rotary_emb", "is not supported: transformers' Bamba turns half of each head", other_rotary),
    )
    dict_last = ("d_head", "d_ff", "d_inner")

    def validate(self) -> None:
        self.check_mixer()
        check_multiple(self, "n_head", "n_kv_head")
        if self.expand * self.n_embd != self.d_inner:
            expand = f"mamba_expand x hidden_size ({self.expand} x {self.n_embd})"
            heads = f"mamba_n_heads x mamba_d_head ({self.ssm_heads} x {self.ssm_head_dim})"
            raise UserError(f"config {expand} must equal {heads}, as transformers requires")

    @property
    def ssm_act(self) -> str:  # type: ignore[override]
        return self.hidden_act

    def rope(self, layer: int) -> Rope | None:
        """An attention layer turns the first int(dh x partial_rotary_factor) numbers of each head; a Mamba layer has
        no positions."""
        if self.layer_types[layer] == MAMBA:  # (Falcon-H1's hybrid layers attend too)
            return None
        return Rope(int(self.d_head * self.partial_rotary_factor), self.rope_theta, self.rope_scaling, self.n_positions)

    def layer_cache(self, layer: int) -> KeysValues | State:
        """A Mamba layer keeps its conv and scan states, an attention layer its keys and values."""
        return self.mixer_state if self.layer_types[layer] == MAMBA else KeysValues(self.n_kv_head, self.d_head)


# ibm-fms/Bamba-9B (now ibm-ai-platform/Bamba-9B), its config.json (huggingface.co/ibm-fms/Bamba-9B/blame/43f21514/
# config.json, whole, and ibm-fms/Bamba-9B-1.8T's alike): 32 layers, attention in layers 9, 18 and 27, hidden 4096, 32
# heads of 128 over 8 key/value heads (attn_rotary_emb 64: half of each head turned), MLP 14336, 128 Mamba heads of 64
# (expand 2), 1 group, state 128, conv 4, chunk 256, conv bias, no projection biases, vocabulary 128256, untied,
# rms_norm_eps 1e-5, bos 128000, eos 128001; max_position_embeddings and rope_theta are BambaConfig's (it has none).
NINE_B: dict[str, Any] = dict(ssm_head_dim=64, state_size=128, vocab_size=128256, bos_token_id=128000)
NINE_B_KINDS = tuple(FULL if i in (9, 18, 27) else MAMBA for i in range(32))
PRESETS = {"bamba-9b": BambaConfig(layer_types=NINE_B_KINDS, **NINE_B, eos_token_id=128001, name="bamba-9b")}

NORM = RMSNorm(description="RMSNorm gains (the Mamba layers' gated norm's [I] too)")
MLP = GatedMLP()
SYMBOLS = (
    MAMBA2_SYMBOLS + "; attention: H query heads of dh over Hkv key/value heads (G = H/Hkv), t attended; F the MLP"
)


def block(mixer: Any, name: str) -> PreNorm:
    return PreNorm(mixer, MLP, NORM, ("input_layernorm", name, "pre_ff_layernorm", "feed_forward"))


BLOCKS = ByKind({MAMBA: block(Mamba2Mixer(), "mamba"), FULL: block(GroupedQueryAttention(), "self_attn")})
BAMBA = Decoder(
    BLOCKS, NORM, final_norm="final_layernorm", symbols=SYMBOLS, kind_order=(MAMBA, FULL), decode_first=True
)


class HybridAttentionFormulas(HybridFormulas):
    """A Mamba-2 mixer or attention a layer (Bamba's, Granite 4.0-H's): a generation summed pass by pass (every Mamba
    layer's prefill in chunks), count's notes the scan's beside the attention layers' keys and values."""

    sums_generation = True

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """An attention layer's scores and mix against its products with weights, in a decode step at t keys."""
        mlp, sizes = self.mlp_terms(c)
        weights = f"2 D H dh + 2 D Hkv dh + {mlp}"
        said = f"2 (2 H dh t) FLOPs against 2 ({weights}) for the weights (an attention layer)"
        shapes = f"D = {c.n_embd:,}, H = {c.n_head}, Hkv = {c.n_kv_head}, dh = {c.d_head}, {sizes}"
        return said, f"2 H dh t / ({weights})", shapes

    def mlp_terms(self, c: Any) -> tuple[str, str]:
        return "3 D F", f"F = {c.d_ff:,}"

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        layers = sum(kind != FULL for kind in config.layer_types)
        attends = any(isinstance(config.layer_cache(i), KeysValues) for i in range(config.n_layer))
        kv = 2 * config.n_kv_head * config.d_head if attends else 0
        return Mamba2Mixer().scan_notes(config, layers, n_prompt, n_new, kv) if layers else []


ARCHITECTURE = composed(
    "bamba", BAMBA, HybridAttentionFormulas, reference, config=BambaConfig, presets=PRESETS, label="Bamba"
)
