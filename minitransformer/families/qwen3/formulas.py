"""Qwen3's arithmetic in closed form: the Llama family's (families/llama/formulas.py), whose products it computes
unchanged (q_norm and k_norm are norms: no dot products), with two more gains of dh a layer among the parameters."""

from __future__ import annotations

from ..llama.formulas import attention_vs_weights, products, weight_dot_products_per_position, weight_macs_per_position
from ..llama.formulas import parameters as llama_parameters
from .config import Qwen3Config

__all__ = ["attention_vs_weights", "parameters", "products", "weight_dot_products_per_position",
           "weight_macs_per_position"]  # fmt: skip


def parameters(config: Qwen3Config) -> int:
    """Llama's count (biases on q, k, v and o when attention_bias) + L 2 dh: the q and k norms' gains."""
    return llama_parameters(config) + config.n_layer * 2 * config.d_head
