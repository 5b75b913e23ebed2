"""Falcon-H1 (transformers' FalconH1ForCausalLM): every layer runs a Mamba-2 mixer and grouped-query attention side by
side on one normed input and adds their sum to the stream, then a SwiGLU MLP in the pre-norm block:

    a = RMSNorm(x)
    x = x + m_so Mamba2(m_si a) + m_ao Attention(m_ai a)      the two branches summed, then the residual add
    x = x + m_d (SwiGLU with its gate times m_g)(RMSNorm(x))

with its µP multipliers (each a stage of no product): the embeddings', the logits', each branch's way in and out, the
keys' (before the rotation: the cache keeps them so), the MLP's gate and output, in_proj's output's (ssm_multipliers).
Its mixer's width is mamba_d_ssm, its gated norm optional and maybe first, out_proj's bias projectors_bias's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...engine.kvcache import KeysValues
from ...errors import UserError
from ..bamba import reference
from ..bamba.family import SYMBOLS, BambaConfig, HybridAttentionFormulas
from ..keys import FLAG, NUMBER, SIZE, Key, Refusal, derived, every, false, key, layer_kinds, multipliers
from ..llama.config import preset
from ..mamba2.config import GATE_NORM, GATE_ONLY, NORM_GATE
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import Branch, ParallelMixers, PreNorm
from ..parts.decoder import Decoder, LogitsScale, TokenEmbedding
from ..parts.family import composed
from ..parts.mamba2 import Mamba2Mixer
from ..parts.mlps import GatedMLP
from ..parts.norms import RMSNorm
from ..rotary import YARN_ROPE_TYPES, RopeKeys

HYBRID = "hybrid"  # every layer: transformers' layers_block_type
EVERY_LAYER = every(HYBRID)
NOT_READ = "is not read by transformers' Falcon-H1 (every layer is both mixers); leave it out"
D_SSM = Key("mamba_d_ssm", 1024, SIZE.or_null())


def head_size(hf: dict, values: dict) -> Any:
    """mamba_d_head, or "auto": the mixer's width (mamba_d_ssm, or mamba_expand D where it is null) over its heads."""
    size = hf.get("mamba_d_head", "auto")
    if size not in ("auto", None):
        return size
    inner = values["d_ssm"] if "d_ssm" in values else D_SSM.get(hf)
    return (inner or values["expand"] * values["n_embd"]) // values["ssm_heads"]


@dataclass(frozen=True)
class FalconH1Config(BambaConfig):
    """A Falcon-H1: Bamba's config (its Mamba-2 keys, attention, MLP and norms) with FalconH1Config's defaults, every
    layer both mixers, the mixer's own width and norm, and the µP multipliers."""

    layer_types: tuple[str, ...] = key("layer_types", None, layer_kinds(HYBRID), **derived(EVERY_LAYER))
    ssm_head_dim: int = key("mamba_d_head", None, SIZE, read=head_size, rule=head_size)
    n_positions: int = key("max_position_embeddings", 8192, SIZE)
    partial_rotary_factor: float = 1.0
    d_ssm: int | None = key("mamba_d_ssm", 1024, SIZE.or_null())  # the mixer's width I (None: mamba_expand D)
    rms_norm: bool = key("mamba_rms_norm", False, FLAG)  # the mixer's gated norm, or the gate alone
    norm_before_gate: bool = key("mamba_norm_before_gate", True, FLAG)
    out_proj_bias: bool = key("projectors_bias", False, FLAG, dict_key="projectors_bias")
    embedding_multiplier: float = key("embedding_multiplier", 1.0, NUMBER)
    lm_head_multiplier: float = key("lm_head_multiplier", 1.0, NUMBER)
    mlp_multipliers: tuple[float, ...] = multipliers("mlp_multipliers", 2)  # gate, down
    key_multiplier: float = key("key_multiplier", 1.0, NUMBER)
    attention_in_multiplier: float = key("attention_in_multiplier", 1.0, NUMBER)
    attention_out_multiplier: float = key("attention_out_multiplier", 1.0, NUMBER)
    in_proj_multipliers: tuple[float, ...] = multipliers("ssm_multipliers", 5)  # in_proj's z, x, B, C, dt
    ssm_in_multiplier: float = key("ssm_in_multiplier", 1.0, NUMBER)
    ssm_out_multiplier: float = key("ssm_out_multiplier", 1.0, NUMBER)
    model_type: str = "falcon_h1"

    what = "a Falcon-H1"
    classes = {"falcon_h1": "FalconH1ForCausalLM"}
    groups = (RopeKeys(YARN_ROPE_TYPES),)
    # Read and not refused (transformers' Falcon-H1 computes the same with or without them): attn_layer_indices and
    # mlp_expansion_factor (every layer is both mixers and an MLP of intermediate_size), num_logits_to_keep.
    refusals = (
        Refusal("layer_types", NOT_READ, lambda v, hf: True),
        Refusal("mamba_use_mlp", "=false is not supported: transformers' Falcon-H1 always has the MLP", false),
    )
    dict_last = ("d_head", "d_ff", "d_inner")

    def validate(self) -> None:
        self.check_mixer()
        inner = self.d_ssm or self.expand * self.n_embd
        if inner != self.d_inner:
            heads = f"mamba_n_heads x mamba_d_head ({self.ssm_heads} x {self.ssm_head_dim})"
            width = f"mamba_d_ssm ({inner})"
            raise UserError(f"config {heads} must equal the mixer's width {width}, as transformers requires")

    @property
    def gated_norm(self) -> str:
        return (NORM_GATE if self.norm_before_gate else GATE_NORM) if self.rms_norm else GATE_ONLY

    def layer_cache(self, layer: int) -> KeysValues:
        """Every layer: its attention's keys and values, and beside them its mixer's conv and scan states."""
        return KeysValues(self.n_kv_head, self.d_head, state=self.mixer_state.arrays)


def falcon(name: str, L: int, D: int, H: int, Hkv: int, F: int, V: int, d_ssm: int, Hs: int, Ng: int) -> FalconH1Config:
    mixer = dict(d_ssm=d_ssm, ssm_heads=Hs, ssm_head_dim=128, n_groups=Ng, state_size=256, chunk_size=128)
    return preset(FalconH1Config, name, L, H, Hkv, D, F, V, 262144, head_dim=128, rope_theta=1e11, **mixer)


# Their config.json files were not seen here (the Hub is out of reach); what was, and where from:
# tiiuae/Falcon-H1-7B-Instruct: hidden 3072, 44 layers, 12 heads of 128 over 2, MLP 12288, vocabulary 130,048, untied,
# Mamba 24 heads of 128 (mamba_d_ssm 3072), 1 group, state 256, conv 4, chunk 128, 262,144 positions: an importer's
# fixture (FALCON_H1_7B_HF, a GitHub test of Hugging Face configs' ingestion), a Swift test quoting mlx-community's
# copy of its config.json. tiiuae/Falcon-H1-34B-Instruct: hidden 5120, 72 layers, 20 heads of 128 over 4, Mamba 32
# heads of 128 (mamba_d_ssm 4096), 2 groups, state 256, conv 4, 262,144 positions: a Swift test's "Real Falcon-H1-34B"
# (and transformers' FalconH1 docs' table); MLP 21504: a model registry quoting its config.json; vocabulary 261,120:
# the technical report's "261K", 2^18 - 1024 as the 7B's is 2^17 - 1024 (the registry's 65,024 is Falcon 3's). Not
# seen: the µP multipliers (FalconH1Config's 1.0, gated norm off: no count changes), the 34B's chunk (128),
# rms_norm_eps, the token ids; rope_theta 1e11: the technical report's and the family's files'. 7,585,513,568 and
# 33,642,221,312 parameters: the cards' 7B and 34B.
PRESETS = {
    "falcon-h1-7b": falcon("falcon-h1-7b", 44, 3072, 12, 2, 12288, 130048, 3072, 24, 1),
    "falcon-h1-34b": falcon("falcon-h1-34b", 72, 5120, 20, 4, 21504, 261120, 4096, 32, 2),
}

NORM = RMSNorm(description="RMSNorm gains (the mixer's gated norm's [I] too, where it has one)")
ATTENTION = GroupedQueryAttention(key_scale="key_multiplier")
SSM = Branch(Mamba2Mixer(), "mamba", "ssm", "mixer", into="ssm_in_multiplier", out="ssm_out_multiplier")
ATTN = Branch(ATTENTION, "self_attn", "attn", "attn", into="attention_in_multiplier", out="attention_out_multiplier")
NAMES = ("input_layernorm", "", "pre_ff_layernorm", "feed_forward")
BLOCK = PreNorm(ParallelMixers((SSM, ATTN)), GatedMLP(multipliers="mlp_multipliers"), NORM, NAMES)
EMBEDDING, LOGITS = TokenEmbedding(multiplier="embedding_multiplier"), LogitsScale("lm_head_multiplier")
FALCON_H1 = Decoder(
    BLOCK, NORM, EMBEDDING, final_norm="final_layernorm", after_logits=LOGITS, symbols=SYMBOLS, decode_first=True
)


class FalconH1Formulas(HybridAttentionFormulas):
    """Every layer both mixers: its attention grows with t, its scan does not; both beside one MLP."""

    def mlp_terms(self, c: Any) -> tuple[str, str]:
        sizes = f"I = {c.d_inner:,}, Cv = {c.conv_dim:,}, Hs = {c.ssm_heads}, K = {c.conv_kernel}, F = {c.d_ff:,}"
        return "D (I + Cv + Hs) + Cv K + I D + 3 D F", sizes


ARCHITECTURE = composed(
    "falcon_h1", FALCON_H1, FalconH1Formulas, reference, config=FalconH1Config, presets=PRESETS, label="Falcon-H1"
)
