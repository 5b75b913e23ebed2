"""What transformers' pure-PyTorch fallbacks of the hybrids' recurrent layers compute beside what our engine computes,
each difference named with its closed form from the config and the prompt's length T (crosscheck's reasons).

Our ledger counts what our engine computes; torch's counters count what transformers' reference code dispatches.
For the softmax-attention families the two agree product by product (with every T x t score). For a Gated DeltaNet
layer (Qwen3.5: torch_chunk_gated_delta_rule, causal_conv1d_fn) and a Mamba-2 layer (Mamba-2, Nemotron-H, Bamba,
Granite 4.0-H, Falcon-H1: Mamba2Mixer.torch_forward's mamba2_chunk_scan, causal_conv1d_fn), a Mamba-1 layer (Mamba,
Falcon-Mamba, Jamba: mamba_selective_scan's sequential loop, causal_conv1d_fn) and an LFM2 short conv (causal_conv1d_fn
alone) they differ where the code differs:

- the causal conv: F.conv1d(padding=K - 1) computes T + K - 1 outputs a channel and keeps the first T, so it makes
  Cv K (K - 1) MACs a layer that our conv (T outputs a channel, a dot product of length K each) does not;
- the chunks: torch's are always the config's chunk (64 for the delta rule), ours min(chunk, T); both pad the last
  chunk with zeros, so the two differ only for a prompt shorter than one chunk, which torch pads to a whole chunk;
- the products shared by a group of heads: transformers repeats a key head's q and k for each of its value heads
  (the delta rule's K K^T and Q K^T), and a group's B and C for each of its heads (Mamba-2's C B^T), before the
  product, so it computes the same dot products once a head; ours computes them once a key head or group;
- the delta rule's triangular solve: torch solves it with aten.linalg_solve_triangular, which no counter of products
  sees (crosscheck counts its forward substitution, C (C - 1) / 2 MACs a right-hand column, beside them); ours
  solves it row by row through the one door (delta.solve), whose dense form is the full C x C product;
- Mamba-2's carry of the state from chunk to chunk: transformers writes it as one einsum over an (Nc + 1) x (Nc + 1)
  matrix of chunk decays (every chunk's state against every earlier one's), ours as Nc elementwise steps;
- Qwen3.5's l2norm of q and k is (x * x).sum(-1): a multiply and a sum, a norm, not a product in the ledger's rule;
- Mamba-1's update of its state: transformers forms Δ B x as broadcast multiplies (dt[..., None] * B[:, None], then
  times x), which no counter of products sees; ours is the outer product x_dt ⊗ B through the one door, I N dot
  products of length 1 a position (its read h C is a matmul in both: the same MACs);
- Kimi Delta Attention's fallback (chunk_kimi_delta_attention) writes the chunks' K K^T and Q K^T, whose decays are a
  key channel's, as an elementwise multiply by the [C, C, dk] decays and a sum over dk: no product dispatched, where
  ours are products of each row with its decayed keys (delta.kk, delta.qk); and it inverts each chunk's triangular
  system row by row with multiplies and sums, then applies the inverse as two C x C products, which are the dense
  form of our delta.solve.

One mixture of experts differs too, though it has no scan: Llama 4's Llama4TextMoe hands every token to every expert,
its input scaled by the router's score, 0 for the experts not chosen (sigmoid(-inf)), so that its batched products run
E T rows a layer where ours run each expert on its own tokens' rows, T k in all: (E - k) T (2 F D + F D) MACs more a
MoE layer, all of them on rows of zeros (an expert without biases maps zeros to zeros: the same logits).

DeepSeek-V4 has no scan, but transformers' modeling_deepseek_v4.py computes it otherwise in four places (its 4:1
layers' eager attention over every entry, those not chosen masked by block_bias, is our dense form: families/parts/
compressed.py's):

- the hyper-connections collapse the streams (before attention, before the MLP, and the head's before the final norm)
  as (pre.unsqueeze(-1) * streams).sum(dim=2), where ours is a product of length N a number: (2 L + 1) T N D;
- the compressors pool each window's slots as (kv * softmax(gate)).sum(dim=2), where ours is a product of length m'
  (128:1) or 2m (4:1, its own and the indexer's) a channel: L' c' m' dh + L4 c 2m (dh + di);
- the indexer's scorer weighs and sums its heads' scores as (scores * weights.unsqueeze(-1)).sum(dim=2), where ours
  is a product of length Hi an entry: L4 T Hi c;
- before a 4:1 layer has its first entry (T < m), transformers' indexer still projects its queries and head
  weights, where ours projects only its compressor's keys and gates (kept for the window's first entry):
  L4 T (Hi di dq + Hi D) MACs more with weights.

Each `Difference` says how many MACs torch dispatches beyond our dense form (negative: fewer).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.kvcache import KeysValues
from ..families.config import ModelConfig
from ..families.deepseek_v4.config import CSA, HCA, DeepseekV4Config
from ..families.jamba.family import MAMBA as JAMBA_MAMBA
from ..families.jamba.family import JambaConfig
from ..families.kimi_linear.config import LINEAR as KDA
from ..families.kimi_linear.config import KimiLinearConfig
from ..families.lfm2.family import CONV, Lfm2Config
from ..families.llama4_text.family import MOE, Llama4TextConfig
from ..families.mamba.config import MambaConfig
from ..families.mamba2.config import MixerShapes
from ..families.parts.delta_rule import chunking as delta_chunks
from ..families.qwen35.config import CHUNK, LINEAR, Qwen35Config

WEIGHTS, ACTIVATIONS = "products with weights", "products of activations"


@dataclass(frozen=True)
class Difference:
    """One reason torch's count differs from our dense form in a group: `macs` more dispatched by torch (negative:
    fewer), `multiplies` of transformers' written as an elementwise multiply and a sum (Tally.multiply_sum)."""

    group: str
    macs: int
    reason: str
    multiplies: int = 0


def scanned(spec) -> dict:
    """The fixed-size arrays a layer keeps (engine/kvcache.py): a recurrent layer's state, or those an attention layer
    keeps beside its keys and values (Falcon-H1's)."""
    return dict(spec.state if isinstance(spec, KeysValues) else spec.arrays)


def n(x: int) -> str:
    return f"{x:,}"


def scan_differences(config: ModelConfig, T: int) -> list[Difference]:
    """The differences of a prompt of T positions (none for a family without recurrent layers)."""
    if isinstance(config, KimiLinearConfig):
        return _kimi_delta(config, sum(kind.startswith(KDA) for kind in config.layer_types), T)
    if isinstance(config, Qwen35Config):
        return _gated_deltanet(config, sum(kind.startswith(LINEAR) for kind in config.layer_types), T)
    if isinstance(config, MixerShapes):  # Mamba-2's, and the hybrids': the layers whose state has a scan's
        return _mamba2(config, sum("ssm" in scanned(config.layer_cache(i)) for i in range(config.n_layer)), T)
    if isinstance(config, MambaConfig):  # Mamba-1's, Falcon-Mamba's: every layer
        return _mamba1(config, config.n_layer, T)
    if isinstance(config, JambaConfig):  # Mamba-1 mixers beside attention
        return _mamba1(config, sum(kind.startswith(JAMBA_MAMBA) for kind in config.layer_types), T)
    if isinstance(config, Lfm2Config):  # LFM2's short conv: the conv alone differs (it has no scan)
        convs = sum(kind.startswith(CONV) for kind in config.layer_types)
        return [_conv(convs, config.n_embd, config.conv_kernel, "a short conv layer's")] if convs else []
    if isinstance(config, Llama4TextConfig):
        return _every_expert_on_every_token(config, sum(kind.endswith(MOE) for kind in config.layer_types), T)
    if isinstance(config, DeepseekV4Config):  # no scan: its compressed attention and its hyper-connections
        return _compressed_attention(config, T)
    return []


def _every_expert_on_every_token(c: Llama4TextConfig, layers: int, T: int) -> list[Difference]:
    """Llama 4's experts in transformers: every token through all E experts, the unchosen ones' inputs zeros."""
    if not layers:
        return []
    E, k, D, F = c.n_experts, c.top_k, c.n_embd, c.n_inner
    more = layers * (E - k) * T * 3 * D * F
    return [
        Difference(
            WEIGHTS,
            more,
            f"transformers' Llama4TextMoe hands every token to all E = {E} experts (torch.bmm over E x T rows, the "
            f"inputs of the experts not chosen scaled by sigmoid(-inf) = 0), where ours runs each expert on its own "
            f"tokens' rows, T k: {layers} MoE layers x (E - k) T x 3 D F = {layers} x {E - k} x {T} x 3 x {D} x {F} = "
            f"{n(more)} MACs more, all on rows of zeros (the same logits)",
        )
    ]


def _compressed_attention(c: DeepseekV4Config, T: int) -> list[Difference]:
    """DeepSeek-V4's differences (families/parts/compressed.py's and hyper.py's symbols): L layers, L4 of them 4:1
    (rate m, c = floor(T / m) entries) and L' 128:1 (rate m', c' = floor(T / m') entries); heads of dh, N streams
    of D, an indexer of Hi heads of di from the query rank dq."""
    L, dh, D, N = c.n_layer, c.head_dim, c.n_embd, c.hc_mult
    Hi, di, dq = c.index_n_heads, c.index_head_dim, c.q_lora_rank
    L4, Lh = c.attention_types.count(CSA), c.attention_types.count(HCA)
    m, mh = c.csa_rate, c.hca_rate
    entries, heavy = T // m, T // mh
    said = [
        _streams_collapsed(L, T, N, D),
        _windows_pooled(L4, Lh, dh, di, m, mh, entries, heavy),
        _index_heads_summed(L4, T, Hi, entries),
        _indexer_before_any_entry(L4, T, D, Hi, di, dq, m, entries),
    ]
    return [difference for difference in said if difference is not None]  # those that arise at this T


def _streams_collapsed(L: int, T: int, N: int, D: int) -> Difference:
    """The hyper-connections' collapse of the streams: a multiply and a sum in transformers, a product in ours."""
    collapse = (2 * L + 1) * T * N * D
    return Difference(
        ACTIVATIONS,
        -collapse,
        f"transformers' hyper-connections collapse the N = {N} streams (DeepseekV4HyperConnection's pre, before "
        f"attention and before the MLP, and DeepseekV4HyperHead's before the final norm) as "
        f"(pre.unsqueeze(-1) * streams).sum(dim=2), a multiply and a sum, which no counter of products sees; ours "
        f"is a product of length N a number (attn_hc, ffn_hc, hc_head.collapse): (2 L + 1) T N D = "
        f"{2 * L + 1} x {T} x {N} x {D} = {n(collapse)} MACs that torch dispatches no product for",
        multiplies=collapse,
    )


def _windows_pooled(L4: int, Lh: int, dh: int, di: int, m: int, mh: int, entries: int, heavy: int) -> Difference | None:
    """The compressors' pooling of a window's slots: a multiply and a sum in transformers, a product in ours."""
    pools = Lh * heavy * mh * dh + L4 * entries * 2 * m * (dh + di)
    if not pools:
        return None
    return Difference(
        ACTIVATIONS,
        -pools,
        f"transformers' compressors pool each window's slots as (kv * softmax(gate)).sum(dim=2), a multiply "
        f"and a sum; ours is a product of length m' = {mh} (128:1) or 2m = {2 * m} (4:1: its compressor's and "
        f"its indexer's) a channel (compressor.pool, index.compressor.pool): L' c' m' dh + L4 c 2m (dh + di) = "
        f"{Lh} x {heavy} x {mh} x {dh} + {L4} x {entries} x {2 * m} x {dh + di} = {n(pools)} MACs that torch "
        f"dispatches no product for",
        multiplies=pools,
    )


def _index_heads_summed(L4: int, T: int, Hi: int, entries: int) -> Difference | None:
    """The indexer's weighted sum over its heads' scores: a multiply and a sum in transformers, a product in ours."""
    weighed = L4 * T * Hi * entries
    if not weighed:
        return None
    return Difference(
        ACTIVATIONS,
        -weighed,
        f"transformers' indexer (DeepseekV4IndexerScorer) weighs and sums its heads' scores as "
        f"(scores * weights.unsqueeze(-1)).sum(dim=2), a multiply and a sum; ours is a product of length "
        f"Hi an entry (index.sum): L4 T Hi c = {L4} x {T} x {Hi} x {entries} = {n(weighed)} MACs that torch "
        f"dispatches no product for",
        multiplies=weighed,
    )


def _indexer_before_any_entry(
    L4: int, T: int, D: int, Hi: int, di: int, dq: int, m: int, entries: int
) -> Difference | None:
    """A prompt shorter than one 4:1 window: transformers' indexer projects its queries and weights anyway, ours only
    its compressor's keys and gates (the open window's rows, which the pass that closes it pools)."""
    idle = L4 * T * (Hi * di * dq + Hi * D) if L4 and not entries else 0
    if not idle:
        return None
    return Difference(
        WEIGHTS,
        idle,
        f"with no 4:1 entry yet (T = {T} < m = {m}), transformers' indexer still projects its queries (Hi di "
        f"from dq) and its heads' weights (Hi), for no entry to score; ours projects only its compressor's keys "
        f"and gates, kept for the window's first entry: L4 T (Hi di dq + Hi D) = {L4} x {T} x ({Hi * di * dq} + "
        f"{Hi * D}) = {n(idle)} MACs more",
    )


def _conv(layers: int, channels: int, K: int, what: str) -> Difference:
    return Difference(
        WEIGHTS,
        layers * channels * K * (K - 1),
        f"torch's F.conv1d with padding K - 1 = {K - 1} computes T + {K - 1} outputs a channel and drops "
        f"the last {K - 1}: {what} {layers} x channels x K (K - 1) = {layers} x {channels} x {K} x {K - 1} = "
        f"{n(layers * channels * K * (K - 1))} MACs more than ours (T outputs a channel)",
    )


def _padding(layers: int, T: int, ours: tuple[int, int], torch: tuple[int, int], form, what: str) -> list[Difference]:
    """A prompt shorter than the chunk: torch pads it to a whole chunk; else a note that both pad the last chunk."""
    (C, N), (Ct, Nt) = ours, torch
    if (C, N) == (Ct, Nt):
        if N * C == T:
            return []
        return [
            Difference(
                ACTIVATIONS,
                0,
                f"both pad the last of the {what}'s {N} chunks of {C} with zeros and "
                f"compute every padded position ({N * C} for T = {T}): the same MACs",
            )
        ]
    extra = layers * (form(Ct, Nt) - form(C, N))
    return [
        Difference(
            ACTIVATIONS,
            extra,
            f"torch pads a prompt shorter than its chunk to one whole chunk of {Ct} (ours: one chunk of "
            f"T = {T}) and computes the padded positions: {layers} x ({what} at C = {Ct} - at C = {C}) = "
            f"{n(extra)} MACs more",
        )
    ]


def _gated_deltanet(c: Qwen35Config, layers: int, T: int) -> list[Difference]:
    """A Gated DeltaNet layer's differences (symbols of families/parts/delta_rule.py): Hk key heads of dk, Hv value
    heads of dv, Dc = 2 Hk dk + Hv dv conv channels of kernel K; our chunks (C, N), torch's (64, ceil(T / 64))."""
    if not layers:
        return []
    Hk, Hv, dk, dv, K = c.linear_key_heads, c.linear_value_heads, c.linear_key_dim, c.linear_value_dim, c.linear_kernel
    C, N = delta_chunks(T) if T > 1 else (1, 1)
    Ct, Nt = CHUNK, -(-T // CHUNK)
    said = [_conv(layers, c.conv_channels, K, "a DeltaNet layer's conv,")]
    if T == 1:  # one position: both take the recurrent form (no chunks, no solve)
        return said

    def torch_form(C: int, N: int) -> int:
        """torch_chunk_gated_delta_rule's products, one layer: K K^T and Q K^T a value head, the state's reads by
        the decayed keys and by the queries, the mix within each chunk, the write."""
        return Hv * N * (2 * C * C * dk + 2 * C * dk * dv + C * C * dv + dk * dv * C)

    said += _padding(layers, T, (C, N), (Ct, Nt), torch_form, "delta rule")
    repeated = layers * 2 * (Hv - Hk) * N * C * C * dk
    if repeated:
        said.append(
            Difference(
                ACTIVATIONS,
                repeated,
                f"transformers repeats each key head's q and k for its Hv / Hk = {Hv // Hk} value heads "
                f"(repeat_interleave) before the chunks' K K^T and Q K^T, computing the same dot "
                f"products once a value head: {layers} x 2 (Hv - Hk) N C^2 dk = {n(repeated)} MACs "
                f"more than ours (once a key head)",
            )
        )
    solve_dense = layers * Hv * N * C * C * (dk + dv)
    solve = layers * Hv * Nt * (dk + dv) * Ct * (Ct - 1) // 2
    said.append(
        Difference(
            ACTIVATIONS,
            -solve_dense,
            f"torch solves each chunk's triangular system with aten.linalg_solve_triangular, which no "
            f"counter of products sees ({n(solve)} MACs by forward substitution: {layers} x Hv N "
            f"(dk + dv) C (C - 1) / 2); our delta.solve is counted as computed, row by row, and in the "
            f"dense form as one C x C product: {layers} x Hv N C^2 (dk + dv) = {n(solve_dense)} MACs "
            f"that torch dispatches no product for",
        )
    )
    norms = layers * 2 * Hv * T * dk
    said.append(
        Difference(
            ACTIVATIONS,
            0,
            f"transformers' l2norm of q and k is (x * x).sum(-1), an elementwise multiply and a sum: "
            f"{layers} x 2 Hv T dk = {n(norms)} multiplies, a norm (not a product in the ledger's rule, "
            f"nor in ours)",
            multiplies=norms,
        )
    )
    return said


def _kimi_delta(c: KimiLinearConfig, layers: int, T: int) -> list[Difference]:
    """A KDA layer's differences (families/parts/kda.py): H heads of dk (keys, queries and values alike), 3 H dk conv
    channels of kernel K; our chunks (C, N), torch's (64, ceil(T / 64))."""
    if not layers:
        return []
    H, dk, K = c.linear_heads, c.linear_head_dim, c.linear_kernel
    C, N = delta_chunks(T) if T > 1 else (1, 1)
    Ct, Nt = CHUNK, -(-T // CHUNK)
    said = [_conv(layers, c.conv_channels, K, "a KDA layer's conv,")]
    if T == 1:  # one position: both take the recurrent form
        return said

    def torch_form(C: int, N: int) -> int:
        """chunk_kimi_delta_attention's products, one layer: the inverse applied to the values and the decayed keys,
        the state's reads by the queries and by the decayed keys, the mix within each chunk, the write."""
        return H * N * (3 * C * C * dk + 3 * C * dk * dk)

    said += _padding(layers, T, (C, N), (Ct, Nt), torch_form, "delta rule")
    scores = layers * 2 * H * N * C * C * dk
    written = layers * 2 * H * Nt * Ct * Ct * dk
    said.append(
        Difference(
            ACTIVATIONS,
            -scores,
            f"transformers writes each chunk's K K^T and Q K^T, whose decays are a key channel's, as an elementwise "
            f"multiply by the [C, C, dk] decays and a sum over dk ({n(written)} multiplies: {layers} x 2 H N C^2 "
            f"dk at its chunks), which no counter of products sees; ours are products of each row with its decayed "
            f"keys (delta.kk, delta.qk): {layers} x 2 H N C^2 dk = {n(scores)} MACs that torch dispatches no "
            f"product for",
            multiplies=written,
        )
    )
    inverse = layers * H * Nt * (Ct - 1) * Ct * (2 * Ct - 1) // 6
    said.append(
        Difference(
            ACTIVATIONS,
            0,
            f"transformers inverts each chunk's triangular system row by row, each row a multiply and a sum over the "
            f"rows before it ({layers} x H N (C - 1) C (2C - 1) / 6 = {n(inverse)} multiplies), then applies the "
            f"inverse as two C x C products, to the values and to the decayed keys: the dense form of our "
            f"delta.solve (which solves row by row, C (C - 1) / 2 MACs a column, as computed)",
            multiplies=inverse,
        )
    )
    norms = layers * 2 * H * T * dk
    said.append(
        Difference(
            ACTIVATIONS,
            0,
            f"transformers' l2norm of q and k is (x * x).sum(-1), an elementwise multiply and a sum: "
            f"{layers} x 2 H T dk = {n(norms)} multiplies, a norm (not a product in the ledger's rule, nor in ours)",
            multiplies=norms,
        )
    )
    return said


def _mamba2(c: MixerShapes, layers: int, T: int) -> list[Difference]:
    """A Mamba-2 layer's differences (families/parts/ssd.py's symbols): Hs heads of P, a state of N, Ng groups of
    B and C, Cv conv channels of kernel K; our chunks (L, Nc) = (min(chunk, T), ceil(T / L)), torch's (chunk, ...)."""
    if not layers:
        return []
    Hs, P, N, Ng, K = c.ssm_heads, c.ssm_head_dim, c.state_size, c.n_groups, c.conv_kernel
    said = [_conv(layers, c.conv_dim, K, "a Mamba-2 layer's conv,")]
    if T == 1:
        return said
    L = min(c.chunk_size, T)
    Nc = -(-T // L)
    Lt, Nt = c.chunk_size, -(-T // c.chunk_size)

    def torch_form(L: int, Nc: int) -> int:
        """mamba2_chunk_scan's products within the chunks, one layer: C B^T a head, the mix, each chunk's state,
        each chunk's read of the state before it."""
        return Hs * Nc * (L * L * N + L * L * P + 2 * L * P * N)

    said += _padding(layers, T, (L, Nc), (Lt, Nt), torch_form, "scan")
    repeated = layers * (Hs - Ng) * Nc * L * L * N
    if repeated:
        said.append(
            Difference(
                ACTIVATIONS,
                repeated,
                f"transformers repeats each group's B and C for its Hs / Ng = {Hs // Ng} heads "
                f"(repeat_interleave) before C B^T, computing the same scores once a head: {layers} x "
                f"(Hs - Ng) Nc L^2 N = {n(repeated)} MACs more than ours (once a group)",
            )
        )
    carry = layers * Hs * (Nt + 1) * (Nt + 1) * P * N
    said.append(
        Difference(
            ACTIVATIONS,
            carry,
            f"transformers carries the state from chunk to chunk as one einsum over the "
            f"(Nc + 1) x (Nc + 1) matrix of chunk decays (new_states, each chunk's state against every "
            f"earlier one's, zeros above the diagonal); ours carries it chunk after chunk, elementwise "
            f"(ssd.carry): {layers} x Hs (Nc + 1)^2 P N = {n(carry)} MACs more",
        )
    )
    return said


def _mamba1(c: MambaConfig | JambaConfig, layers: int, T: int) -> list[Difference]:
    """A Mamba-1 layer's differences (families/parts/mamba1.py's symbols): I channels, a state of N, a conv of kernel
    K; transformers' loop computes h C as ours, one position at a time."""
    inner, N = c.d_inner, c.state_size
    update = layers * T * inner * N
    return [
        _conv(layers, inner, c.conv_kernel, "a Mamba layer's conv,"),
        Difference(
            ACTIVATIONS,
            -update,
            f"transformers forms the state's update Δ B x as broadcast multiplies (dt[..., None] * B, then times x), "
            f"which no counter of products sees; ours is the outer product x_dt ⊗ B (ssm.input), dot products of "
            f"length 1: {layers} x T I N = {n(update)} MACs that torch dispatches no product for",
        ),
    ]
