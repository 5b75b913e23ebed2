"""The Phi-3 family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against the Llama family (families/llama/formulas.py): the same multiply-accumulates, in fewer products. q, k and v
are one product of H dh + 2 Hkv dh columns, the MLP's gate and up one of 2F columns; attention is the same, a
sliding window W capping the keys a pass attends to at W + T - 1; there are no biases.
"""

from __future__ import annotations

from ..llama.formulas import LlamaFormulas
from .config import Phi3Config


class Phi3Formulas(LlamaFormulas):
    def attention_products(
        self, config: Phi3Config, T: int, t: int, B: int, window: int | None
    ) -> dict[str, tuple[int, int]]:
        """The Llama family's attention with q, k and v in one product: (H + 2 Hkv) dh dot products a position."""
        llama = super().attention_products(config, T, t, B, window)
        D, H, Hkv, dh = config.n_embd, config.n_head, config.n_kv_head, config.d_head
        return {"qkv": (B * T * (H + 2 * Hkv) * dh, D)} | {op: llama[op] for op in ("scores", "mix", "out")}

    def mlp_products(self, config: Phi3Config, T: int, B: int, layer: int = 0) -> dict[str, tuple[int, int]]:
        """The gated MLP with gate and up in one product of 2F columns."""
        D, F = config.n_embd, config.d_ff
        return {"mlp.gate_up": (B * T * 2 * F, D), "mlp.down": (B * T * D, F)}  # h [T, D] x W_gate_up [D, 2F]

    def attention_parameters(self, config: Phi3Config) -> int:
        """W_qkv [(H dh + 2 Hkv dh), D] and W_o [D, H dh]: no biases."""
        D, q, kv = config.n_embd, config.n_head * config.d_head, config.n_kv_head * config.d_head
        return (q + 2 * kv) * D + D * q


FORMULAS = Phi3Formulas()
