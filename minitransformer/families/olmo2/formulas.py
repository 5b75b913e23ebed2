"""OLMo 2's arithmetic in closed form: the Llama family's (families/llama/formulas.py), whose products it computes
unchanged (its norms are not products), with other norms among the parameters."""

from __future__ import annotations

from ..llama.formulas import attention_vs_weights, products, weight_dot_products_per_position, weight_macs_per_position
from ..llama.formulas import parameters as llama_parameters
from .config import Olmo2Config

__all__ = ["attention_vs_weights", "parameters", "products", "weight_dot_products_per_position",
           "weight_macs_per_position"]  # fmt: skip


def parameters(config: Olmo2Config) -> int:
    """Llama's count (biases on q, k, v and o when attention_bias) + L (H dh + Hkv dh): two norms of D a layer as
    Llama's (after the branches, not before), and the q and k norms' gains over the whole projections."""
    return llama_parameters(config) + config.n_layer * (config.n_head + config.n_kv_head) * config.d_head
