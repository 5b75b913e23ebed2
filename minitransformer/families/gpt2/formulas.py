"""GPT-2's arithmetic in closed form, written from its equations alone (nothing here runs the model): the
textbook sums analytical calculators use, held by the tests to the ledger of real and shape-only runs.

Symbols (engine/stages.py): D = d_model, H heads of dh = D / H, F the MLP width, V the vocabulary, P the
context, L layers, T positions computed in a pass, t positions attended, R rows of logits, B the batch.
"""

from __future__ import annotations

from ..architecture import Formulas
from .config import GPT2Config


class GPT2Formulas(Formulas):
    def products(self, config: GPT2Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
        D, H, F, V, dh = config.n_embd, config.n_head, config.d_ff, config.vocab_size, config.d_head
        return {
            "qkv": (B * T * 3 * D, D),  # h [T, D] x W_qkv [D, 3D]
            "scores": (B * H * T * t, dh),  # per head Q [T, dh] x K^T [dh, t]
            "mix": (B * H * T * dh, t),  # per head A [T, t] x V [t, dh]
            "out": (B * T * D, D),  # Z [T, D] x W_o [D, D]
            "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
            "mlp.down": (B * T * D, F),  # g [T, F] x W_down [F, D]
            "logits": (B * R * V, D),  # h [R, D] x W_U^T [D, V]
        }

    def weight_macs_per_position(self, config: GPT2Config, layer: int = 0) -> int:
        """MACs of the products with weights, per position and layer: 3 D^2 (qkv) + D^2 (out) + 2 D F (the MLP)."""
        D, F = config.n_embd, config.d_ff
        return 4 * D * D + 2 * D * F

    def weight_dot_products_per_position(self, config: GPT2Config, layer: int = 0) -> int:
        """Dot products of the products with weights, per position and layer: 3 D (qkv) + D (out) + F + D (the
        MLP)."""
        D, F = config.n_embd, config.d_ff
        return 5 * D + F

    def parameters(self, config: GPT2Config) -> int:
        """V D + P D (embeddings) + L (4 D^2 + 2 D F + 9 D + F) + 2 D (final norm) [+ V D for an untied head].

        Per layer: W_qkv 3 D^2 + 3 D, W_o D^2 + D, W_up D F + F, W_down F D + D, two norms 2 x 2 D. With
        F = 4 D that is the familiar 12 L D^2 + 13 L D.
        """
        L, D, F, V, P = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.n_positions
        head = 0 if config.tie_word_embeddings else V * D
        return V * D + P * D + L * (4 * D * D + 2 * D * F + 9 * D + F) + 2 * D + head

    def attention_vs_weights(self, c: GPT2Config) -> tuple[str, str, str]:
        """The per-layer FLOPs of a decode step attending to t keys, the ratio in symbols, and the sizes it needs."""
        D, F = f"D = {c.n_embd:,}", f"F = {c.d_ff:,}"
        six = " = t / 6D" if c.d_ff == 4 * c.n_embd else ""
        return "4 D t FLOPs against 8 D^2 + 4 D F for the weights", f"t / (2D + F){six}", f"{D}, {F}"


FORMULAS = GPT2Formulas()
