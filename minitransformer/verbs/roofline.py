"""From dot products to seconds: the roofline of every product of a pass on a named machine (hardware.py).

A product of M MACs that moves B bytes (memory.operand_bytes: A read once, B read once, the output written once; a
weight once a pass however many rows use it, and of a mixture's experts only those that got tokens) takes at least
max(2 M / peak, B / bandwidth) seconds: the time to compute it at the machine's peak dense matrix throughput, or to
move its bytes at the memory bandwidth, whichever is longer, and that one is its bound. A pass takes at least the
sum over its products, plus the parameters it reads outside them (the norms' gains, the biases, a row of the
embedding table a position: memory.weights_outside_products) at the bandwidth.

These are roofline bounds, not measurements: no kernel reaches either roof exactly, none overlaps one product's
bytes with the next one's arithmetic, caches are not modelled, and the stages that are not products (norms,
softmax, residual adds) are not charged for the activations they read and write (a fused kernel keeps them on
chip; our NumPy engine does not). A real run is slower; scripts/bench.py sets the two side by side on this CPU.

The totals: the prefill's time; the decode rate, the batch's tokens over one decode step's time at the count's
context; and the batch at which a decode step turns compute-bound (its FLOPs at the peak take as long as its bytes at
the bandwidth), counted step by step at growing batches, since a batch shares the weights but not the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

from ..engine.ledger import Phase, Record
from ..errors import OptionError, UserError
from ..families.config import ModelConfig as Config
from .count import Count, Pass, decode_at
from .hardware import Machine, machine
from .memory import DTYPE_BYTES, operand_bytes, outside_products

NOTE = "roofline bounds, not measurements: max(2 MACs / peak, bytes / bandwidth) for each product"
LARGEST_BATCH = 2**20  # the compute-bound batch is searched up to this many sequences


@dataclass
class OpTime:
    """One op of a pass (every layer's record of it): MACs, bytes by what they are, and its roofline."""

    op: str
    macs: int = 0
    bytes: dict[str, int] = field(default_factory=dict)  # "activations", "weight", "kv_cache", "state"
    compute_s: float = 0.0  # 2 MACs / peak, summed over its records
    memory_s: float = 0.0  # bytes / bandwidth, summed over its records
    time_s: float = 0.0  # the sum of each record's max(compute_s, memory_s)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def macs_per_byte(self) -> float:
        return self.macs / self.total_bytes if self.total_bytes else 0.0

    def add(self, r: Record, layers: int, machine: Machine, dtype: str) -> None:
        moved = operand_bytes(r, DTYPE_BYTES[dtype])
        compute, memory = 2 * r.macs / machine.peak(dtype), sum(moved.values()) / machine.bandwidth
        self.macs += layers * r.macs
        for kind, b in moved.items():
            self.bytes[kind] = self.bytes.get(kind, 0) + layers * b
        self.compute_s += layers * compute
        self.memory_s += layers * memory
        self.time_s += layers * max(compute, memory)

    def to_dict(self) -> dict:
        return {
            "op": self.op,
            "macs": self.macs,
            "bytes": self.total_bytes,
            "bytes_by_operand": dict(self.bytes),
            "macs_per_byte": self.macs_per_byte,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "time_s": self.time_s,
            "bound": self.bound,
        }


@dataclass
class PassTime:
    """The roofline of one forward pass: each op's, and the parameters read outside the products."""

    phase: str
    step: int
    tokens: int
    context: int
    batch: int
    ops: list[OpTime]
    outside_bytes: int  # parameters read outside the products (memory.weights_outside_products), in bytes
    machine: Machine
    dtype: str

    @property
    def macs(self) -> int:
        return sum(o.macs for o in self.ops)

    @property
    def bytes(self) -> dict[str, int]:
        """Bytes moved by what they are; "outside_products": the parameters read outside the products."""
        kinds: dict[str, int] = {}
        for o in self.ops:
            for kind, b in o.bytes.items():
                kinds[kind] = kinds.get(kind, 0) + b
        return kinds | {"outside_products": self.outside_bytes}

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    @property
    def outside_s(self) -> float:
        return self.outside_bytes / self.machine.bandwidth

    @property
    def time_s(self) -> float:
        """The sum of each product's roofline, and the parameters outside the products at the bandwidth."""
        return sum(o.time_s for o in self.ops) + self.outside_s

    @property
    def compute_s(self) -> float:
        """All the pass's MACs at the peak: the least time it can take."""
        return 2 * self.macs / self.machine.peak(self.dtype)

    @property
    def memory_s(self) -> float:
        """All the pass's bytes at the bandwidth."""
        return self.total_bytes / self.machine.bandwidth

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    def to_dict(self) -> dict:
        return {
            "phase": self.phase,
            "step": self.step,
            "tokens": self.tokens,
            "context": self.context,
            "batch": self.batch,
            "macs": self.macs,
            "bytes": self.total_bytes,
            "bytes_by_operand": self.bytes,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "time_s": self.time_s,
            "bound": self.bound,
            "outside_products_s": self.outside_s,
            "ops": [o.to_dict() for o in self.ops],
        }


def pass_time(
    config: Config,
    weighted: list[tuple[Record, int]],
    phase: Phase | Pass,
    on: Machine,
    dtype: str,
    outside: tuple[int, int] | None = None,
) -> PassTime:
    """The roofline of one pass: `weighted`, each of its records with the layers it stands for (count.Pass.weighted(),
    or a real run's phase records once each); `phase` answers phase, step, tokens, context and batch; `outside`: the
    model's memory.outside_products, where the caller has it (the same for every pass)."""
    if dtype not in DTYPE_BYTES:
        raise OptionError("dtype", f"must be one of {', '.join(DTYPE_BYTES)}, not {dtype!r:.40}")
    ops: dict[str, OpTime] = {}
    for r, layers in weighted:
        if r.kind == "matmul":
            ops.setdefault(r.op, OpTime(r.op)).add(r, layers, on, dtype)
    whole, per_position = outside_products(config, weighted) if outside is None else outside
    outside_bytes = (whole + phase.batch * phase.tokens * per_position) * DTYPE_BYTES[dtype]
    return PassTime(
        phase.phase, phase.step, phase.tokens, phase.context, phase.batch, list(ops.values()), outside_bytes, on, dtype
    )


def phase_time(config: Config, phase: Phase, on: Machine | str, dtype: str = "float32") -> PassTime:
    """The roofline of one pass of a real run's ledger (a Phase: every layer's records)."""
    if not isinstance(config, Config) or not isinstance(phase, Phase):
        raise UserError(
            f"phase_time takes a model's config and one pass of its ledger (ledger.phases[i]), not "
            f"{type(config).__name__} and {type(phase).__name__}"
        )
    on = on if isinstance(on, Machine) else machine(on)
    return pass_time(config, [(r, 1) for r in phase.records], phase, on, dtype)


@dataclass
class Roofline:
    """A count's passes on a machine: the prefill, a decode step, the whole generation, the compute-bound batch."""

    count: Count
    machine: Machine
    dtype: str
    prefill: PassTime
    decode: PassTime | None  # the decode step of count.decode_example(), None where the context has no room
    passes: list[PassTime]  # every pass of the generation, in order
    compute_bound_batch: int | None  # None: no batch up to LARGEST_BATCH turns the decode step compute-bound
    weights_compute_bound_batch: int | None  # the same for its products with weights alone
    per_sequence: dict | None  # what one more sequence adds to a decode step at the batch the search ended at

    @property
    def prefill_s(self) -> float:
        return self.prefill.time_s

    @property
    def decode_tokens_per_s(self) -> float | None:
        """The batch's tokens over one decode step's time (tokens a second across the batch)."""
        return None if self.decode is None else self.decode.batch / self.decode.time_s

    @property
    def generation_s(self) -> float:
        return sum(p.time_s for p in self.passes)

    def to_dict(self) -> dict:
        m = self.machine
        return {
            "name": m.name,
            "label": m.label,
            "source": m.source,
            "dtype": self.dtype,
            "peak_flops": m.peak(self.dtype),
            "bandwidth_bytes_per_s": m.bandwidth,
            "balance_macs_per_byte": m.balance(self.dtype),
            "prefill_s": self.prefill_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "decode_context": None if self.decode is None else self.decode.context,
            "compute_bound_batch": self.compute_bound_batch,
            "weights_compute_bound_batch": self.weights_compute_bound_batch,
            "decode_per_sequence": self.per_sequence,
            "generation_s": self.generation_s,
            "note": NOTE,
            "prefill": self.prefill.to_dict(),
            "decode": None if self.decode is None else self.decode.to_dict(),
        }


def roofline(count: Count, hardware: Machine | str, dtype: str = "float32") -> Roofline:
    """The roofline of a count (verbs/count.count_generation) on a machine (a name of hardware.MACHINES, "this-cpu", or
    a Machine) with numbers of `dtype` (bytes, and the peak of that format)."""
    if not isinstance(count, Count):
        raise UserError(f"roofline takes a count (count_generation(config, ...)), not {count!r:.60}")
    on = hardware if isinstance(hardware, Machine) else machine(hardware)
    config = count.config
    outside = outside_products(config, count.prefill.weighted())  # the same for every pass
    passes = [pass_time(config, p.weighted(), p, on, dtype, outside) for p in count.passes]
    example = count.decode_example()
    if example is None:
        return Roofline(count, on, dtype, passes[0], None, passes, None, None, None)
    decode = pass_time(config, example.weighted(), example, on, dtype, outside)
    steps = DecodeSteps(count, example.context, on, dtype, outside)
    batches = steps.least_batch(step_margin), steps.least_batch(weights_margin)
    # What one more sequence adds where the search ended (where a mixture's batch reads every expert already): the
    # second, where one sequence is compute-bound already
    last = max(2, batches[0] or LARGEST_BATCH)
    one, more = steps.at(last - 1), steps.at(last)
    per_sequence = {
        "batch": last,
        "macs": more.macs - one.macs,
        "bytes": more.total_bytes - one.total_bytes,
        "compute_s": more.compute_s - one.compute_s,
        "memory_s": more.memory_s - one.memory_s,
    }
    return Roofline(count, on, dtype, passes[0], decode, passes, *batches, per_sequence)


class DecodeSteps:
    """Decode steps at one context, counted at whatever batch is asked, each once."""

    def __init__(
        self, count: Count, context: int, on: Machine, dtype: str, outside: tuple[int, int] | None = None
    ) -> None:
        self.count, self.context, self.on, self.dtype = count, context, on, dtype
        self.outside = outside_products(count.config, count.prefill.weighted()) if outside is None else outside
        self.steps: dict[int, PassTime] = {}

    def at(self, batch: int) -> PassTime:
        """The decode step at the context (one new position after context - 1 cached ones) of `batch` sequences."""
        if batch not in self.steps:
            c = self.count
            step = decode_at(c.config, self.context, batch, c.running)
            self.steps[batch] = pass_time(c.config, step.weighted(), step, self.on, self.dtype, self.outside)
        return self.steps[batch]

    def least_batch(self, margin) -> int | None:
        """The least batch whose step is compute-bound, margin(step) >= 0 (a step's compute time less its memory
        time); None if none up to LARGEST_BATCH. The margin only grows with the batch, which shares the weights, so the
        answer is bracketed between a batch that is not and one that is, and the bracket closed to one. Where to try
        next is read off the margins already counted, as a line through two of them (each sequence adds the same MACs
        and bytes once a mixture's batch reads every expert): two or three steps past the bracket's ends, where halving
        took ten; halving still bounds the search where the margins are not a line."""
        low, high = 0, 1  # low: not compute-bound (0: none tried); high: to be tried
        while margin(self.at(high)) < 0:
            if high >= LARGEST_BATCH:
                return None
            low, high = high, min(LARGEST_BATCH, max(2 * high, self._crossing(margin, low, high) or 0))
        stalled = 0  # guesses off the line in a row that did not halve the bracket
        while high - low > 1:
            width = high - low
            crossing = self._crossing(margin, low, high) if stalled < 2 else None
            middle = (low + high) // 2 if crossing is None else min(max(crossing, low + 1), high - 1)
            low, high = (low, middle) if margin(self.at(middle)) >= 0 else (middle, high)
            stalled = 0 if crossing is None or 2 * (high - low) <= width else stalled + 1
        return high

    def _crossing(self, margin, a: int, b: int) -> int | None:
        """The least whole batch past where the line through the margins at batches a < b crosses zero (None where
        a is 0, no batch, or the line does not rise)."""
        if a == 0:
            return None
        at_a, at_b = margin(self.at(a)), margin(self.at(b))
        if at_b <= at_a:
            return None
        return ceil(b - at_b * (b - a) / (at_b - at_a))


def step_margin(step: PassTime) -> float:
    """The whole step's compute time less its memory time: compute-bound where its MACs at the peak take at least as
    long as all its bytes at the bandwidth (>= 0)."""
    return step.compute_s - step.memory_s


def weights_margin(step: PassTime) -> float:
    """The same for its products with weights alone (the KV cache's products left out)."""
    ops = [o for o in step.ops if "weight" in o.bytes]
    return sum(o.compute_s for o in ops) - sum(o.memory_s for o in ops)
