"""Qwen3.5's arithmetic in closed form, written from its equations alone (nothing here runs the model), held by the
tests to the ledger of real and shape-only runs.

Symbols: D d_model; a full-attention layer's H query heads and Hkv key/value heads of dh; a DeltaNet layer's Hk key
heads of dk and Hv value heads of dv (Gv = Hv / Hk a key head), Dc = 2 Hk dk + Hv dv conv channels of kernel K;
F the MLP width, or in a MoE model E experts of width Fe (k a token) and a shared expert of width Fs; V vocabulary.

A DeltaNet layer's products with weights, per position: D Dc (q, k, v), D Hv dv (z), 2 D Hv (b, a), Dc K (the conv:
each channel a dot product of length K with its kernel) and Hv dv D (out). Its delta rule holds no weights and reads
no past positions: per position and value head, 3 dk dv MACs in the recurrent form (read S^T k, write k (x) delta,
query S^T q), whatever the context; over a prompt of T positions in N = ceil(T / C) chunks of C = min(64, T) (the
last padded), read, query and write cost the same for N C positions, and the chunks add K K^T and Q K^T (Hk N C^2 dk
each), the triangular solve (Hv N (dk + dv) C (C - 1) / 2) and the mix within each chunk (Hv N C^2 dv).
A full-attention layer: D 2 H dh (q and its gate), 2 D Hkv dh (k, v), H dh D (out), and 2 H dh a (query, key) pair.
"""

from __future__ import annotations

from ..architecture import Formulas
from .config import CHUNK, FULL, Qwen35Config


def chunks(T: int) -> tuple[int, int]:
    """(C, N): a prompt of T positions in N chunks of C = min(64, T) positions."""
    C = min(CHUNK, T)
    return C, -(-T // C)


class Qwen35Formulas(Formulas):
    """Layer by layer a Gated DeltaNet (a state: its delta rule, recurrent or in chunks) or full attention, each
    followed by the MLP or the experts."""

    def scan_products(self, c: Qwen35Config, T: int, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, MACs) of each product of one DeltaNet layer's delta rule over T positions: the recurrent form's
        three where T = 1, the chunks' seven where T > 1 (the solve's rows are of lengths 1 .. C - 1)."""
        Hk, Hv, dk, dv = c.linear_key_heads, c.linear_value_heads, c.linear_key_dim, c.linear_value_dim
        if T == 1:
            return {
                "delta.read": (B * Hv * dv, B * Hv * dv * dk),
                "delta.write": (B * Hv * dk * dv, B * Hv * dk * dv),
                "delta.query": (B * Hv * dv, B * Hv * dv * dk),
            }
        C, N = chunks(T)
        n = dk + dv  # the solve's right-hand side: the values and the keys, beta-weighted
        return {
            "delta.kk": (B * Hk * N * C * C, B * Hk * N * C * C * dk),
            "delta.solve": (B * Hv * N * (C - 1) * n, B * Hv * N * n * C * (C - 1) // 2),
            "delta.qk": (B * Hk * N * C * C, B * Hk * N * C * C * dk),
            "delta.read": (B * Hv * N * C * dv, B * Hv * N * C * dv * dk),
            "delta.query": (B * Hv * N * C * dv, B * Hv * N * C * dv * dk),
            "delta.mix": (B * Hv * N * C * dv, B * Hv * N * C * dv * C),
            "delta.write": (B * Hv * N * dk * dv, B * Hv * N * dk * dv * C),
        }

    def attends(self, config: Qwen35Config, layer: int) -> bool:
        """Whether a layer attends to every earlier position (full attention) or keeps a state (Gated DeltaNet)."""
        return config.layer_types[layer] == FULL

    def scan_macs(self, config: Qwen35Config, layer: int, T: int) -> int:
        """MACs of a DeltaNet layer's delta rule over T positions, one sequence (0 in a full-attention layer)."""
        return 0 if self.attends(config, layer) else sum(macs for _, macs in self.scan_products(config, T).values())

    def scan_dot_products(self, config: Qwen35Config, layer: int, T: int) -> int:
        return 0 if self.attends(config, layer) else sum(dots for dots, _ in self.scan_products(config, T).values())

    def scan_recurrent_macs(self, config: Qwen35Config, layer: int, T: int) -> int:
        """The same positions' delta rule in the recurrent form: 3 dk dv a position and value head."""
        c = config
        return 0 if self.attends(c, layer) else 3 * T * c.linear_value_heads * c.linear_key_dim * c.linear_value_dim

    def _mlp(self, c: Qwen35Config) -> tuple[int, int]:
        """(MACs, dot products) per position of the MLP, or of the router, k experts, the shared expert and its gate."""
        D = c.n_embd
        if not c.is_moe:
            F = c.d_ff
            return 3 * D * F, 2 * F + D
        E, k, Fe, Fs = c.experts
        return D * E + k * 3 * D * Fe + 3 * D * Fs + D, E + k * (2 * Fe + D) + 2 * Fs + D + 1

    def _mixer(self, c: Qwen35Config, layer: int) -> tuple[int, int]:
        """(MACs, dot products) per position of a layer's products with weights before its MLP."""
        D = c.n_embd
        if self.attends(c, layer):
            q, kv = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
            return D * 2 * q + 2 * D * kv + q * D, 2 * q + 2 * kv + D
        Dc, Hv, dv, K = c.conv_channels, c.linear_value_heads, c.linear_value_dim, c.linear_kernel
        return D * Dc + D * Hv * dv + 2 * D * Hv + Dc * K + Hv * dv * D, Dc + Hv * dv + 2 * Hv + Dc + D

    def weight_macs_per_position(self, config: Qwen35Config, layer: int = 0) -> int:
        """A DeltaNet layer: D Dc + D Hv dv + 2 D Hv + Dc K + Hv dv D; a full-attention layer: 2 D H dh + 2 D Hkv dh +
        H dh D; then 3 D F (the MLP), or D E + 3 k D Fe + 3 D Fs + D (router, k experts, the shared expert and its gate)."""
        return self._mixer(config, layer)[0] + self._mlp(config)[0]

    def weight_dot_products_per_position(self, config: Qwen35Config, layer: int = 0) -> int:
        """A DeltaNet layer: Dc + Hv dv + 2 Hv + Dc (the conv) + D; a full-attention layer: 2 H dh + 2 Hkv dh + D; then
        2 F + D, or E + k (2 Fe + D) + 2 Fs + D + 1."""
        return self._mixer(config, layer)[1] + self._mlp(config)[1]

    def products(self, config: Qwen35Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each product of one pass, per layer of the kind that has it (a DeltaNet
        layer's, a full-attention layer's, the MLP's or experts'), and the logits. The delta rule's solve has rows of
        lengths 1 .. C - 1: its length here is C, its record's (the dense product's); scan_products has its MACs."""
        c, D = config, config.n_embd
        q, kv, H, dh = c.n_head * c.head_dim, c.n_kv_head * c.head_dim, c.n_head, c.head_dim
        Dc, Hv, dv, K = c.conv_channels, c.linear_value_heads, c.linear_value_dim, c.linear_kernel
        ops = {
            "linear.qkv": (B * T * Dc, D),
            "linear.z": (B * T * Hv * dv, D),
            "linear.b": (B * T * Hv, D),
            "linear.a": (B * T * Hv, D),
            "linear.conv": (B * T * Dc, K),
            "linear.out": (B * T * D, Hv * dv),
            "q": (B * T * 2 * q, D),
            "k": (B * T * kv, D),
            "v": (B * T * kv, D),
            "scores": (B * H * T * t, dh),
            "mix": (B * H * T * dh, t),
            "out": (B * T * D, q),
            "logits": (B * R * c.vocab_size, D),
        }
        lengths = {"delta.read": c.linear_key_dim, "delta.query": c.linear_key_dim, "delta.write": 1}
        if T > 1:
            C, _ = chunks(T)
            lengths = {
                "delta.kk": c.linear_key_dim,
                "delta.solve": C,
                "delta.qk": c.linear_key_dim,
                "delta.read": c.linear_key_dim,
                "delta.query": c.linear_key_dim,
                "delta.mix": C,
                "delta.write": C,
            }
        for op, (dots, _) in self.scan_products(c, T, B).items():
            if op == "delta.solve":  # its record: the dense [C, C] x [C, dk + dv] product's
                C, N = chunks(T)
                dots = B * Hv * N * C * (c.linear_key_dim + dv)
            ops[op] = (dots, lengths[op])
        if not c.is_moe:
            F = c.d_ff
            return ops | {"mlp.gate": (B * T * F, D), "mlp.up": (B * T * F, D), "mlp.down": (B * T * D, F)}
        E, k, Fe, Fs = c.experts
        return ops | {
            "router": (B * T * E, D),
            "expert.gate": (B * T * k * Fe, D),
            "expert.up": (B * T * k * Fe, D),
            "expert.down": (B * T * k * D, Fe),
            "shared.gate": (B * T * Fs, D),
            "shared.up": (B * T * Fs, D),
            "shared.down": (B * T * D, Fs),
            "shared.score": (B * T, D),
        }

    def _parameters(self, c: Qwen35Config, experts: int) -> int:
        D, V, L = c.n_embd, c.vocab_size, c.n_layer
        full = sum(1 for kind in c.layer_types if kind == FULL)
        q, kv, dh = c.n_head * c.head_dim, c.n_kv_head * c.head_dim, c.head_dim
        attention = 2 * q * D + 2 * kv * D + q * D + 2 * dh + (2 * q + 2 * kv + D if c.attention_bias else 0)
        Dc, Hv, dv = c.conv_channels, c.linear_value_heads, c.linear_value_dim
        deltanet = Dc * D + Hv * dv * D + 2 * Hv * D + Dc * c.linear_kernel + 2 * Hv + dv + D * Hv * dv
        if c.is_moe:
            E, _, Fe, Fs = c.experts
            mlp = E * D + experts * 3 * D * Fe + 3 * D * Fs + D
        else:
            mlp = 3 * D * c.d_ff
        head = 0 if c.tie_word_embeddings else V * D
        return V * D + full * attention + (L - full) * deltanet + L * (mlp + 2 * D) + D + head

    def parameters(self, config: Qwen35Config) -> int:
        """V D + the layers' + D [+ V D untied]: each full-attention layer 3 D H dh + 2 D Hkv dh (q and its gate, k, v,
        o; biases where attention_bias) + 2 dh (q_norm, k_norm); each DeltaNet layer Dc D + 2 Hv dv D + 2 Hv D + Dc K +
        2 Hv + dv (in-projections, out, conv, A_log, dt_bias, the gated norm); each layer's MLP 3 D F (or E D + 3 E D Fe +
        3 D Fs + D) and two RMSNorms of D; the final norm D. The multi-token-prediction module of the
        published checkpoints (mtp.) is not part of the model, as in transformers."""
        return self._parameters(config, config.experts[0] if config.is_moe else 0)

    def active_parameters(self, config: Qwen35Config) -> int:
        """The parameters one token's pass reads: k experts of E in each layer, everything else whole."""
        return self._parameters(config, config.experts[1] if config.is_moe else 0)

    def attention_vs_weights(self, c: Qwen35Config) -> tuple[str, str, str]:
        """A full-attention layer's decode step at t keys against its products with weights (count compares one such
        layer); a DeltaNet layer's delta rule costs 3 Hv dk dv a step whatever t."""
        mlp, symbols = (
            ("3 D F", f"F = {c.n_inner:,}")
            if not c.is_moe
            else (
                "D E + 3 k D Fe + 3 D Fs + D",
                f"E = {c.n_experts}, k = {c.top_k}, Fe = {c.moe_inner:,}, Fs = {c.shared_inner:,}",
            )
        )
        return (
            f"4 H dh t FLOPs against 2 (3 D H dh + 2 D Hkv dh + {mlp}) for the weights (a full-attention layer)",
            f"H dh t / (3 D H dh + 2 D Hkv dh + {mlp})",
            f"D = {c.n_embd:,}, H dh = {c.n_head * c.head_dim:,}, Hkv dh = {c.n_kv_head * c.head_dim:,}, {symbols}",
        )


FORMULAS = Qwen35Formulas()
