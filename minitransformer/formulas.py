"""The textbook closed forms of a GPT-2's arithmetic, written from the equations alone.

Nothing here runs the model: these are the formulas analytical calculators use, kept beside the
ledger so the tests can hold the two to each other (shape-only count == closed form == real run).

Symbols (stages.py): L layers, D = d_model, H heads of dh = D / H, F = MLP width, V vocabulary,
P = n_positions (the context), B batch, T positions computed in a pass, t positions attended
(past + T), R rows of logits (1 in generation). A product (m x n)(n x p) is m*p dot products of
length n, m*p*n multiply-accumulates (MACs); FLOPs are 2 x MACs.
"""

from __future__ import annotations

from .config import GPT2Config
from .memory import FLOAT32_BYTES


def products(config: GPT2Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops)."""
    D, H, F, V = config.n_embd, config.n_head, config.d_ff, config.vocab_size
    dh = D // H
    return {
        "qkv": (B * T * 3 * D, D),  # h [T, D] x W_qkv [D, 3D]
        "scores": (B * H * T * t, dh),  # per head Q [T, dh] x K^T [dh, t]
        "mix": (B * H * T * dh, t),  # per head A [T, t] x V [t, dh]
        "out": (B * T * D, D),  # Z [T, D] x W_o [D, D]
        "mlp.up": (B * T * F, D),  # h [T, D] x W_up [D, F]
        "mlp.down": (B * T * D, F),  # g [T, F] x W_down [F, D]
        "logits": (B * R * V, D),  # h [R, D] x W_te^T [D, V]
    }


def causal_pairs(T: int, t: int) -> int:
    """(query, key) pairs per head that the causal mask keeps: query i (at position t - T + i) sees t - T + i + 1 keys.

    Summed over the T queries: T (t - T) + T (T + 1) / 2; all T t of them in a decode step (T = 1).
    """
    return T * (t - T) + T * (T + 1) // 2


def layer_macs(config: GPT2Config, T: int, t: int, B: int = 1) -> int:
    """One block: T (4 D^2 + 2 D F) + 2 T t D; with F = 4 D that is the familiar 12 T D^2 + 2 T t D.

    4 D^2 per position is Q, K, V (3 D^2) and the output projection (D^2); 2 D F is the MLP up and down;
    2 T t D is Q K^T and A V over all heads (H * dh = D), computed dense.
    """
    D, F = config.n_embd, config.d_ff
    return B * (T * (4 * D * D + 2 * D * F) + 2 * T * t * D)


def layer_dot_products(config: GPT2Config, T: int, t: int, B: int = 1) -> int:
    """One block: 3 T D (qkv) + H T t (scores) + T D (mix) + T D (out) + T F (up) + T D (down)."""
    D, H, F = config.n_embd, config.n_head, config.d_ff
    return B * (T * (6 * D + F) + H * T * t)


def causal_layer_macs(config: GPT2Config, T: int, t: int, B: int = 1) -> int:
    """One block counting only the score and mix work the causal mask keeps: 2 D per kept (query, key) pair."""
    D, F = config.n_embd, config.d_ff
    return B * (T * (4 * D * D + 2 * D * F) + 2 * D * causal_pairs(T, t))


def logits_macs(config: GPT2Config, R: int = 1, B: int = 1) -> int:
    """R D V: the unembedding of R rows (1 during generation: only the next token's logits are needed)."""
    return B * R * config.n_embd * config.vocab_size


def pass_macs(config: GPT2Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    """One forward pass: L blocks and the logits (the embedding is a lookup, norms are not products)."""
    return config.n_layer * layer_macs(config, T, t, B) + logits_macs(config, R, B)


def pass_dot_products(config: GPT2Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    return config.n_layer * layer_dot_products(config, T, t, B) + B * R * config.vocab_size


def decode_macs(config: GPT2Config, t: int, B: int = 1) -> int:
    """A decode step with the KV cache: one new position attending to t: L (4 D^2 + 2 D F + 2 t D) + D V."""
    return pass_macs(config, 1, t, 1, B)


def generation_macs(config: GPT2Config, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1) -> int:
    """1 prefill and n_new - 1 decode steps, summed in closed form (no loop over the steps).

    With the cache, step k (1..n_new-1) computes 1 position attending to n_prompt + k. Without it,
    step k recomputes all t = n_prompt + k positions: L (t (4 D^2 + 2 D F) + 2 t^2 D) + D V.
    """
    L, D, F = config.n_layer, config.n_embd, config.d_ff
    per_position = 4 * D * D + 2 * D * F
    logits = n_new * logits_macs(config, 1, B)
    if use_cache:
        k = n_new - 1  # decode steps
        sum_t = k * n_prompt + k * (k + 1) // 2  # sum of contexts n_prompt + 1 .. n_prompt + k
        decode = B * L * (k * per_position + 2 * D * sum_t)
        prefill = L * layer_macs(config, n_prompt, n_prompt, B)
        return prefill + decode + logits
    first, last = n_prompt, n_prompt + n_new - 1
    sum_t = (first + last) * n_new // 2
    sum_t2 = _sum_of_squares(last) - _sum_of_squares(first - 1)
    return B * L * (per_position * sum_t + 2 * D * sum_t2) + logits


def _sum_of_squares(m: int) -> int:
    return m * (m + 1) * (2 * m + 1) // 6


def parameters(config: GPT2Config) -> int:
    """V D + P D (embeddings) + L (4 D^2 + 2 D F + 9 D + F) + 2 D (final norm) [+ V D for an untied head].

    Per layer: W_qkv 3 D^2 + 3 D, W_o D^2 + D, W_up D F + F, W_down F D + D, two norms 2 x 2 D. With
    F = 4 D that is the familiar 12 L D^2 + 13 L D.
    """
    L, D, F, V, P = config.n_layer, config.n_embd, config.d_ff, config.vocab_size, config.n_positions
    head = 0 if config.tie_word_embeddings else V * D
    return V * D + P * D + L * (4 * D * D + 2 * D * F + 9 * D + F) + 2 * D + head


def kv_cache_bytes_per_token(config: GPT2Config, B: int = 1) -> int:
    """K and V (2) for each of L layers, D numbers each (H heads x dh), float32."""
    return B * 2 * config.n_layer * config.n_embd * FLOAT32_BYTES
