"""Mixtral's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Against the Llama family (families/llama/formulas.py): the MLP's three D x F products become a router, D x E, and
k experts' three D x F products per token. Every token's rows are computed by exactly k experts, so the experts'
MACs are T k x 3 D F whichever experts the router chose (and however a count assumes it chose).
"""

from __future__ import annotations

from typing import Any

from ..llama.formulas import LlamaFormulas


class MixtralFormulas(LlamaFormulas):
    """The Llama family's, with the MLP's products, weights and parameters those of the router and the experts."""

    def mlp_products(self, config: Any, T: int, B: int, layer: int = 0) -> dict[str, tuple[int, int]]:
        D, F, E, k = config.n_embd, config.d_ff, config.n_experts, config.top_k
        return {
            "router": (B * T * E, D),  # h [T, D] x W_router [D, E]
            "expert.gate": (B * T * k * F, D),  # each token's h [D] x W1_e [D, F] in each of its k experts
            "expert.up": (B * T * k * F, D),  # ... x W3_e [D, F]
            "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W2_e [F, D] in each of its k experts
        }

    def mlp_weight_macs(self, config: Any, layer: int = 0) -> int:
        """D E (the router) and k x 3 D F (k experts' gated MLPs)."""
        return config.n_embd * config.n_experts + config.top_k * 3 * config.n_embd * config.d_ff

    def mlp_weight_dot_products(self, config: Any, layer: int = 0) -> int:
        """E (the router), k (2 F + D) (k experts' gate, up and down)."""
        return config.n_experts + config.top_k * (2 * config.d_ff + config.n_embd)

    def mlp_parameters(self, config: Any, layer: int = 0, active: bool = False) -> int:
        """The router E x D and E experts of three D x F matrices (k of them, `active`: the experts one token's pass
        reads, as Mistral's "12.9B active" for Mixtral 8x7B counts them, with the embedding and the head whole)."""
        experts = config.top_k if active else config.n_experts
        return config.n_experts * config.n_embd + experts * 3 * config.n_embd * config.d_ff

    def active_parameters(self, config: Any) -> int:
        """The parameters one token's pass reads: everything but the experts the router did not choose, so k experts of
        E a layer: V D + L (2 D H dh + 2 D Hkv dh + E D + 3 k D F + 2 D) + D [+ V D untied]."""
        return self.counted(config, active=True)

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
        return (
            "4 H dh t FLOPs against 4 D (H dh + Hkv dh) + 2 D E + 6 k D F for the weights (k experts of E)",
            "H dh t / (D (H dh + Hkv dh) + D E / 2 + 1.5 k D F)",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.d_head:,}, Hkv dh = {c.n_kv_head * c.d_head:,}, "
            f"E = {c.n_experts}, k = {c.top_k}, F = {c.d_ff:,}",
        )


FORMULAS = MixtralFormulas()
