"""The Qwen3-MoE stage table: Qwen3's attention (families/qwen3/attention.py), then the dense MLP's stages (a dense layer)
or Mixtral's router and experts (a sparse layer: families/mixtral/stages.py), the top k renormalised only under
norm_topk_prob."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...engine.stages import StageTable
from ..llama import stages as llama
from ..mixtral.stages import COMBINE, EXPERTS, ROUTER, SYMBOLS
from ..qwen3.attention import attention_stages

# Under norm_topk_prob false the chosen experts' probabilities are the gates as they are.
ROUTER_UNNORMALISED = tuple(
    replace(s, equation="the k experts of largest p for each token, and their p: the gates (not renormalised)")
    if s.op == "router.topk"
    else s
    for s in ROUTER
    if s.op != "router.renorm"
)
# Mixtral's expert stages under Qwen's names for the experts' matrices (gate_proj, up_proj, down_proj).
NAMES = (("W1_e", "W_gate,e"), ("W3_e", "W_up,e"), ("W2_e", "W_down,e"))


def _qwen_names(text: str) -> str:
    for mixtral, qwen in NAMES:
        text = text.replace(mixtral, qwen)
    return text


QWEN_EXPERTS = tuple(replace(s, equation=_qwen_names(s.equation), reads=_qwen_names(s.reads)) for s in EXPERTS)


@cache
def qwen3_moe_family(
    bias: bool = False, window: bool = False, renormalise: bool = True, dense: bool = True
) -> StageTable:
    """Qwen3's attention, then in each layer either the dense MLP (when the config has dense layers) or the router and
    experts: a block's stages, in the order the pass runs the ones its layer has."""
    mlp = llama.gated_mlp() if dense else ()
    router = ROUTER if renormalise else ROUTER_UNNORMALISED
    block = llama.pre_norm(attention_stages(bias, window), (*mlp, *router, *QWEN_EXPERTS, COMBINE))
    symbols = (
        SYMBOLS + "; F is an expert's width (moe_intermediate_size), and the dense MLP's (intermediate_size) in its "
        "layers"
    )
    return StageTable("qwen3_moe", llama.EMBED, block, llama.FINAL, symbols)


def stages_of(config) -> StageTable:
    """The table of a config: its biases, its window, whether the gates are renormalised, whether it has dense layers."""
    return qwen3_moe_family(
        config.qkv_bias, config.sliding_window is not None, config.norm_topk_prob, bool(config.dense_layers)
    )
