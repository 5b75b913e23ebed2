"""DeepSeek-V3 in the table of families (transformers' DeepseekV3ForCausalLM): the Llama family's pre-RMSNorm block
with multi-head latent attention (families/parts/latent.py) in place of grouped-query attention, and, after the first
first_k_dense_replace layers (a gated MLP), a mixture of experts (families/parts/moe.py) in place of the MLP:
- the group-limited router: scores s = sigmoid(h W_router); the choice adds the correction bias b (s + b, only to
  choose), keeps the topk_group of n_group groups whose two best s + b sum highest, then the k best s + b in them;
  each chosen expert's gate is its s (unbiased), divided by their sum where norm_topk_prob, x routed_scaling_factor;
- the routed experts, each a SwiGLU of width Fe on its tokens (as Mixtral's), and the shared experts, one SwiGLU of
  width Fs = n_shared_experts Fe on every token, added.

Its checkpoint (as transformers 5 writes it with save_pretrained, and as DeepSeek's own checkpoints name them): the
Llama family's names for the embedding, the norms and the dense MLPs; MLA's; in each layer past the dense ones
mlp.gate (the router [E, D] and its e_score_correction_bias [E], a buffer transformers does not count among the
parameters), E experts of three nn.Linear weights and the shared experts' three."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..parts.blocks import PreNorm
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.latent import LatentAttention
from ..parts.mlps import OneKindGatedMLP
from ..parts.moe import GroupLimitedRouter, Mixture, MlpByKind, SharedExpert, SwiGLUExperts
from ..parts.mtp import MultiTokenPrediction
from ..parts.part import Products
from . import reference
from .config import PRESETS, RUNNABLE_ROPE_TYPES, DeepseekConfig

# DeepSeek-V3's checkpoint keeps its multi-token-prediction module as a 62nd layer (layers.61), which transformers
# skips on loading the main model (DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected), as does this loader;
# the MTP layers (layers.{n_layer + k}) are read beside it, as transformers' MtpModel reads them (parts/mtp.py).
IGNORED = r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq|layers\.61\..*"
SYMBOLS = (
    "T new positions, t attended, D d_model, H heads, dh = dn + dr query/key head size (dn without "
    "position, dr rotary), dv value head size, dq query rank, dc latent (kv_lora_rank), F dense MLP width, "
    "E routed experts, k a token, Te tokens routed to expert e, Fe expert width, Fs shared experts' width, "
    "V vocabulary, R logit rows"
)


@dataclass(frozen=True)
class DenseMLP(OneKindGatedMLP):
    """The first layers' gated MLP, its three matrices one kind."""

    kinds = {"mlp": "dense layers' MLP weights W_gate, W_up [F, D], W_down [D, F]"}


EXPERTS = SwiGLUExperts(
    symbols=("W1_e", "W3_e", "W2_e"),
    width="moe_inner",
    F="Fe",
    combined=("moe.routed_out",),
    described=(
        "routed experts' gate weights [Fe, D], E a layer",
        "routed experts' up weights [Fe, D], E a layer",
        "routed experts' down weights [D, Fe], E a layer",
    ),
)
ROUTER = GroupLimitedRouter()
MLP = MlpByKind({"dense": DenseMLP(), "moe": Mixture(ROUTER, EXPERTS, SharedExpert())})
ATTENTION = LatentAttention(runnable=RUNNABLE_ROPE_TYPES)
BLOCK = PreNorm(ATTENTION, MLP)


def mtp_config(config: Any) -> Any:
    """The config as its MTP layers see it, appended after the main model's layers: each with experts (transformers'
    get_mtp_config sets first_k_dense_replace to 0), whatever the main model's first dense layers (DeepSeek-V3's and
    GLM-4.5's)."""
    return replace(
        config, n_layer=config.n_layer + config.n_mtp, first_k_dense=min(config.first_k_dense, config.n_layer)
    )


MTP = MultiTokenPrediction(BLOCK, mtp_config)
DECODER = Decoder(BLOCK, biases="", ignored=IGNORED, symbols=SYMBOLS, kind_order=("dense", "moe"), mtp=MTP)


class DeepseekFormulas(DecoderFormulas):
    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1, layer: int | None = None) -> Products:
        """The products of one layer: `layer`, or by default the last (a layer with experts, where there are any); and
        the logits'."""
        return self.decoder.products(config, T, t, B, config.n_layer - 1 if layer is None else layer, R)


# Its variant: q in one product (q_lora_rank None), whose stages no preset has.
ARCHITECTURE = composed(
    "deepseek_v3",
    DECODER,
    DeepseekFormulas,
    config=DeepseekConfig,
    presets=PRESETS,
    label="DeepSeek-V3",
    reference=reference,
    variants=(replace(PRESETS["deepseek-v3"], q_lora_rank=None),),
)
