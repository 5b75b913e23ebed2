"""The Qwen3-MoE stage table: Qwen3's attention (families/qwen3/stages.py), then the dense MLP's stages (a dense layer)
or Mixtral's router and experts (a sparse layer: families/mixtral/stages.py), the top k renormalised only under
norm_topk_prob."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...engine.stages import Family
from ..mixtral.stages import COMBINE, EXPERTS, LLAMA_MLP, ROUTER
from ..qwen3.stages import qwen3_family

# Under norm_topk_prob false the chosen experts' probabilities are the gates as they are.
ROUTER_UNNORMALISED = tuple(
    replace(s, equation="the k experts of largest p for each token, and their p: the gates (not renormalised)")
    if s.op == "router.topk" else s
    for s in ROUTER if s.op != "router.renorm"
)  # fmt: skip
# Mixtral's expert stages under Qwen's names for the experts' matrices (gate_proj, up_proj, down_proj).
NAMES = (("W1_e", "W_gate,e"), ("W3_e", "W_up,e"), ("W2_e", "W_down,e"))


def _qwen_names(text: str) -> str:
    for mixtral, qwen in NAMES:
        text = text.replace(mixtral, qwen)
    return text


QWEN_EXPERTS = tuple(replace(s, equation=_qwen_names(s.equation), reads=_qwen_names(s.reads)) for s in EXPERTS)


@cache
def qwen3_moe_family(bias: bool = False, window: bool = False, renormalise: bool = True, dense: bool = True) -> Family:
    """Qwen3's attention, then in each layer either the dense MLP (when the config has dense layers) or the router and
    experts: a block's stages, in the order the pass runs the ones its layer has."""
    qwen3 = qwen3_family(bias, window)
    attention = tuple(s for s in qwen3.block if s.op not in (*LLAMA_MLP, "resid_post"))
    mlp = tuple(qwen3.stages[op] for op in LLAMA_MLP) if dense else ()
    router = ROUTER if renormalise else ROUTER_UNNORMALISED
    block = (*attention, *mlp, *router, *QWEN_EXPERTS, COMBINE, qwen3.stages["resid_post"])
    symbols = (
        qwen3.symbols + ", E experts, k experts per token, Te tokens routed to expert e (T k over all E); "
        "F is an expert's width (moe_intermediate_size), and the dense MLP's (intermediate_size) in its layers"
    )
    return Family("qwen3_moe", qwen3.embed, block, qwen3.final, symbols)


def stages_of(config) -> Family:
    """The table of a config: its biases, its window, whether the gates are renormalised, whether it has dense layers."""
    return qwen3_moe_family(config.qkv_bias, config.sliding_window is not None, config.norm_topk_prob,
                            bool(config.dense_layers))  # fmt: skip
