"""Memory beside the counts: weight bytes, KV-cache bytes, a peak-activation estimate, arithmetic intensity.

Bytes are numbers x the bytes of one number: float32 (4, as the engine computes) unless the user
names bfloat16 or float16 (2), the dtypes large models are served in; every byte figure here
(weights, KV cache, activations, intensity) follows that choice.

Arithmetic intensity of a product = MACs / bytes moved, where the bytes moved are the least any
implementation must move: read A once, read B once, write the output once. A product whose
intensity is below the machine balance (the MACs the machine can do in the time it moves one byte)
waits on memory: it is memory-bound. During decode every product has T = 1 row, so each weight is
read to do one multiply-accumulate per number: about 1/4 MAC per byte in float32, 1/2 in bfloat16.

The KV cache holds K and V, Hkv key/value heads of dh numbers each (D for GPT-2), per layer and
position; under a sliding window of W positions no query reads further back than W, so a cache
needs to hold at most W of them (the engine keeps all and reads the last W; transformers keeps W - 1
between steps).

The peak-activation estimate, read from a pass's records: the residual stream x [B, T, D] plus the
largest working set of one stage, in a pass nobody watches (the usual run): for a matrix product
its A and its output (its B is a weight, or K^T and V, which live in the KV cache or in the Q K V
projection's output); for scale, mask and softmax one tensor, as they write over the scores in
place (ops.py); for the other elementwise stages input and output; nothing for views (the heads
split, the cache's rows, the last position); for a causal conv its windows' inputs (the windows are a view) and
its output. The mask is a [T, t] bias the decoder builds once a pass, at the first layer that attends, and keeps
alive to the end (one for each window, where layers differ: parts/decoder.py), whatever the family. A scan (a
state-space or delta-rule layer's: in chunks over a prompt, or position after position, as Mamba-1's over a prompt
and every one in a decode step) holds the arrays its layer made before the scan's first product beside the largest
stage of the scan (scan_alive). A gated MLP
(a Llama block's) holds g, u and act(g) at once (a Phi-3 block's too: its g and u are views of one [T, 2F] product).
A pass computed in row chunks (tape.py; its scores record says what was computed) holds the
attention stages of one chunk at a time: Record.row_chunk of the T query rows. The tests hold it to
tracemalloc's measured peak of real runs.
"""

from __future__ import annotations

from math import prod

from ..engine.kvcache import KeysValues, KVCache, LayerCache, State
from ..engine.ledger import Record
from ..engine.stages import CONV_WINDOWS, READS_STATE, WRITES_STATE
from ..families.config import ModelConfig as Config

FLOAT32_BYTES = 4
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes a number, for --dtype
# A present-day desktop CPU: ~0.5 T float32 MAC/s (8 cores x 2 FMA units x 8 lanes x 4 GHz) over ~50 GB/s
# of DRAM bandwidth. For comparison: an A100 does ~6 float32 MACs per byte of HBM, ~100 in bf16 on tensor cores.
DEFAULT_BALANCE = 10.0  # MACs per byte

# Same-sized tensors alive in a stage that is not a product: one for the stages that work in place on
# the scores, none for views (working_set: a cache's rows, whatever they are named: keys and values, an indexer's
# keys, a compressor's entries, another layer's shared keys); the other stages hold their input and output.
_LIVE_COPIES = {
    "scale": 1,
    "softcap": 1,
    "mask": 1,
    "softmax": 1,
    "split_heads": 0,
    "last": 0,
    "mlp.split": 0,
    "embed.stream": 0,  # Gemma 4's embedding as block 0 reads it: the same array
}
# the stages row_chunks.py runs chunk by chunk between attention's two products, scores and mix (Record.attention)
# (gather: each query's chosen keys and values, under sparse attention; sinks: the scores with each head's sink)
_ROW_CHUNKED = ("gather", "scale", "softcap", "mask", "sinks", "softmax")


def _specs(config: Config) -> list:
    """What each layer keeps (config.layer_cache: KeysValues or State, engine/kvcache.py), in layer order."""
    return [config.layer_cache(i) for i in range(config.n_layer)]


def kv_cache_bytes(config: Config, positions: int, batch: int = 1, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """The engine's own cache (shape-only, so nothing is allocated) holding `positions` positions: the attention
    layers' K and V [Hkv, positions, dh] (and any rows they keep beside them); a recurrent layer's state is not a KV
    cache (state_bytes)."""
    lead = (batch,) if batch > 1 else ()
    cache = KVCache(capacity=positions, batch=lead, shape_only=True, layers=_specs(config))
    held = sum(h.nbytes - h.state_nbytes for h in cache.layers if isinstance(h, LayerCache))
    return held // FLOAT32_BYTES * bytes_per_number


def state_bytes(config: Config, batch: int = 1, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """The recurrent layers' states (State.arrays, and those an attention layer keeps beside its keys and values:
    KeysValues.state), whatever the context: the same after 10 tokens as after 100,000."""
    numbers = sum(s.numbers if isinstance(s, State) else s.state_numbers for s in _specs(config))
    return batch * bytes_per_number * numbers


def cache_positions(config: Config, positions: int) -> int:
    """The positions a KV cache must hold after `positions` tokens: all, or at most the sliding window (the most
    any layer holds, where layers differ: layer_cache_positions); 0 in a model without attention layers."""
    return max((n for n, _ in layer_cache_positions(config, positions).values()), default=0)


def layer_cache_positions(config: Config, positions: int) -> dict[str, tuple[int, int]]:
    """Per layer type (config.layer_types) of the layers that keep keys and values: (positions each of its layers
    must hold after `positions` tokens, its number of layers). A layer with a sliding window W holds at most W (no
    query reads further back), one without it every position: where some layers slide and others do not (Gemma's),
    the cache is the sum of the two."""
    kinds: dict[str, tuple[int, int]] = {}
    for kind, spec in zip(config.layer_types, _specs(config)):
        if isinstance(spec, KeysValues) and spec.reads is None:  # a layer reading another's keys and values holds none
            kinds[kind] = (spec.positions_held(positions), kinds.get(kind, (0, 0))[1] + 1)
    return kinds


def kv_cache_bytes_after(config: Config, positions: int, batch: int = 1, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """The bytes of K and V that every attention layer must hold after `positions` tokens, each at most its window."""
    return (
        batch * bytes_per_number * sum(s.numbers_held(positions) for s in _specs(config) if isinstance(s, KeysValues))
    )


def layer_caches(config: Config, positions: int, batch: int = 1, bytes_per_number: int = FLOAT32_BYTES) -> dict:
    """What each layer type keeps after `positions` tokens, and its bytes: keys and values (growing with the
    context, up to a window; with the rows kept beside them, as an indexer's keys, and their share: "rows") or a
    state (State.arrays, the same at any context), or nothing; for memory's JSON. A cache of streams (DeepSeek-V4's,
    K = V) has each stream's share: the window's keys ("window") and each compressed stream's entries ("compressed"),
    beside the compressors' state."""
    kinds: dict[str, dict] = {}
    for kind, spec in zip(config.layer_types, _specs(config)):
        entry = kinds.setdefault(kind, {"holds": spec.kind, "layers": 0, "bytes": 0})
        entry["layers"] += 1
        if isinstance(spec, KeysValues):
            entry["positions"] = spec.positions_held(positions)
            if spec.reads is None:  # a position's numbers of K and of V in one layer (V none where K = V)
                d_value = spec.d_key if spec.d_value is None else spec.d_value
                entry["key_numbers"] = spec.heads * spec.d_key
                entry["value_numbers"] = 0 if spec.shared else spec.heads * d_value
            each = spec.numbers_held(positions)
            if spec.shared or spec.compressed:  # K = V beside compressed streams (DeepSeek-V4's): the window a stream
                held, window = spec.positions_held(positions), entry.setdefault("window", {"bytes": 0})
                window |= {"positions": held, "numbers_per_position": spec.numbers_per_position}
                window["bytes"] += batch * bytes_per_number * held * spec.numbers_per_position
            for name, numbers in spec.compressed_numbers(positions).items():  # a compressor's entries, one a window
                stream = entry.setdefault("compressed", {}).setdefault(name, {"entries": 0, "bytes": 0})
                ratio, shape = next((r, s) for n, r, s in spec.compressed if n == name)
                stream |= {"ratio": ratio, "numbers_per_entry": prod(shape), "entries": positions // ratio}
                stream["bytes"] += batch * bytes_per_number * numbers
            for name, shape in spec.rows:  # e.g. index_keys: {numbers a position, bytes in this type's layers}
                row = entry.setdefault("rows", {}).setdefault(name, {"numbers_per_position": prod(shape), "bytes": 0})
                row["bytes"] += batch * bytes_per_number * spec.positions_held(positions) * prod(shape)
            if spec.state:  # a hybrid layer's state beside its keys and values: its bytes apart (state_bytes)
                entry["state"] = {name: list(shape) for name, shape in spec.state}
                entry["state_bytes"] = entry.get("state_bytes", 0) + batch * bytes_per_number * spec.state_numbers
                each += spec.state_numbers
        else:
            entry["holds"] = spec.kind if spec.arrays else "nothing"
            entry["state"] = {name: list(shape) for name, shape in spec.arrays}
            each = spec.numbers
        entry["bytes_per_layer"] = batch * bytes_per_number * each
        entry["bytes"] += entry["bytes_per_layer"]
    return kinds


def experts_read(r: Record) -> int:
    """The experts whose weights a product computed expert by expert reads: those its breakdown gave tokens. In a real
    run the router chose them; counted without weights, the routing assumed did (families/parts/moe.py): balanced
    spreads the B T k token rows over min(E, B T k) experts (all E in a long prefill, k in a decode step of one sequence),
    worst sends them all to the same k. (Independent uniform choices would touch E (1 - (1 - k/E)^(B T)) on average,
    fewer than balanced in a batched decode step: balanced is the upper end.)"""
    assert r.breakdown is not None, "a product computed expert by expert"
    return sum(1 for part in r.breakdown if part.tokens)


def weight_numbers(r: Record, every_expert: bool = False) -> int:
    """The numbers of B a product reads when B is a weight: all of it, once a pass whatever the rows that use it; or,
    computed expert by expert, one expert's weights (its MACs per token routed to it) for each expert read
    (experts_read), or for all E of them with `every_expert`."""
    if r.breakdown is None:
        return prod(r.b_shape or ())
    part = next(part for part in r.breakdown if part.tokens)
    return part.macs // part.tokens * (len(r.breakdown) if every_expert else experts_read(r))


def operand_bytes(r: Record, bytes_per_number: int = FLOAT32_BYTES) -> dict[str, int]:
    """The bytes a product moves, by what they are: "activations" (A read once, the output written once: the dot
    products it computed), and B read once, under its kind (Record.b_operand): "weight" (weight_numbers), "kv_cache",
    "state" or "activations". A recurrent layer's state (Stage.state) is read where it is B, written where the
    output is its update; a causal conv's A is windows of K positions, a view of its inputs: it reads each of the T
    inputs once and the K - 1 of the conv state before them, and writes the last K - 1 back to the conv state."""
    assert r.a_shape is not None and r.b_operand is not None, "a matrix product"
    b = weight_numbers(r) if r.b_operand == "weight" else prod(r.b_shape or ())
    moved = {"activations": prod(r.a_shape) + r.dot_products}
    if r.stage.state == WRITES_STATE:
        moved = {"activations": prod(r.a_shape), "state": r.dot_products}
    elif r.stage.state == CONV_WINDOWS:  # A [..., C, T, K]
        *lead, channels, T, K = r.a_shape
        moved = {
            "activations": prod(lead) * channels * T + r.dot_products,
            "state": 2 * prod(lead) * channels * (K - 1),
        }
    moved[r.b_operand] = moved.get(r.b_operand, 0) + b
    return {kind: bytes_per_number * n for kind, n in moved.items()}


def bytes_moved(r: Record, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """Read A, read B, write the output, once each (operand_bytes). A mixture of experts' product (its record has a
    breakdown, and B is k experts' weights side by side) reads the weights of every expert that got tokens, once
    each: k of them in a decode step, up to all E in a prefill. Where a pass computed scores in row chunks, the output
    written is what the chunks computed."""
    return sum(operand_bytes(r, bytes_per_number).values())


# Parameters a pass reads row by row, one row a position, not whole: the lookup tables of the embedding.
LOOKUP_KINDS = ("token_embedding", "position_embedding", "per_layer_embedding")  # read a row a position


def weights_outside_products(config: Config, weighted: list[tuple[Record, int]], positions: int) -> int:
    """The numbers of parameters a pass reads outside its products: each lookup table's rows of its `positions` (B T),
    and whole the rest that no product reads (the norms' gains, the biases). outside_products says how."""
    whole, per_position = outside_products(config, weighted)
    return whole + positions * per_position


def outside_products(config: Config, weighted: list[tuple[Record, int]]) -> tuple[int, int]:
    """(numbers read whole, numbers read a position) of the parameters outside a pass's products: every parameter
    less those the products read with every expert of a mixture counted (weighted: each record of the pass with the
    layers it stands for) and less the lookup tables, whose rows are read a position each (the token embedding, when
    tied, is read whole by the logits, so it is not subtracted twice). The same for every pass of a model."""
    from .params import parameters

    p = parameters(config)
    in_products = sum(n * weight_numbers(r, every_expert=True) for r, n in weighted if r.b_operand == "weight")
    tables = [t for t in p.tensors if t.kind in LOOKUP_KINDS]
    read_by_products = "token_embedding" if config.tie_word_embeddings else None
    whole = p.total - in_products - sum(t.count for t in tables if t.kind != read_by_products)
    return whole, sum(t.shape[-1] for t in tables)


def intensity(r: Record, bytes_per_number: int = FLOAT32_BYTES) -> float:
    """MACs per byte moved."""
    return r.macs / bytes_moved(r, bytes_per_number)


def working_set(r: Record, gated: bool = False) -> int:
    """Numbers alive while this stage runs, besides the residual stream (see the module docstring)."""
    if r.kind == "matmul" and r.stage.state == CONV_WINDOWS:  # A [..., C, T, K]: windows, a view of the C inputs
        *lead, channels, T, K = r.a_shape or ()  # after the K - 1 of the conv state before them (one copy)
        return prod(lead) * channels * (K - 1 + T) + prod(r.out_shape)
    if r.kind == "matmul":
        return prod(r.a_shape or ()) + prod(r.out_shape)
    if gated and r.op == "mlp.act":  # g, u and act(g)
        return 3 * prod(r.out_shape)
    if r.kind == "cache" and (r.op in ("cache", "shared_kv") or r.op.endswith(".cache")):
        return 0  # a view of the cache's rows (a gather or a compressor's windows, of the same kind, are copies)
    return _LIVE_COPIES.get(r.op, 2) * prod(r.out_shape)


def peak_activations(records: list[Record], bytes_per_number: int = FLOAT32_BYTES) -> tuple[int, Record]:
    """(estimated peak activation bytes, the stage where it peaks) of one pass."""
    residual = prod(next(r for r in records if r.op == "embed").out_shape)
    gated = any(r.op in ("mlp.gate", "mlp.gate_up") for r in records)  # a Llama or Phi-3 block (module docstring)
    masks = dict(zip(map(id, records), masks_alive(records)))
    # the layers whose attention ran in row chunks: none of their attention stages holds [H, T, t] at once
    chunked = {r.layer: r for r in records if r.attention == "scores" and r.computed is not None}
    outside = [r for r in records if not (r.layer in chunked and (r.attention or r.op in _ROW_CHUNKED))]
    candidates = [(masks[id(r)] + working_set(r, gated), r) for r in outside]
    for layer, scores in chunked.items():  # each its own chunk: a dense or wider layer beside them keeps its own
        candidates.append((masks[id(scores)] + chunked_attention([r for r in records if r.layer == layer]), scores))
    for layer in dict.fromkeys(r.layer for r in records if in_scan(r)):  # in chunks or position after position
        held, peak = scan_alive([r for r in records if r.layer == layer])
        candidates.append((masks[id(peak)] + held, peak))
    alive, peak = max(candidates, key=lambda candidate: candidate[0])  # the first of the largest
    return bytes_per_number * (residual + alive), peak


def masks_alive(records: list[Record]) -> list[int]:
    """The numbers of the masks alive at each record: the decoder builds a window's [T, t] bias when the first
    layer that attends with that window runs, and keeps it to the end of the pass (parts/decoder.py); a hybrid's
    recurrent layers before it run without it."""
    first: dict[int | None, tuple[int | None, int]] = {}  # window -> (the first layer masking with it, its numbers)
    window = None
    for r in records:
        if r.attention == "scores":
            window = r.window
        elif r.op == "mask":
            first.setdefault(window, (r.layer, prod(r.out_shape[-2:])))
    built, alive = 0, []
    for r in records:
        for w, (layer, n) in list(first.items()):
            if r.layer is not None and r.layer == layer:  # the first record of the layer that first masks with w
                built += n
                del first[w]
        alive.append(built)
    return alive


def in_scan(r: Record) -> bool:
    """A product of a recurrent layer's scan: one computed in chunks (it carries the recurrent form beside it:
    Record.recurrent), or one of the recurrent form itself, which reads or writes the state (Stage.state)."""
    return r.recurrent is not None or r.stage.state in (READS_STATE, WRITES_STATE)


def scan_alive(block: list[Record]) -> tuple[int, Record]:
    """(numbers alive while a layer (its records) computes a scan, the stage where they peak): the arrays the layer
    made before the scan's first product (in_scan) stay alive to its end: in chunks, the chunked copies of the scan's
    inputs and their decays, which its products read to the last chunk; position after position (Mamba-1's over a
    prompt, any layer's decode step), the decays and the inputs every position reads (Mamba-1's exp(Δ A) [T, I, N]
    beside its x_dt ⊗ B and its states: three of that size at once); and the mixer's own (its projections, kept for
    the gate and the skip after the scan); beside them, the largest working set of the scan's stages. A view (a
    reshape, a split) holds nothing new."""
    scan = [i for i, r in enumerate(block) if in_scan(r)]
    first, last = scan[0], scan[-1]
    held = sum(prod(r.out_shape) for r in block[:first] if r.kind != "reshape" and working_set(r) > 0)
    peak = max(block[first : last + 1], key=working_set)
    return held + working_set(peak), peak


def chunked_attention(block: list[Record]) -> int:
    """Numbers alive while a layer (its records) computes its attention in row chunks: the block's normed input and
    its q, k and v (the chunks read slices of them), the largest chunk's scores (rows x the keys it sees), and the
    chunks' outputs so far ([H, T, dh])."""
    scores = next(r for r in block if r.attention == "scores")
    *heads, T, t = scores.out_shape
    W = scores.window
    C = scores.row_chunk  # the query rows per chunk the pass ran with
    assert C is not None, "only a pass computed in row chunks holds one chunk's attention at a time"
    keys = [(min(T, r0 + C) - r0, t - T + min(T, r0 + C)) for r0 in range(0, T, C)]
    largest = max(rows * (seen if W is None else min(seen, rows + W - 1)) for rows, seen in keys)
    held = sum(prod(r.out_shape) for r in block if r.op in ("ln_1", "qkv", "q", "k", "v"))
    mix = next(r for r in block if r.attention == "mix")
    if scores.chosen_keys is not None:  # sparse: a chunk's scores and its queries' keys and values, s of each
        rows, s = min(T, C), scores.chosen_keys
        gathered = prod(heads) * rows * s * (scores.dot_length + mix.out_shape[-1])
        return held + prod(heads) * rows * s + gathered + prod(mix.out_shape)
    copies = 2 if any(r.op == "sinks" for r in block) else 1  # the scores beside them with each head's sink column
    return held + copies * prod(heads) * largest + prod(mix.out_shape)


def intensity_rows(count, balance: float, bytes_per_number: int = FLOAT32_BYTES) -> list[dict]:
    """Each matrix product in the prefill and in a cached decode step: MACs, bytes moved, MACs per byte."""
    decode = count.decode_example()
    rows = []
    seen = set()
    for r in count.prefill.block_records + count.prefill.after:  # each op once, of whichever kind of layer has it
        if r.kind != "matmul" or r.op in seen:
            continue
        seen.add(r.op)
        row = {"op": r.op, "prefill": _intensity(r, balance, bytes_per_number)}
        if decode is not None and decode.has(r.op):  # not a chunked scan's product, which a decode step has not
            row["decode"] = _intensity(decode.find(r.op), balance, bytes_per_number)
        rows.append(row)
    return rows


def _intensity(r: Record, balance: float, bytes_per_number: int) -> dict:
    value = intensity(r, bytes_per_number)
    assert r.a_shape is not None  # a product
    return {
        "rows": r.a_shape[-2],
        "macs": r.macs,
        "bytes": bytes_moved(r, bytes_per_number),
        "macs_per_byte": value,
        "memory_bound": value < balance,
    }


def memory_dict(count, balance: float, dtype: str = "float32") -> dict:
    """The memory section of the count's JSON (see the module docstring for the definitions), in `dtype`."""
    from .params import parameters

    size = DTYPE_BYTES[dtype]
    config, batch = count.config, count.batch
    n_params = parameters(config).total
    held = count.n_prompt + count.n_new - 1  # the last new token is never fed back, so never cached
    prefill = count.prefill
    prefill_peak, prefill_stage = peak_activations(prefill.before + prefill.block_records + prefill.after, size)
    activations = {
        "estimate": "residual stream + the largest stage's working set (see minitransformer/verbs/memory.py)",
        "prefill": {"bytes": prefill_peak, "stage": prefill_stage.op},
    }
    decode = count.decode_example()
    if decode is not None:
        decode_peak, decode_stage = peak_activations(decode.before + decode.block_records + decode.after, size)
        activations["decode"] = {"bytes": decode_peak, "stage": decode_stage.op, "context": decode.context}
    kept = cache_positions(config, held)
    return {
        "dtype": dtype,
        "bytes_per_number": size,
        "weights": {"parameters": n_params, "bytes": size * n_params},
        "kv_cache": {
            "used": count.cached,
            "batch": batch,
            "bytes_per_token": kv_cache_bytes(config, 1, batch, size),
            "positions": kept,
            "bytes": kv_cache_bytes_after(config, held, batch, size),
            "context": config.n_positions,
            "bytes_at_context": kv_cache_bytes_after(config, config.n_positions, batch, size),
            # each attention layer type's positions, layers and bytes: a sliding layer holds at most its window
            "layer_types": {
                kind: {
                    "layers": k["layers"],
                    "positions": k["positions"],
                    "bytes": k["bytes"] - k.get("state_bytes", 0),
                }
                for kind, k in layer_caches(config, held, batch, size).items()
                if k.get("positions")  # none: a layer type that reads another's keys and values (Gemma 4's)
            },
        },
        # everything the cache holds, layer type by layer type: keys and values (growing with the context) beside
        # the recurrent layers' states (the same at any context)
        "cache": {
            "positions": held,
            "bytes": kv_cache_bytes_after(config, held, batch, size) + state_bytes(config, batch, size),
            "state_bytes": state_bytes(config, batch, size),
            "bytes_at_context": kv_cache_bytes_after(config, config.n_positions, batch, size)
            + state_bytes(config, batch, size),
            "layer_types": layer_caches(config, held, batch, size),
        },
        "activations": activations,
        "intensity": {
            "bytes_moved": f"read A, read B and write the output once each, {dtype}",
            "machine_balance_macs_per_byte": balance,
            "ops": intensity_rows(count, balance, size),
        },
    }
