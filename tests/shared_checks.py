"""What several test modules share, in one place below them all: no test module imports another.

Small random models built with NumPy alone (GPT-2's and the Llama family's checkpoint shapes), a checkpoint copied
into 2 bytes, the field-by-field comparison of two ledgers' phases, the array that raises when float64 appears, and
the activation estimate beside a measured peak (a prefill's, a decode step's).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np

from conftest import gpt2_tensors
from minitransformer import GPT2Config
from minitransformer.engine.ledger import Phase, Record
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.models.model import Model
from minitransformer.models.weights import _read_header, as_tree, expected_shapes
from minitransformer.verbs.memory import peak_activations

RECORD_FIELDS = [f.name for f in dataclasses.fields(Record)]


def random_model(n_layer, n_head, d_head, n_inner, vocab, n_positions, seed=0) -> Model:
    """A GPT-2 with random float32 weights, held in memory."""
    D = n_head * d_head
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=D, n_inner=n_inner, vocab_size=vocab,
                        n_positions=n_positions, name="random")  # fmt: skip
    tensors = gpt2_tensors(n_layer, D, config.d_ff, n_positions, vocab, seed, prefix="")
    return Model(config, as_tree(tensors, config), source="memory")


def random_llama(config: LlamaConfig, seed: int = 0) -> Model:
    """A Llama-family model with random float32 weights of the shapes its checkpoint would have."""
    rng = np.random.default_rng(seed)
    shapes = expected_shapes(config)
    tensors = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32) for name, shape in shapes.items()}
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


FLOATS = {"F32": "<f4", "F16": "<f2", "BF16": ml_dtypes.bfloat16}  # safetensors' float dtypes, as NumPy reads them


def two_byte_copy(source: Path, directory: Path, stored: str = "BF16") -> Path:
    """A copy of a checkpoint with its float tensors in bfloat16 (stored "BF16") or float16 ("F16"), written as
    safetensors lays a file out (header, then each tensor's little-endian bytes), without torch; integer tables and
    the other files (config.json, a sharded checkpoint's index) as they are."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.suffix != ".safetensors":
            if path.is_file():
                shutil.copy(path, directory / path.name)
            continue
        header, chunks, offset = {}, [], 0
        for name, info in _read_header(path).items():
            with open(info.file, "rb") as f:
                f.seek(info.start)
                data, dtype = f.read(info.end - info.start), info.dtype
            if dtype in FLOATS:
                values = np.frombuffer(data, FLOATS[dtype]).astype(np.float32)
                data = values.astype(FLOATS[stored]).view("<u2").tobytes()
                dtype = stored
            header[name] = {"dtype": dtype, "shape": list(info.shape), "data_offsets": [offset, offset + len(data)]}
            chunks.append(data)
            offset += len(data)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        (directory / path.name).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return directory


def assert_same_phases(real: list[Phase], counted: list[Phase]) -> None:
    """Every phase and every record, field by field (op, name, kind, equation, layer, shapes, heads, counts); a
    difference is said with both sides' values."""
    assert len(real) == len(counted), f"{len(real)} phases run, {len(counted)} counted"
    for a, b in zip(real, counted):
        run, count = [(p.phase, p.step, p.tokens, p.context, p.batch, p.cached) for p in (a, b)]
        assert run == count, f"(phase, step, tokens, context, batch, cached): run {run}, counted {count}"
        where = f"{a.phase} {a.step}"
        assert len(a.records) == len(b.records), f"{where}: {len(a.records)} records run, {len(b.records)} counted"
        for ra, rb in zip(a.records, b.records):
            for name in RECORD_FIELDS:
                x, y = getattr(ra, name), getattr(rb, name)
                assert x == y, f"{where}, record {ra.name}: {name} run {x!r}, counted {y!r}"
            assert (ra.macs, ra.flops) == (rb.macs, rb.flops), (
                f"{where}, record {ra.name}: (MACs, FLOPs) run {(ra.macs, ra.flops)}, counted {(rb.macs, rb.flops)}"
            )
        run_dict, count_dict = a.to_dict(), b.to_dict()
        differ = {key: (run_dict.get(key), count_dict.get(key)) for key in run_dict | count_dict
                  if run_dict.get(key) != count_dict.get(key)}  # fmt: skip
        assert not differ, f"{where}: to_dict() differs, key: (run, counted): {differ}"


class Float64Alarm(np.ndarray):
    """An array that raises the moment any computation involving it produces float64."""

    def __array_finalize__(self, obj):
        if self.dtype == np.float64:
            made_from = f" from {obj.dtype} {obj.shape}" if isinstance(obj, np.ndarray) else ""
            raise AssertionError(f"float64 appeared in the forward pass: an array {self.shape}{made_from}")


def estimated_and_measured_peak(model, T: int) -> tuple[int, int]:
    """memory.py's estimate of a T-position prefill's activations, and tracemalloc's peak of a real one."""
    ids = np.arange(T) % min(100, model.config.vocab_size)  # within a small vocabulary (Mamba's random ones: 64..96)
    phase = Phase("prefill", 0, T, T)
    model.run(ids, phase=phase)  # also builds the cached causal-mask buffer (GPT-2), which is not an activation
    estimate, _ = peak_activations(phase.records)
    tracemalloc.start()
    try:
        model.run(ids)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return estimate, peak


def estimated_and_measured_decode_peak(model, context: int) -> tuple[int, int]:
    """memory.py's estimate of a decode step's activations after `context` cached positions, and tracemalloc's peak
    of the next one (the cache, allocated before, is not an activation; a recurrent layer's state is the same at
    any context, an attention layer's keys one position more)."""
    ids = np.arange(context + 2) % min(100, model.config.vocab_size)
    cache = model.new_cache()
    model.run(ids[:context], cache=cache)
    phase = Phase("decode", 1, 1, context + 1)
    model.run(ids[context : context + 1], cache=cache, phase=phase)
    estimate, _ = peak_activations(phase.records)
    tracemalloc.start()
    try:
        model.run(ids[context + 1 :], cache=cache)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return estimate, peak
