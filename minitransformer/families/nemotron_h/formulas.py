"""Nemotron-H's arithmetic in closed form, written from its equations (forward.py), kind of layer by kind of layer,
held by the tests to the ledger of real and shape-only runs.

Symbols: D d_model; a Mamba layer's as families/mamba2/formulas.py says (Hs heads of P, N, Ng, I, Cv, K, chunks of
L); attention: H query heads of dh over Hkv key/value heads; F the MLP's width; E experts of width Fe, k a token,
reading and writing Dl (moe_latent_size, or D), a shared expert of Fs; V vocabulary. Per position, a layer's products
with weights:
- mamba: D (I + Cv + Hs) + Cv K + I D, and its scan (2 Hs P N in a decode step; in chunks for a prompt);
- full_attention: D H dh + 2 D Hkv dh + H dh D, and 2 H dh for each (query, key) pair its scores are computed for
  (every pair in a decode step; in chunks of 128 query rows, each against the keys it can see, for a longer pass);
- mlp: 2 D F;
- moe: D E (the router) + k 2 Dl Fe (its k experts) + 2 D Fs (the shared expert), + 2 D Dl with a latent.
"""

from __future__ import annotations

from ...engine.row_chunks import ROW_CHUNK
from ..architecture import Formulas
from ..mamba2.formulas import (
    mixer_parameters,
    mixer_products,
    mixer_scan_dot_products,
    mixer_scan_macs,
    mixer_state_numbers,
    mixer_weight_dot_products_per_position,
    mixer_weight_macs_per_position,
    product,
    recurrent_scan_macs,
    scan_macs_at,
    scan_notes,
)
from .config import NemotronHConfig

__all__ = ["mixer_state_numbers", "recurrent_scan_macs"]


def attention_pairs(T: int, t: int) -> int:
    """(query, key) pairs per head whose scores a pass computes: all T t up to 128 new positions; beyond, in chunks
    of C = 128 query rows, each against the keys up to its last row: p T + C² m (m + 1) / 2 + (T - m C) T with m = T
    // C full chunks after p = t - T earlier positions (verbs/formulas.py's computed_pairs, without a window)."""
    C, past = ROW_CHUNK, t - T
    if T <= C:
        return T * t
    m = T // C
    return past * T + C * C * m * (m + 1) // 2 + (T - m * C) * T


def kind_products(c: NemotronHConfig, kind: str, T: int, t: int, B: int = 1) -> list[tuple[str, int, int]]:
    """(op, dot products, MACs) of one layer of `kind`'s products in a pass of T positions at context t."""
    D, H, Hkv, dh = c.n_embd, c.n_head, c.n_kv_head, c.d_head
    if kind == "mamba":
        return mixer_products(c, T, t, B)
    if kind == "full_attention":
        pairs = attention_pairs(T, t)
        return [
            product("q", B * T * H * dh, D),
            product("k", B * T * Hkv * dh, D),
            product("v", B * T * Hkv * dh, D),
            product("scores", B * H * pairs, dh),
            ("mix", B * H * T * dh, B * H * dh * pairs),
            product("out", B * T * D, H * dh),
        ]
    if kind == "mlp":
        return [product("mlp.up", B * T * c.d_ff, D), product("mlp.down", B * T * D, c.d_ff)]
    E, k, Fe, Fs, Dl = c.n_experts or 0, c.top_k or 0, c.moe_inner, c.shared_inner, c.d_latent
    latent = c.moe_latent is not None
    return [
        product("router", B * T * E, D),
        *([product("moe.latent_in", B * T * Dl, D)] if latent else []),
        product("expert.up", B * T * k * Fe, Dl),
        product("expert.down", B * T * k * Dl, Fe),
        *([product("moe.latent_out", B * T * D, Dl)] if latent else []),
        product("shared.up", B * T * Fs, D),
        product("shared.down", B * T * D, Fs),
    ]


def products_in_order(config: NemotronHConfig, T: int, t: int, R: int = 1, B: int = 1) -> list[tuple[str, int, int]]:
    """(op, dot products, MACs) of one layer of each kind, in the order the kinds first appear (as count folds the
    layers), then the logits. (A pass in row chunks computes shorter dot products for the mix: H dh of them for each
    (query, key) pair, as the scores do.)"""
    ops = [op for kind in dict.fromkeys(config.layer_types) for op in kind_products(config, kind, T, t, B)]
    return [*ops, product("logits", B * R * config.vocab_size, config.n_embd)]


def kind_macs(c: NemotronHConfig, kind: str, T: int, t: int) -> int:
    """One layer of `kind`'s MACs in a pass of T positions at context t, one sequence."""
    if kind == "mamba":
        return T * mixer_weight_macs_per_position(c) + scan_macs_at(c, T, t)
    if kind == "full_attention":
        return T * kind_weight_macs_per_position(c, kind) + 2 * c.n_head * c.d_head * attention_pairs(T, t)
    return T * kind_weight_macs_per_position(c, kind)


def kind_weight_macs_per_position(c: NemotronHConfig, kind: str) -> int:
    D = c.n_embd
    if kind == "mamba":
        return mixer_weight_macs_per_position(c)
    if kind == "full_attention":
        return 2 * D * c.n_head * c.d_head + 2 * D * c.n_kv_head * c.d_head
    if kind == "mlp":
        return 2 * D * c.d_ff
    latent = 2 * D * c.d_latent if c.moe_latent is not None else 0
    return D * (c.n_experts or 0) + (c.top_k or 0) * 2 * c.d_latent * c.moe_inner + 2 * D * c.shared_inner + latent


def kind_weight_dot_products_per_position(c: NemotronHConfig, kind: str) -> int:
    D = c.n_embd
    if kind == "mamba":
        return mixer_weight_dot_products_per_position(c)
    if kind == "full_attention":
        return c.n_head * c.d_head + 2 * c.n_kv_head * c.d_head + D
    if kind == "mlp":
        return c.d_ff + D
    latent = c.d_latent + D if c.moe_latent is not None else 0
    return (c.n_experts or 0) + (c.top_k or 0) * (c.moe_inner + c.d_latent) + c.shared_inner + D + latent


def pass_macs(config: NemotronHConfig, T: int, t: int, R: int = 1, B: int = 1) -> int:
    """Σ over the layers of their kind's MACs + R D V."""
    layers = sum(config.layer_types.count(kind) * kind_macs(config, kind, T, t) for kind in set(config.layer_types))
    return B * (layers + R * config.n_embd * config.vocab_size)


def _kind_parameters(c: NemotronHConfig, kind: str, experts: int) -> int:
    D = c.n_embd
    if kind == "mamba":
        return mixer_parameters(c, c.use_bias)
    if kind == "full_attention":
        return 2 * D * c.n_head * c.d_head + 2 * D * c.n_kv_head * c.d_head
    mlp_bias = c.mlp_bias
    if kind == "mlp":
        return 2 * D * c.d_ff + (c.d_ff + D if mlp_bias else 0)
    Dl, Fs = c.d_latent, c.shared_inner
    shared = 2 * D * Fs + (Fs + D if mlp_bias else 0)
    latent = 2 * D * Dl + (Dl + D if mlp_bias else 0) if c.moe_latent is not None else 0
    return (c.n_experts or 0) * D + experts * 2 * Dl * c.moe_inner + shared + latent


def _parameters(c: NemotronHConfig, active: bool) -> int:
    head = 0 if c.tie_word_embeddings else c.vocab_size * c.n_embd
    layers = sum(
        c.n_embd + _kind_parameters(c, kind, (c.top_k if active else c.n_experts) or 0) for kind in c.layer_types
    )
    return c.vocab_size * c.n_embd + layers + c.n_embd + head


class NemotronHFormulas(Formulas):
    """Each layer one kind (mamba, full_attention, mlp, moe): its products with weights by kind, a scan in the Mamba
    layers, attention in the attention layers only, and a generation summed here, layer by layer."""

    def products(self, config: NemotronHConfig, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of a layer of each kind's products, the attention's in their dense form
        (T t pairs; products_in_order and kind_products have those a pass in row chunks computes), then the logits."""
        ops = {op: (dots, macs // dots) for op, dots, macs in products_in_order(config, T, t, R, B)}
        if "full_attention" in config.layer_types:
            H, dh = config.n_head, config.d_head
            ops |= {"scores": (B * H * T * t, dh), "mix": (B * H * T * dh, t)}
        return ops

    def weight_macs_per_position(self, config: NemotronHConfig, layer: int = 0) -> int:
        return kind_weight_macs_per_position(config, config.layer_types[layer])

    def weight_dot_products_per_position(self, config: NemotronHConfig, layer: int = 0) -> int:
        return kind_weight_dot_products_per_position(config, config.layer_types[layer])

    def generation_macs(
        self,
        config: NemotronHConfig,
        n_prompt: int,
        n_new: int,
        use_cache: bool = True,
        B: int = 1,
        windows: bool = True,
    ) -> int:
        """1 prefill and n_new - 1 decode steps: with the cache, each step one position (the Mamba layers' recurrent
        form, the attention layers over every cached key); without it, every step recomputes all its t positions."""
        if use_cache:
            steps = sum(pass_macs(config, 1, t, 1, B) for t in range(n_prompt + 1, n_prompt + n_new))
            return pass_macs(config, n_prompt, n_prompt, 1, B) + steps
        return sum(pass_macs(config, t, t, 1, B) for t in range(n_prompt, n_prompt + n_new))

    def parameters(self, config: NemotronHConfig) -> int:
        """V D + Σ over the layers (D + its kind's) + D [+ V D untied]: a Mamba layer's mixer
        (families/mamba2/formulas.py), an attention layer's 2 D H dh + 2 D Hkv dh, an MLP's 2 D F, a mixture's E D +
        E 2 Dl Fe + 2 D Fs (+ 2 D Dl with a latent; biases where mlp_bias). The routers' correction biases are
        buffers, not parameters, as transformers counts them."""
        return _parameters(config, active=False)

    def active_parameters(self, config: NemotronHConfig) -> int:
        """What one token's pass reads: k of the E routed experts of each mixture, everything else whole."""
        return _parameters(config, active=True)

    def attention_vs_weights(self, c: NemotronHConfig) -> tuple[str, str, str]:
        """An attention layer's scores and mix against its products with weights, in a decode step at t keys."""
        return (
            "2 (2 H dh t) FLOPs against 2 (2 D H dh + 2 D Hkv dh) for the weights (an attention layer)",
            "2 H dh t / (2 D H dh + 2 D Hkv dh)",
            f"D = {c.n_embd:,}, H = {c.n_head}, Hkv = {c.n_kv_head}, dh = {c.d_head}",
        )

    def count_notes(self, config: NemotronHConfig, n_prompt: int, n_new: int) -> list[str]:
        """The Mamba layers' scan (families/mamba2/formulas.py's scan_notes), beside the attention layers' cache."""
        mamba = config.layer_types.count("mamba")
        if not mamba:
            return []
        kv = 2 * config.n_kv_head * config.d_head if "full_attention" in config.layer_types else 0
        return scan_notes(config, mamba, n_prompt, n_new, kv)

    # Only the attention layers attend; a Mamba layer scans; an MLP or a mixture does neither.
    def attends(self, config: NemotronHConfig, layer: int) -> bool:
        return config.layer_types[layer] == "full_attention"

    def scan_macs(self, config: NemotronHConfig, layer: int, T: int) -> int:
        return mixer_scan_macs(config, T) if config.layer_types[layer] == "mamba" else 0

    def scan_dot_products(self, config: NemotronHConfig, layer: int, T: int) -> int:
        return mixer_scan_dot_products(config, T) if config.layer_types[layer] == "mamba" else 0

    def scan_recurrent_macs(self, config: NemotronHConfig, layer: int, T: int) -> int:
        return recurrent_scan_macs(config, T) if config.layer_types[layer] == "mamba" else 0


FORMULAS = NemotronHFormulas()
