"""MiniMax-01 in the table of families (transformers' MiniMaxForCausalLM: MiniMax-Text-01, MiniMax-M1): DeepNorm's
block (parts/blocks.py: the stream normed at each branch, alpha h + beta branch), one for each kind of layer, whose
mixer is lightning attention (parts/lightning.py: linear attention with a fixed decay a head, in blocks over a prompt,
recurrent in a decode step) or Mixtral's grouped-query softmax attention with rotary positions, and whose MLP is
Mixtral's mixture of experts in every layer (a softmax router, its top k renormalised; SwiGLU experts w1, w3, w2). A
batch's pads are masked from the softmax layers' keys and zeroed before the lightning layers' q, k and v.

Its checkpoint is what transformers' save_pretrained writes (Mixtral's expert names): each layer's mixer under
self_attn (a lightning layer's with the decays transformers keeps as buffers), its experts under block_sparse_moe."""

from __future__ import annotations

from ...errors import UserError
from ..mixtral.family import MIXTURE
from ..mixtral.family import SYMBOLS as MIXTRAL_SYMBOLS
from ..mixtral.reference import float64_throughout as mixtral_float64_throughout
from ..parts.attention import GroupedQueryAttention
from ..parts.blocks import ByKind, DeepNorm
from ..parts.decoder import Decoder
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.lightning import LightningAttention, slope_rates
from .config import FULL, LINEAR, PRESETS, MiniMaxConfig

SYMBOLS = MIXTRAL_SYMBOLS + "; a lightning layer's H heads of dh (q, k and v alike), C positions a block, N blocks"


def scales(attention: str) -> tuple[str, str, str, str]:
    """DeepNorm's alpha and beta after a layer's attention (its kind's) and after its experts: the config's fields."""
    return (f"{attention}_alpha_factor", f"{attention}_beta_factor", "mlp_alpha_factor", "mlp_beta_factor")


NAMES = ("input_layernorm", "self_attn", "post_attention_layernorm", "block_sparse_moe")
LIGHTNING = DeepNorm(LightningAttention(), MIXTURE, scales("linear_attn"), names=NAMES)
SOFTMAX = DeepNorm(GroupedQueryAttention(), MIXTURE, scales("full_attn"), names=NAMES)
MINIMAX = Decoder(ByKind({LINEAR: LIGHTNING, FULL: SOFTMAX}), biases="", symbols=SYMBOLS, kind_order=(LINEAR, FULL))


class MiniMaxFormulas(HybridFormulas):
    """Layer by layer lightning attention (a state: its scan, recurrent or in blocks) or softmax attention, each
    followed by the experts."""

    def attention_vs_weights(self, c: MiniMaxConfig) -> tuple[str, str, str]:
        """A softmax layer's decode step at t keys against its products with weights and its experts' (count compares
        one such layer); a lightning layer's scan costs 2 H dh^2 a step whatever t."""
        weights = "2 D H dh + 2 D Hkv dh + D E + 3 k D F"
        return (
            f"4 H dh t FLOPs against 2 ({weights}) for the weights (a softmax layer with its experts)",
            f"2 H dh t / ({weights})",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, "
            f"E = {c.n_experts}, k = {c.top_k}, F = {c.n_inner:,}",
        )


NOTE = (
    "  (transformers' float64 MiniMax computes RMSNorm, the rotary tables, the router's softmax and the lightning "
    "layers'\n  decays in float32; its reference here has them in float64, as families/minimax/family.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """validate's float64 truth: Mixtral's (RMSNorm, the lightning layers' gated norm included, the rotary tables
    and the router's softmax in float64; the experts' eager loop), and the lightning layers' decays, which
    transformers computes in float32 when it makes the model (get_slope_rate, decay_factors: buffers a float64 model
    holds as float32 roundings), made again from float64 slopes."""
    c = model.config
    lightning = c.layer_types.count(LINEAR)
    mixtral_float64_throughout(reference, model, torch, norms=2 * c.n_layer + 1 + lightning)
    layers = [m for m in reference.modules() if type(m).__name__ == "MiniMaxLightningAttention"]
    if len(layers) != lightning:
        raise UserError(f"validate in float64 found {len(layers)} MiniMax lightning layers, not {lightning}")
    for module in layers:
        slopes = torch.from_numpy(slope_rates(c, module.layer_idx))[:, None, None]
        module.slope_rate = slopes
        module.query_decay, module.key_decay, module.diagonal_decay = module.decay_factors(slopes)


RECORD = dict(config=MiniMaxConfig, presets=PRESETS, label="MiniMax-01")
ARCHITECTURE = composed(
    "minimax", MINIMAX, MiniMaxFormulas, float64_reference=float64_throughout, float64_note=NOTE, **RECORD
)
