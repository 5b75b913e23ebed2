"""Kimi Linear in the table of families (transformers' KimiLinearForCausalLM): the pre-norm block, one for each kind of
layer, whose mixer is Kimi Delta Attention (families/parts/kda.py: the gated delta rule with a decay a key channel,
from a low-rank gate) or DeepSeek-V3's multi-head latent attention without rotary positions (parts/latent.py, NoPE),
followed by a SwiGLU MLP (the first layers) or DeepSeek-V3's experts (parts/moe.py: the group-limited sigmoid router,
routed and shared experts). A batch's pads are masked from the MLA layers' keys and zeroed before the KDA layers'.

Its checkpoint, as the published one and transformers' save_pretrained name it: each layer's mixer under self_attn;
its MLP under block_sparse_moe (the published file's dense first layer under mlp, read as the same), its experts'
w1 (gate), w2 (down) and w3 (up), the router gate [E, D] and its correction bias (a buffer)."""

from __future__ import annotations

from dataclasses import replace

from ..deepseek_v3.family import EXPERTS, ROUTER, DenseMLP
from ..parts.blocks import ByKind, PreNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.kda import KimiDeltaAttention
from ..parts.latent import LatentAttention
from ..parts.moe import Mixture, SharedExpert
from . import reference
from .config import DENSE_MLP, FULL, LINEAR, PRESETS, KimiLinearConfig

SYMBOLS = (
    "T new positions, t attended, D d_model; an MLA layer's H heads, dh = dn + dr query/key head size (dr the key "
    "part shared by the heads), dv value head size, dc latent (kv_lora_rank); a KDA layer's Hk = Hv heads of dk "
    "(its keys, queries and values alike: dv = dk there, Gv = 1), Dc = 3 Hv dk conv channels of kernel Kc (Ks = Kc "
    "- 1 kept), C positions a chunk, N chunks; F dense MLP width, E routed experts, k a token, Te tokens routed to "
    "expert e, Fe expert width, Fs shared experts' width, V vocabulary, R logit rows"
)
# Mixtral's names for each expert's matrices (w1 gate, w2 down, w3 up), DeepSeek-V3's experts otherwise.
KIMI_EXPERTS = replace(EXPERTS, names=(("w1", "gate"), ("w2", "down"), ("w3", "up")))
MOE = Mixture(ROUTER, KIMI_EXPERTS, SharedExpert())
KDA, MLA = KimiDeltaAttention(), LatentAttention()
NAMES = ("input_layernorm", "self_attn", "post_attention_layernorm", "block_sparse_moe")
BLOCKS = {
    LINEAR + DENSE_MLP: PreNorm(KDA, DenseMLP(), names=NAMES),
    LINEAR: PreNorm(KDA, MOE, names=NAMES),
    FULL + DENSE_MLP: PreNorm(MLA, DenseMLP(), names=NAMES),
    FULL: PreNorm(MLA, MOE, names=NAMES),
}
RENAMED = ((r"^(layers\.\d+)\.mlp\.", r"\1.block_sparse_moe."),)  # the published dense layer's name
KIMI_LINEAR = Decoder(ByKind(BLOCKS), biases="", symbols=SYMBOLS, kind_order=tuple(BLOCKS), renamed=RENAMED)


class KimiLinearFormulas(HybridFormulas):
    """Layer by layer KDA (a state: its delta rule, recurrent or in chunks) or NoPE MLA, each followed by the dense MLP
    or the experts."""

    def attention_vs_weights(self, c: KimiLinearConfig) -> tuple[str, str, str]:
        """An MLA layer's decode step at t keys against its products with weights and its experts' (count compares one
        such layer); a KDA layer's delta rule costs 3 Hv dk^2 a step whatever t."""
        q = "D H dh" if c.q_lora_rank is None else "D dq + dq H dh"
        weights = f"{q} + D (dc + dr) + dc H (dn + dv) + H dv D + D E + 3 k D Fe + 3 D Fs"
        return (
            f"2 H (dh + dv) t FLOPs against 2 ({weights}) for the weights (an MLA layer with experts)",
            f"H (dh + dv) t / ({weights})",
            f"D = {c.n_embd:,}, H = {c.n_head}, dh = {c.d_head}, dv = {c.v_head_dim}, dq = {c.q_lora_rank}, "
            f"dc = {c.kv_lora_rank}, dr = {c.qk_rope_head_dim}, dn = {c.qk_nope_head_dim}, E = {c.n_experts}, "
            f"k = {c.top_k}, Fe = {c.moe_inner:,}, Fs = {c.d_shared:,}",
        )


# Its variant: an MLA layer with the dense MLP and q through its bottleneck, which the preset has not.
A3B = PRESETS["kimi-linear-48b-a3b"]
VARIANT = replace(A3B, q_lora_rank=768, layer_types=(FULL + DENSE_MLP, *A3B.layer_types[1:]))
RECORD = dict(config=KimiLinearConfig, presets=PRESETS, label="Kimi Linear", variants=(VARIANT,))
ARCHITECTURE = composed("kimi_linear", KIMI_LINEAR, KimiLinearFormulas, reference, **RECORD)
