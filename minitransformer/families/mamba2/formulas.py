"""Mamba-2's arithmetic in closed form, written from its equations (mixer.py, ssd.py say them), held by the tests to
the ledger of real and shape-only runs. Nemotron-H's Mamba layers are counted by the same mixer forms.

Symbols: D d_model, Hs heads of P, N the state per head and channel, Ng groups (B and C shared by a group's heads),
I = Hs P, Cv = I + 2 Ng N the conv's channels, K its kernel, L the chunk, V vocabulary.

Per position, a mixer's products with weights: in_proj D (I + Cv + Hs), the conv Cv K (each channel a dot product of
length K with its kernel), out_proj I D. Its scan:
- recurrent (a decode step): x_dt ⊗ B, Hs P N dot products of length 1, and h C, Hs P of length N: 2 Hs P N MACs;
- in chunks (a pass of T positions, as Nc = ceil(T / L') chunks of L' = min(L, T), the last padded with zeros): a
  chunk's scores C B^T, Ng L'² of length N; its mix, Hs L' P of length L'; its own state, Hs P N of length L'; its
  read of the state before it, Hs L' P of length N: in all (Ng N + Hs P) Nc L'² + 2 Hs P N Nc L'.
"""

from __future__ import annotations

from ..architecture import Formulas
from .config import Mamba2Config, MixerShapes


def chunking(T: int, L: int) -> tuple[int, int]:
    """(Nc chunks, of L' positions) of a pass of T positions in chunks of L: L' = min(L, T), the last one padded."""
    length = min(L, T)
    return -(-T // length), length


def recurrent(T: int, t: int) -> bool:
    """A pass computed in the recurrent form: one position after cached ones (a decode step), as transformers."""
    return T == 1 and t > 1


def mixer_products(c: MixerShapes, T: int, t: int, B: int = 1) -> list[tuple[str, int, int]]:
    """(op, dot products, MACs) of one mixer's products in a pass of T positions at context t, in the order they
    run."""
    Hs, P, N, Ng, D, Cv = c.ssm_heads, c.ssm_head_dim, c.state_size, c.n_groups, c.n_embd, c.conv_dim
    ops = [product("ssm.in_proj", B * T * c.in_proj_dim, D), product("ssm.conv", B * T * Cv, c.conv_kernel)]
    if recurrent(T, t):
        ops += [product("ssm.input", B * Hs * P * N, 1), product("ssm.output", B * Hs * P, N)]
    else:
        n, L = chunking(T, c.chunk_size)
        ops += [product("ssd.scores", B * n * Ng * L * L, N), product("ssd.mix", B * n * Hs * L * P, L),
                product("ssd.chunk_state", B * n * Hs * P * N, L), product("ssd.from_state", B * n * Hs * L * P, N)]  # fmt: skip
    return ops + [product("ssm.out_proj", B * T * D, c.d_inner)]


def product(op: str, dot_products: int, length: int) -> tuple[str, int, int]:
    """(op, dot products, MACs)."""
    return op, dot_products, dot_products * length


def scan_macs_at(c: MixerShapes, T: int, t: int) -> int:
    """The scan's MACs in a pass of T positions at context t, one sequence: 2 Hs P N in a decode step; in chunks,
    (Ng N + Hs P) Nc L'² + 2 Hs P N Nc L'."""
    Hs, P, N, Ng = c.ssm_heads, c.ssm_head_dim, c.state_size, c.n_groups
    if recurrent(T, t):
        return 2 * Hs * P * N
    n, L = chunking(T, c.chunk_size)
    return (Ng * N + Hs * P) * n * L * L + 2 * Hs * P * N * n * L


def recurrent_scan_macs(c: MixerShapes, T: int) -> int:
    """The same T positions in the recurrent form, one at a time: 2 Hs P N T (x_dt ⊗ B and h C)."""
    return 2 * c.ssm_heads * c.ssm_head_dim * c.state_size * T


def mixer_weight_macs_per_position(c: MixerShapes) -> int:
    """D (I + Cv + Hs) + Cv K + I D: in_proj, the conv, out_proj."""
    return c.n_embd * c.in_proj_dim + c.conv_dim * c.conv_kernel + c.d_inner * c.n_embd


def mixer_weight_dot_products_per_position(c: MixerShapes) -> int:
    return c.in_proj_dim + c.conv_dim + c.n_embd


def mixer_parameters(c: MixerShapes, bias: bool) -> int:
    """D (I + Cv + Hs) + Cv K + 3 Hs + I + I D, with in_proj's and out_proj's biases where `bias` and the conv's
    where use_conv_bias."""
    weights = c.n_embd * c.in_proj_dim + c.conv_dim * c.conv_kernel + 3 * c.ssm_heads + c.d_inner + c.d_inner * c.n_embd
    biases = (c.in_proj_dim + c.n_embd if bias else 0) + (c.conv_dim if c.use_conv_bias else 0)
    return weights + biases


def mixer_state_numbers(c: MixerShapes) -> tuple[int, int]:
    """(conv state, scan state) a layer keeps between passes, per sequence: Cv (K - 1) and Hs P N, whatever the
    context."""
    return c.conv_dim * (c.conv_kernel - 1), c.ssm_heads * c.ssm_head_dim * c.state_size


def products_in_order(config: Mamba2Config, T: int, t: int, R: int = 1, B: int = 1) -> list[tuple[str, int, int]]:
    """(op, dot products, MACs) of a layer's products in a pass (every layer alike), in the order they run, then the
    logits."""
    return [*mixer_products(config, T, t, B), product("logits", B * R * config.vocab_size, config.n_embd)]


def pass_macs(config: Mamba2Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    """L (T (weights per position) + the scan) + R D V."""
    layer = T * mixer_weight_macs_per_position(config) + scan_macs_at(config, T, t)
    return B * (config.n_layer * layer + R * config.n_embd * config.vocab_size)


def scan_notes(c: MixerShapes, layers: int, n_prompt: int, n_new: int, kv_numbers: int = 0) -> list[str]:
    """count's lines on the Mamba layers: the prefill's scan in chunks as computed, with the recurrent form beside it;
    a decode step's, the same at any context; and the state a layer keeps (against an attention layer's keys and
    values a position, `kv_numbers`, where the model has them)."""
    Hs, P, N = c.ssm_heads, c.ssm_head_dim, c.state_size
    n, L = chunking(n_prompt, c.chunk_size)
    padding = n * L - n_prompt
    padded = f", the last padded with {padding:,} zero positions" if padding else ""
    chunked, recurrent_form = scan_macs_at(c, n_prompt, n_prompt), recurrent_scan_macs(c, n_prompt)
    conv, ssm = mixer_state_numbers(c)
    t = n_prompt + n_new - 1
    s = "s" if layers != 1 else ""
    return [
        f"The state-space scan ({layers} Mamba-2 layer{s}): a prompt in chunks (chunk_size {c.chunk_size:,}), a decode "
        f"step in the recurrent form",
        f"  the prefill (T = {n_prompt:,}): {n:,} chunk{'s' if n != 1 else ''} of {L:,}{padded}: {chunked:,} MACs a layer "
        f"as computed (C B^T, the mix, each chunk's state and its read of the state before it),",
        f"    against 2 Hs P N T = {recurrent_form:,} had its {n_prompt:,} positions run one at a time in the recurrent "
        f"form ({chunked / recurrent_form:.3g}x as many, in matrix products over whole chunks instead of {n_prompt:,} "
        f"steps)",
        f"  a decode step: 2 Hs P N = {2 * Hs * P * N:,} MACs a layer (x_dt ⊗ B, then h C) at any context"
        + (f" (the last step here, at t = {t:,}, and one at t = {c.n_positions:,} alike)" if n_new > 1 else ""),  # type: ignore[attr-defined]
        f"  state: conv (K - 1) Cv = {conv:,} + ssm Hs P N = {ssm:,} numbers a layer, {(conv + ssm) * 4:,} bytes in "
        f"float32, whatever the context"
        + (f"; an attention layer's keys and values take {kv_numbers:,} numbers a position, "
           f"{(conv + ssm) // kv_numbers:,} positions' worth of them" if kv_numbers else ""),
    ]  # fmt: skip


def mixer_scan_macs(c: MixerShapes, T: int) -> int:
    """A Mamba layer's scan over a pass of T positions, one sequence: from position 0 in chunks, or (T = 1) a decode
    step."""
    return scan_macs_at(c, T, T + (T == 1))


def mixer_scan_dot_products(c: MixerShapes, T: int) -> int:
    return sum(dots for op, dots, _ in mixer_products(c, T, T + (T == 1)) if op.startswith(SCAN_OPS))


SCAN_OPS = ("ssd.", "ssm.input", "ssm.output")  # the scan's products (the rest of a mixer's have weights)


class Mamba2Formulas(Formulas):
    """Every layer a Mamba-2 mixer: no attention (no layer attends), a scan whose decode step costs the same at any
    context, and a generation summed here (verbs/formulas.py's sum is over attention layers)."""

    def products(self, config: Mamba2Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
        return {op: (dots, macs // dots) for op, dots, macs in products_in_order(config, T, t, R, B)}

    def weight_macs_per_position(self, config: Mamba2Config, layer: int = 0) -> int:
        return mixer_weight_macs_per_position(config)

    def weight_dot_products_per_position(self, config: Mamba2Config, layer: int = 0) -> int:
        return mixer_weight_dot_products_per_position(config)

    def generation_macs(self, config: Mamba2Config, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1,
                        windows: bool = True) -> int:  # fmt: skip
        """1 prefill and n_new - 1 decode steps: with the cache, each step one position in the recurrent form (the
        same MACs at every context); without it, every step recomputes all its t positions in chunks."""
        if use_cache:
            prefill = pass_macs(config, n_prompt, n_prompt, 1, B)
            return prefill + (n_new - 1) * pass_macs(config, 1, n_prompt + 1, 1, B)
        return sum(pass_macs(config, t, t, 1, B) for t in range(n_prompt, n_prompt + n_new))

    def parameters(self, config: Mamba2Config) -> int:
        """V D + L (D + the mixer's) + D [+ V D untied]."""
        c = config
        head = 0 if c.tie_word_embeddings else c.vocab_size * c.n_embd
        return c.vocab_size * c.n_embd + c.n_layer * (c.n_embd + mixer_parameters(c, c.use_bias)) + c.n_embd + head

    def attention_vs_weights(self, c: Mamba2Config) -> tuple[str, str, str]:
        """No attention: a decode step's scan costs 2 Hs P N MACs a layer at any context, against the weights'."""
        return ("2 (2 Hs P N) FLOPs for the scan, at any context, against 2 (D (I + Cv + Hs) + Cv K + I D) for the "
                "weights", "2 Hs P N / (D (I + Cv + Hs) + Cv K + I D)",
                f"D = {c.n_embd:,}, Hs = {c.ssm_heads}, P = {c.ssm_head_dim}, N = {c.state_size}, I = {c.d_inner:,}, "
                f"Cv = {c.conv_dim:,}, K = {c.conv_kernel}")  # fmt: skip

    def count_notes(self, config: Mamba2Config, n_prompt: int, n_new: int) -> list[str]:
        return scan_notes(config, config.n_layer, n_prompt, n_new)

    def attends(self, config: Mamba2Config, layer: int) -> bool:
        return False

    def scan_macs(self, config: Mamba2Config, layer: int, T: int) -> int:
        return mixer_scan_macs(config, T)

    def scan_dot_products(self, config: Mamba2Config, layer: int, T: int) -> int:
        return mixer_scan_dot_products(config, T)

    def scan_recurrent_macs(self, config: Mamba2Config, layer: int, T: int) -> int:
        return recurrent_scan_macs(config, T)


FORMULAS = Mamba2Formulas()
