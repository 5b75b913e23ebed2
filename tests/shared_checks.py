"""Helpers more than one test module uses, so that no test module imports another: a phase compared record by
record, a random GPT-2 and a random Llama-family model in memory, an array that raises where float64 appears, and the
activation estimate beside a measured peak. (The lead's copy of this module holds the first four too; reconcile.)"""

from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np

from conftest import gpt2_tensors
from minitransformer.engine.ledger import Phase, Record
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.llama.layout import llama_shapes
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree
from minitransformer.verbs.memory import peak_activations

RECORD_FIELDS = [f.name for f in dataclasses.fields(Record)]


def assert_same_phases(real: list[Phase], counted: list[Phase]) -> None:
    """Every phase and every record, field by field (op, name, kind, equation, layer, shapes, heads, counts)."""
    assert len(real) == len(counted)
    for a, b in zip(real, counted):
        assert (a.phase, a.step, a.tokens, a.context, a.batch, a.cached) == (b.phase, b.step, b.tokens, b.context,
                                                                            b.batch, b.cached)  # fmt: skip
        assert len(a.records) == len(b.records)
        for ra, rb in zip(a.records, b.records):
            for name in RECORD_FIELDS:
                assert getattr(ra, name) == getattr(rb, name), (a.phase, a.step, ra.name, name)
            assert (ra.macs, ra.flops) == (rb.macs, rb.flops)
        assert a.to_dict() == b.to_dict()


def random_model(n_layer, n_head, d_head, n_inner, vocab, n_positions, seed=0) -> Model:
    D = n_head * d_head
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=D, n_inner=n_inner, vocab_size=vocab,
                        n_positions=n_positions, name="random")  # fmt: skip
    tensors = gpt2_tensors(n_layer, D, config.d_ff, n_positions, vocab, seed, prefix="")
    return Model(config, as_tree(tensors, config), source="memory")


def random_llama(config: LlamaConfig, seed: int = 0) -> Model:
    """A Llama-family model with random float32 weights of the shapes its checkpoint would have."""
    rng = np.random.default_rng(seed)
    shapes = llama_shapes(config)
    tensors = {name: (rng.standard_normal(shape) * 0.2).astype(np.float32) for name, shape in shapes.items()}
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


class Float64Alarm(np.ndarray):
    """An array that raises the moment any computation involving it produces float64."""

    def __array_finalize__(self, obj):
        if self.dtype == np.float64:
            raise AssertionError("float64 appeared in the forward pass")


def estimated_and_measured_peak(model, T: int) -> tuple[int, int]:
    """memory.py's estimate of a T-position prefill's activations, and tracemalloc's peak of a real one."""
    ids = np.arange(T) % 100
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
