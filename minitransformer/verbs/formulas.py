"""The textbook closed forms of a model's arithmetic, written from the equations alone.

Nothing here runs the model: these are the formulas analytical calculators use, kept beside the
ledger so the tests can hold the two to each other (shape-only count == closed form == real run).

Symbols (stages.py): L layers, D = d_model, H query heads of dh (D / H for GPT-2), Hkv key/value
heads (H for GPT-2), F = MLP width, V vocabulary, P = n_positions (the context), W the sliding
window (if any), B batch, T positions computed in a pass, t positions in context (past + T), R
rows of logits (1 in generation). A product (m x n)(n x p) is m*p dot products of length n, m*p*n
multiply-accumulates (MACs); FLOPs are 2 x MACs.

What differs from family to family (the products, the weights per position, the parameters) is
written in each family's formulas.py; the sums over layers, passes and generations are here. GPT-2
projects Q, K and V in one product of width 3D and has a two-matrix MLP; the Llama family projects q
(H dh wide), k and v (Hkv dh wide each) separately and has a three-matrix (gated) MLP.
"""

from __future__ import annotations

from fractions import Fraction

from ..engine import row_chunks
from ..engine.row_chunks import computed_pairs
from ..families.config import ModelConfig as Config
from ..families.table import architecture_of
from .memory import FLOAT32_BYTES


def attended(config: Config, T: int, t: int) -> int:
    """Keys a pass of T new positions at context t computes scores against: all t, or where a sliding
    window W cut the oldest, the W - 1 before the first new query and the T new ones: min(t, W + T - 1)."""
    W = config.sliding_window
    return t if W is None else min(t, W + T - 1)


def products(config: Config, T: int, t: int, R: int = 1, B: int = 1) -> dict[str, tuple[int, int]]:
    """(dot products, dot-product length) of each matrix product of one pass (per layer for the block ops), as the
    family's closed forms write them (families/*/formulas.py)."""
    return architecture_of(config).formulas.products(config, T, t, R, B)


def weight_macs_per_position(config: Config, layer: int = 0) -> int:
    """MACs of the products with weights, per position, in a layer: q, k, v and out, then the MLP.

    D (H dh + 2 Hkv dh) + H dh D + m D F, m the MLP's matrices (2 in GPT-2, 3 gated): 4 D^2 + 2 D F for
    GPT-2, 4 D^2 + 3 D F for a Llama without grouping (H dh = D, Hkv = H); a family whose layers differ in their
    products (a dense MLP beside experts) says each layer's.
    """
    return architecture_of(config).formulas.weight_macs_per_position(config, layer)


def weight_dot_products_per_position(config: Config, layer: int = 0) -> int:
    """Dot products of the products with weights, per position, in a layer (as weight_macs_per_position)."""
    return architecture_of(config).formulas.weight_dot_products_per_position(config, layer)


def attention_macs_per_pair(config: Config) -> int:
    """MACs of Q K^T and A V per (query, key) pair in a layer: dh each, for each of the H query heads (dh and dv
    where values are narrower than keys: H (dh + dv), DeepSeek-V3's MLA)."""
    return config.n_head * (config.d_head + config.d_value)


def selection_per_pair(config: Config, layer: int = 0) -> tuple[int, int]:
    """(MACs, dot products) a query spends in a layer on each key it can see to choose the keys it attends to: a
    sparse attention's indexer (DeepSeek-V3.2's: index_n_heads (index_head_dim + 1) MACs, index_n_heads + 1 dot
    products, the family's formulas.selection_per_pair; none in a GLM-5 layer that reads another layer's choice);
    (0, 0) where every query attends to every key it can see."""
    return architecture_of(config).formulas.selection_per_pair(config, layer)


def chosen_pairs(config: Config, T: int, t: int, window: int | None = None) -> int:
    """(query, key) pairs per head whose scores a pass computes: computed_pairs, or, where an indexer chooses
    k_i = index_topk keys for each query and more than k_i are in reach, T k_i: each query against its k_i keys (one
    that sees fewer is given k_i all the same, the others masked, as transformers' top-k gives them)."""
    keys = t if window is None else min(t, window + T - 1)
    if config.index_topk is not None and keys > config.index_topk:
        return T * config.index_topk
    return computed_pairs(T, t, window)


def attention_macs(config: Config, T: int, t: int, window: int | None = None, selection: int | None = None) -> int:
    """One layer's attention MACs (they grow with t): scores and mix over the pairs computed (chosen_pairs), and an
    indexer's scores over every key in reach (`selection` MACs a pair: by default layer 0's selection_per_pair)."""
    keys = t if window is None else min(t, window + T - 1)
    pairs = chosen_pairs(config, T, t, window)
    per_key = selection_per_pair(config)[0] if selection is None else selection
    return attention_macs_per_pair(config) * pairs + per_key * T * keys


def causal_pairs(T: int, t: int, window: int | None = None) -> int:
    """(query, key) pairs per head that the causal mask keeps: query i (at position t - T + i) sees t - T + i + 1 keys,
    or at most `window` where a sliding window limits it.

    Summed over the T queries: T (t - T) + T (T + 1) / 2 without a window; all T t of them in a decode step (T = 1).
    """
    if window is None:
        return T * (t - T) + T * (T + 1) // 2
    past = t - T
    unlimited = max(0, min(T, window - past))  # queries that see fewer than `window` keys: past + 1 .. past + n
    return unlimited * past + unlimited * (unlimited + 1) // 2 + (T - unlimited) * window


def attends(config: Config, layer: int) -> bool:
    """Whether a layer attends to the earlier positions (every family's layers but a hybrid's recurrent ones, which
    keep a state instead: Formulas.attends)."""
    return architecture_of(config).formulas.attends(config, layer)


def scan_macs(config: Config, layer: int, T: int, B: int = 1) -> int:
    """MACs of a recurrent layer's scan over a pass of T positions (the family's scan_macs: a DeltaNet's delta rule,
    recurrent for one position, in chunks for more); 0 for a layer that attends."""
    return B * architecture_of(config).formulas.scan_macs(config, layer, T)


def scan_dot_products(config: Config, layer: int, T: int, B: int = 1) -> int:
    return B * architecture_of(config).formulas.scan_dot_products(config, layer, T)


def scan_recurrent_macs(config: Config, layer: int, T: int, B: int = 1) -> int:
    """The same scan in the recurrent form, position by position (what a decode step computes): the family's
    scan_recurrent_macs."""
    return B * architecture_of(config).formulas.scan_recurrent_macs(config, layer, T)


Group = tuple[int | None, int, int, tuple[int, int]]  # a layer's window, its products with weights, its selection


def layer_groups(config: Config, windows: bool = True) -> dict[Group, int]:
    """How many attention layers there are of each (sliding window, weight MACs per position, weight dot products per
    position, an indexer's (MACs, dot products) a (query, key) pair): {(None, 4 D^2 + 2 D F, 4 D + F, (0, 0)): L} for
    GPT-2, {(W, ...): L} for Mistral, two groups where windows alternate (Gemma 2), a dense MLP stands beside experts or
    some layers read another's choice of keys (GLM-5). windows=False: as if no layer had a window, to measure what the
    windows save. A hybrid's recurrent layers are state_layers'."""
    counts: dict[Group, int] = {}
    for i in range(config.n_layer):
        if not attends(config, i):
            continue
        window = config.layer_window(i) if windows else None
        weights = (weight_macs_per_position(config, i), weight_dot_products_per_position(config, i))
        key = (window, *weights, selection_per_pair(config, i))
        counts[key] = counts.get(key, 0) + 1
    return counts


def state_layers(config: Config) -> list[int]:
    """The layers that keep a state instead of attending (a hybrid's linear-attention or state-space layers)."""
    return [i for i in range(config.n_layer) if not attends(config, i)]


def _state_macs(config: Config, T: int, B: int, recurrent: bool = False) -> int:
    """Every recurrent layer of one pass of T positions: T (products with weights per position) + its scan."""
    scan = scan_recurrent_macs if recurrent else scan_macs
    return sum(B * T * weight_macs_per_position(config, i) + scan(config, i, T, B) for i in state_layers(config))


def layer_macs(config: Config, T: int, t: int, B: int = 1) -> int:
    """One block: T (products with weights per position) + 2 H dh x (the (query, key) pairs computed).

    GPT-2 in the dense form: T (4 D^2 + 2 D F) + 2 T t D; with F = 4 D that is the familiar
    12 T D^2 + 2 T t D. 4 D^2 per position is Q, K, V (3 D^2) and the output projection (D^2); 2 D F is
    the MLP up and down; 2 T t D is Q K^T and A V over all heads (H * dh = D). A Llama: T (D (2 H dh +
    2 Hkv dh) + 3 D F) + 2 T t' H dh, t' = min(t, W + T - 1) under a sliding window W. A pass over more
    than row_chunks.ROW_CHUNK positions computes its attention in row chunks: computed_pairs, not T t'.
    """
    group = (config.sliding_window, weight_macs_per_position(config), 0, selection_per_pair(config))
    return _layer_macs(config, T, t, B, group)


def _layer_macs(config: Config, T: int, t: int, B: int, group: Group) -> int:
    """layer_macs of a layer of this group (layers may differ: layer_groups)."""
    window, per_position, _, (selection, _) = group
    return B * (T * per_position + attention_macs(config, T, t, window, selection))


def layer_dot_products(config: Config, T: int, t: int, B: int = 1) -> int:
    """One block. GPT-2: 3 T D (qkv) + H T t (scores) + T D (mix) + T D (out) + T F (up) + T D (down).
    A Llama: T (H dh + 2 Hkv dh) (q, k, v) + H T t' (scores) + T H dh (mix) + T D (out) + 2 T F + T D (MLP).
    T t' is computed_pairs where row chunks computed fewer."""
    group = (config.sliding_window, 0, weight_dot_products_per_position(config), selection_per_pair(config))
    return _layer_dot_products(config, T, t, B, group)


def _layer_dot_products(config: Config, T: int, t: int, B: int, group: Group) -> int:
    H, dh = config.n_head, config.d_value  # the mix: T H dv dot products (dv = dh but in MLA)
    window, _, per_position, (_, per_key) = group
    pairs = chosen_pairs(config, T, t, window)  # T t' (t' = t for GPT-2), or fewer in row chunks or chosen keys
    keys = t if window is None else min(t, window + T - 1)
    selection = per_key * T * keys  # an indexer's scores and their sum over its heads
    return B * (T * (per_position + H * dh) + H * pairs + selection)  # products with weights, mix, scores, indexer


def causal_layer_macs(config: Config, T: int, t: int, B: int = 1) -> int:
    """One block counting only the score and mix work the mask keeps: 2 H dh per kept (query, key) pair (at most
    the keys an indexer chose for the query, which caps them as a window would); an indexer's own scores whole."""
    caps = [cap for cap in (config.sliding_window, config.index_topk) if cap is not None]
    pairs = causal_pairs(T, t, min(caps) if caps else None)
    selection = selection_per_pair(config)[0] * T * attended(config, T, t)
    return B * (T * weight_macs_per_position(config) + attention_macs_per_pair(config) * pairs + selection)


def logits_macs(config: Config, R: int = 1, B: int = 1) -> int:
    """R D V: the unembedding of R rows (1 during generation: only the next token's logits are needed)."""
    return B * R * config.n_embd * config.vocab_size


def pass_macs(config: Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    """One forward pass: L blocks and the logits (the embedding is a lookup, norms are not products); a hybrid's
    recurrent layers cost their products with weights and their scan over the T positions, whatever t."""
    blocks = sum(n * _layer_macs(config, T, t, B, group) for group, n in layer_groups(config).items())
    return blocks + _state_macs(config, T, B) + logits_macs(config, R, B)


def recurrent_pass_macs(config: Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    """pass_macs with every recurrent layer's scan in the recurrent form (position by position), as the ledger's
    recurrent form reads (Record.recurrent): the same where no layer scans in chunks."""
    blocks = sum(n * _layer_macs(config, T, t, B, group) for group, n in layer_groups(config).items())
    return blocks + _state_macs(config, T, B, recurrent=True) + logits_macs(config, R, B)


def pass_dot_products(config: Config, T: int, t: int, R: int = 1, B: int = 1) -> int:
    blocks = sum(n * _layer_dot_products(config, T, t, B, group) for group, n in layer_groups(config).items())
    states = sum(
        B * T * weight_dot_products_per_position(config, i) + scan_dot_products(config, i, T, B)
        for i in state_layers(config)
    )
    return blocks + states + B * R * config.vocab_size


def decode_macs(config: Config, t: int, B: int = 1) -> int:
    """A decode step with the KV cache: one new position attending to t (at most W): L (4 D^2 + 2 D F + 2 t D) + D V
    for GPT-2."""
    return pass_macs(config, 1, t, 1, B)


def generation_macs(
    config: Config, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
) -> int:
    """1 prefill and n_new - 1 decode steps, summed in closed form (no loop over the steps).

    With the cache, step k (1..n_new-1) computes 1 position attending to n_prompt + k (at most W of
    them). Without it, step k recomputes all t = n_prompt + k positions, each attending to the ones
    before it (a pass from position 0 has no earlier keys for a window to cut): for GPT-2 that is
    L (t (4 D^2 + 2 D F) + 2 t^2 D) + D V. windows=False: as if no layer had a sliding window. A family whose
    layers are not all attention (a state-space scan) gives its own generation_macs, which this returns.
    """
    own = architecture_of(config).formulas.generation_macs(config, n_prompt, n_new, use_cache, B, windows)
    if own is not None:
        return own
    per_pair, chosen = attention_macs_per_pair(config), config.index_topk  # past an indexer's k_i keys in reach, a
    total = n_new * logits_macs(config, 1, B)  # query's scores and mix stop growing
    for group, L in layer_groups(config, windows).items():  # the L layers with this window and these products
        window, per_position, _, (selection, _) = group
        if use_cache:
            k = n_new - 1  # decode steps
            caps = [cap for cap in (window, chosen) if cap is not None]
            pairs = _sum_of_capped(n_prompt, k, min(caps) if caps else None)
            decode = B * L * (k * per_position + per_pair * pairs + selection * _sum_of_capped(n_prompt, k, window))
            total += L * _layer_macs(config, n_prompt, n_prompt, B, group) + decode
            continue
        first, last = n_prompt, n_prompt + n_new - 1
        sum_t = (first + last) * n_new // 2
        cut_from = last + 1 if chosen is None else max(first, chosen + 1)  # passes whose keys the indexer chooses
        # the passes short enough to be computed dense: t^2
        dense_last = min(cut_from - 1, max(first - 1, row_chunks.ROW_CHUNK), last)
        sum_t2 = _sum_of_squares(dense_last) - _sum_of_squares(first - 1)
        sum_t2 += sum(computed_pairs(t, t, window) for t in range(dense_last + 1, min(cut_from, last + 1)))  # chunks
        sum_t2 += (chosen or 0) * ((cut_from + last) * (last - cut_from + 1) // 2 if cut_from <= last else 0)  # T k_i
        indexer = selection * (_sum_of_squares(last) - _sum_of_squares(first - 1))  # every pass from 0: t x t keys
        total += B * L * (per_position * sum_t + per_pair * sum_t2 + indexer)
    # A hybrid's recurrent layers: with the cache, the prefill's scan over the prompt, then one position a step (the
    # recurrent form); without it, every step scans the whole sequence again.
    passes = [n_prompt] + [1] * (n_new - 1) if use_cache else list(range(n_prompt, n_prompt + n_new))
    return total + sum(_state_macs(config, T, B) for T in passes)


def _sum_of_capped(n: int, k: int, window: int | None) -> int:
    """min(n + 1, W) + min(n + 2, W) + ... + min(n + k, W): the keys of k decode steps after n positions."""
    below = k if window is None else max(0, min(k, window - n))  # steps whose context is still within the window
    return below * n + below * (below + 1) // 2 + (k - below) * (window or 0)


def _sum_of_squares(m: int) -> int:
    return m * (m + 1) * (2 * m + 1) // 6


def parameters(config: Config) -> int:
    """Every weight, from the family's closed form (families/*/formulas.py). GPT-2: V D + P D + L (4 D^2 + 2 D F +
    9 D + F) + 2 D [+ V D untied], 12 L D^2 + 13 L D with F = 4 D; a Llama: V D + L (2 D H dh + 2 D Hkv dh + 3 D F +
    2 D + biases) + D [+ V D untied]."""
    return architecture_of(config).formulas.parameters(config)


def kv_cache_positions(config: Config, positions: int) -> int:
    """Positions a cache must hold after `positions` tokens: all of them, or the last W under a sliding window
    (no query reads further back)."""
    W = config.sliding_window
    return positions if W is None else min(positions, W)


def kv_cache_bytes_per_token(config: Config, B: int = 1, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """K and V (2) for each of L layers, Hkv dh numbers each (Hkv heads x dh; D for GPT-2; dh + dv for K and V
    where values are narrower, DeepSeek-V3's MLA), and an indexer's key of d_index numbers in each layer with one; in a
    hybrid, its attention layers only (a recurrent layer keeps a state of fixed size instead)."""
    numbers = config.n_kv_head * (config.d_head + config.d_value)
    attending = [i for i in range(config.n_layer) if attends(config, i)]
    indexed = sum(1 for i in attending if selection_per_pair(config, i) != (0, 0))  # GLM-5's shared layers keep none
    return B * (len(attending) * numbers + indexed * (config.d_index or 0)) * bytes_per_number


def attention_to_weights(config: Config) -> Fraction:
    """X such that, in a layer of a decode step attending to t keys, MACs(Q K^T, A V) / MACs(products with weights)
    = t / X.

    2 H dh t / (D (H dh + 2 Hkv dh) + H dh D + m D F), m = 2 (GPT-2) or 3 (gated), so
    X = (D (H dh + Hkv dh) + m D F / 2) / (H dh): 2 D + F for GPT-2 (6 D when F = 4 D), 2 D + 1.5 F for a
    Llama without grouping (24,704 for Llama 2 7B), D (1 + Hkv / H) + 1.5 D F / (H dh) in general. With an indexer,
    its scores of every key count as attention too, and the law holds while t <= k_i (attention_macs beyond). In a
    hybrid, the first layer that attends (a recurrent layer's scan does not grow with t).
    """
    per_pair = attention_macs_per_pair(config) + selection_per_pair(config)[0]
    return Fraction(weight_macs_per_position(config, first_attending(config)), per_pair)


def first_attending(config: Config) -> int:
    """The first layer that attends (layer 0 but in a hybrid whose first layers keep a state)."""
    return next(i for i in range(config.n_layer) if attends(config, i))


def attention_crossing(config: Config) -> Fraction:
    """The context t at which a decode step's attention costs what its products with weights cost, in the first layer
    that attends: attention_to_weights, or, where an indexer's k_i comes first, the t at which its scores of every
    key make up the rest: (weights - H (dh + dv) k_i) / (indexer MACs per key)."""
    x, chosen = attention_to_weights(config), config.index_topk
    selection = selection_per_pair(config)[0]
    if chosen is None or x <= chosen or not selection:
        return x
    weights = weight_macs_per_position(config, first_attending(config))
    return Fraction(weights - attention_macs_per_pair(config) * chosen, selection)
