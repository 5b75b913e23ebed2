"""gpt-oss's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against Mixtral (families/mixtral/formulas.py): each expert's gate and up are one product of width 2F (the same
2F dot products of length D per token), the sinks and the biases are additions (no dot products), and the window
is each layer's own (sliding layers alternate with full ones). Parameters: biases on q, k, v, o, the router and
the experts, and H sink logits a layer.
"""

from __future__ import annotations

from ..mixtral.formulas import MixtralFormulas
from .config import GptOssConfig


class GptOssFormulas(MixtralFormulas):
    def products(
        self, config: GptOssConfig, T: int, t: int, R: int = 1, B: int = 1, layer: int = 0
    ) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops: those of
        layer `layer`, whose window they read; the sink is a column added after the scores: no dot product)."""
        logits = {"logits": (B * R * config.vocab_size, config.n_embd)}
        attention = self.attention_products(config, T, t, B, config.layer_window(layer))
        return attention | self.mlp_products(config, T, B) | logits

    def mlp_products(self, config: GptOssConfig, T: int, B: int, layer: int = 0) -> dict[str, tuple[int, int]]:
        D, F, E, k = config.n_embd, config.d_ff, config.n_experts, config.top_k
        return {
            "router": (B * T * E, D),  # h [T, D] x W_router [D, E]
            "expert.gate_up": (B * T * k * 2 * F, D),  # each token's h [D] x W_gu_e [D, 2F] in each of its k experts
            "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W_down_e [F, D] in each of its k experts
        }

    def attention_parameters(self, config: GptOssConfig) -> int:
        """The Llama family's, with biases (attention_bias), and H sink logits."""
        return super().attention_parameters(config) + config.n_head

    def mlp_parameters(self, config: GptOssConfig, layer: int = 0, active: bool = False) -> int:
        """The router E x D and its E biases, E experts (k of them, `active`) of W_gu [D, 2F], W_down [F, D] and their
        biases."""
        D, F, E = config.n_embd, config.d_ff, config.n_experts
        experts = config.top_k if active else E
        return E * D + E + experts * (3 * D * F + 2 * F + D)


FORMULAS = GptOssFormulas()
