"""Named machines, for turning a count into seconds: each one's peak dense matrix throughput per number format and its
memory bandwidth, from the vendor's data sheet, and `this-cpu`, probed.

A peak here is what the matrix units do on dense operands (NVIDIA and AMD print a figure twice as high "with
sparsity", 2:4 structured sparsity, which a dense model does not have: we halve it), for products whose operands are
in that format and whose sums are kept in float32, as frameworks run them. float32 is the float32 rate without
TF32 (PyTorch's default for float32 products); on a CPU, the float32 products of its BLAS.

`this-cpu` is measured the way scripts/bench.py measures it (it calls these same probes, with a larger buffer and
larger squares): the streaming bandwidth as the best of several reads of a buffer far larger than the caches, by
every thread summing its own slice (as STREAM does) and by one matrix-vector product; the peak as the best of
several large square float32 products, through Tape.matmul like every product of the package. Our engine computes
in float32 whatever --dtype says, so this machine's peak is its float32 one for every format (bytes still follow
--dtype).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from ..engine.tape import Dims, Tape
from ..engine.threads import spread
from ..errors import UserError

TERA = 1e12


@dataclass(frozen=True)
class Machine:
    name: str  # the name --hardware takes: "h100-sxm"
    label: str  # what it is: "NVIDIA H100 SXM5 80 GB"
    peak_flops: dict[str, float]  # number format (count's --dtype) -> FLOP/s of dense matrix products
    bandwidth: float  # bytes/s of its memory (HBM, GDDR, unified memory, DRAM)
    source: str  # where the figures come from

    def peak(self, dtype: str) -> float:
        return self.peak_flops[dtype]

    def balance(self, dtype: str) -> float:
        """MACs per byte at which a product takes as long to compute as to move: the roofline's ridge."""
        return self.peak(dtype) / 2 / self.bandwidth

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "label": self.label,
            "peak_flops_by_dtype": dict(self.peak_flops),
            "bandwidth_bytes_per_s": self.bandwidth,
            "source": self.source,
        }


def _formats(float32: float, bfloat16: float, float16: float | None = None) -> dict[str, float]:
    return {"float32": float32 * TERA, "bfloat16": bfloat16 * TERA, "float16": (float16 or bfloat16) * TERA}


MACHINES: dict[str, Machine] = {
    m.name: m
    for m in (
        # NVIDIA H100 Tensor Core GPU data sheet, H100 SXM column: FP32 67 TFLOPS; BF16 and FP16 Tensor Core 1,979
        # TFLOPS with sparsity (989.5 dense); GPU memory bandwidth 3.35 TB/s (80 GB HBM3).
        Machine(
            "h100-sxm",
            "NVIDIA H100 SXM5 80 GB",
            _formats(67, 989.5),
            3.35e12,
            "NVIDIA H100 Tensor Core GPU data sheet (SXM): FP32 67 TFLOPS, BF16/FP16 1,979 TFLOPS with sparsity, "
            "3.35 TB/s",
        ),
        # NVIDIA H200 Tensor Core GPU data sheet, H200 SXM column: the H100's compute (FP32 67 TFLOPS, BF16/FP16 1,979
        # TFLOPS with sparsity) with 141 GB of HBM3e at 4.8 TB/s.
        Machine(
            "h200",
            "NVIDIA H200 SXM 141 GB",
            _formats(67, 989.5),
            4.8e12,
            "NVIDIA H200 Tensor Core GPU data sheet (SXM): FP32 67 TFLOPS, BF16/FP16 1,979 TFLOPS with sparsity, "
            "4.8 TB/s",
        ),
        # NVIDIA DGX B200 / HGX B200 data sheet, "individual Blackwell GPU" HGX B200 column (1,000 W): FP32 75 TFLOPS;
        # FP16/BF16 Tensor Core 4.5 PFLOPS with sparsity (2.25 dense); 180 GB HBM3e at 7.7 TB/s.
        Machine(
            "b200",
            "NVIDIA B200 (HGX, 1,000 W) 180 GB",
            _formats(75, 2250),
            7.7e12,
            "NVIDIA HGX B200 data sheet, per GPU: FP32 75 TFLOPS, FP16/BF16 4.5 PFLOPS with sparsity, 7.7 TB/s",
        ),
        # NVIDIA A100 Tensor Core GPU data sheet, A100 80GB SXM column: FP32 19.5 TFLOPS; BF16 and FP16 Tensor Core 312
        # TFLOPS dense (624 with sparsity); GPU memory bandwidth 2,039 GB/s (HBM2e).
        Machine(
            "a100-80gb",
            "NVIDIA A100 SXM 80 GB",
            _formats(19.5, 312),
            2.039e12,
            "NVIDIA A100 Tensor Core GPU data sheet (80GB SXM): FP32 19.5 TFLOPS, BF16/FP16 312 TFLOPS, 2,039 GB/s",
        ),
        # AMD Instinct MI300X accelerator data sheet: peak FP32 (matrix) 163.4 TFLOPs; FP16 and BF16 1,307.4 TFLOPs
        # dense (2,614.9 with sparsity); 192 GB HBM3 at 5.3 TB/s peak.
        Machine(
            "mi300x",
            "AMD Instinct MI300X 192 GB",
            _formats(163.4, 1307.4),
            5.3e12,
            "AMD Instinct MI300X data sheet: FP32 matrix 163.4 TFLOPs, FP16/BF16 1,307.4 TFLOPs, 5.3 TB/s",
        ),
        # NVIDIA Ada Lovelace GPU architecture white paper, appendix table for the GeForce RTX 4090: peak FP32 82.6
        # TFLOPS; FP16 and BF16 Tensor with FP32 accumulate 165.2 TFLOPS dense (330.4 with sparsity; FP16 with FP16
        # accumulate is twice that, but frameworks accumulate in float32); 24 GB GDDR6X at 1,008 GB/s.
        Machine(
            "rtx-4090",
            "NVIDIA GeForce RTX 4090 24 GB",
            _formats(82.6, 165.2),
            1.008e12,
            "NVIDIA Ada Lovelace architecture white paper (RTX 4090): FP32 82.6 TFLOPS, FP16/BF16 tensor with FP32 "
            "accumulate 165.2 TFLOPS, 1,008 GB/s",
        ),
        # Apple's M4 Max announcement (Apple Newsroom, 30 October 2024): a 40-core GPU and 546 GB/s of unified memory
        # bandwidth. Apple publishes no FLOP/s: 40 cores x 128 FP32 lanes x 2 (a fused multiply-add) x 1.678 GHz (the
        # GPU clock third-party databases report) = 17.2 TFLOPS, an estimate; FP16 and BF16 run at the FP32 rate (the
        # GPU has no matrix units of its own).
        Machine(
            "apple-m4-max",
            "Apple M4 Max, 40-core GPU, 546 GB/s",
            _formats(17.2, 17.2),
            546e9,
            "Apple M4 Max announcement: 40-core GPU, 546 GB/s; FLOP/s not published: 17.2 TFLOPS estimated from "
            "40 cores x 128 lanes x 2 x 1.678 GHz, the same for FP16 and BF16",
        ),
    )
}
THIS_CPU = "this-cpu"


def names() -> list[str]:
    return [*MACHINES, THIS_CPU]


def machine(name: str) -> Machine:
    """The machine `name` names (`this-cpu`: probed now, a few seconds); a UserError listing the names otherwise."""
    if name == THIS_CPU:
        return probe_this_cpu()
    if not isinstance(name, str) or name not in MACHINES:
        raise UserError(f"no hardware named {name!r:.40}; choose one of {', '.join(names())}")
    return MACHINES[name]


# --- this-cpu: the machine we run on, measured ----------------------------------------------------------------
def _best_time(fn, reps: int) -> float:
    """The fastest of `reps` runs after a warm-up: a machine's limit is what it can do, not what it usually does."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _product(a, b) -> None:
    """a @ b through the one door for matrix products (an unwatched tape: nothing recorded)."""
    n, k, p = a.shape[0], a.shape[1], b.shape[1]
    Tape(Dims(T=n, t=n, D=k, H=1, F=p, V=p, R=n)).matmul("probe", a, b, "T D, D F -> T F")


def streaming_bandwidth(buffer_bytes: int = 2**28, reps: int = 3, threads: int | None = None) -> dict:
    """Bytes/s of reads of a float32 buffer of `buffer_bytes` (far beyond the caches), the best of the probes and of
    `reps` runs each: every thread summing its own slice (STREAM's way), and a row times the buffer as a weight, as a
    decode step reads one (through Tape.matmul, on the threads it gives a row: the BLAS's), in both layouts a weight
    is stored in ([out, in], read as W^T: each column a dot product; [in, out]: the row's numbers scaling W's rows),
    and the buffer times a column ([n, n] x [n, 1], which the tape computes on one thread, as a prompt's column block).
    A roofline is the fastest the memory was seen to go: a probe that a product outran read low. (The last was once
    the only matrix-vector probe, and a decode step's products, on the BLAS's two threads, outran it on a Xeon.)"""
    threads = threads or os.cpu_count() or 1
    side = int((buffer_bytes // 4) ** 0.5)
    matrix = np.ones((side, side), dtype=np.float32)
    slices = np.array_split(matrix.reshape(-1), threads)

    # the engine's own workers (engine/threads.py, the one place that keeps threads) sum the slices side by side:
    # NumPy lets go of the GIL inside a reduction
    def read(first: int, end: int) -> None:
        for part in slices[first:end]:
            np.add.reduce(part)

    summed = matrix.nbytes / _best_time(lambda: spread(read, len(slices)), reps)
    row, column = np.ones((1, side), dtype=np.float32), np.ones((side, 1), dtype=np.float32)
    products = ((row, matrix.T), (row, matrix), (matrix, column))  # the last, on one thread, read faster on some days
    matvec = max(matrix.nbytes / _best_time(lambda a=a, b=b: _product(a, b), reps) for a, b in products)
    return {"bytes_per_s": max(summed, matvec), "threads_reading_GBps": summed / 1e9, "matvec_GBps": matvec / 1e9}


def matrix_peak(sizes: tuple[int, ...] = (1024, 2048), reps: int = 3) -> dict:
    """FLOP/s of large square float32 matrix products: the best of `reps` at each of `sizes`, large enough for the
    BLAS to reach its stride on every thread (which size is fastest differs from machine to machine)."""
    rates = {}
    for n in sizes:
        a, b = np.ones((n, n), np.float32), np.ones((n, n), np.float32)
        rates[n] = 2 * n**3 / _best_time(lambda a=a, b=b: _product(a, b), reps)
    return {"flops_per_s": max(rates.values()), "GFLOPs_by_size": {n: rate / 1e9 for n, rate in rates.items()}}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def measured_cpu(flops_per_s: float, bytes_per_s: float, how: str) -> Machine:
    """This CPU as probed (`how` says how): its float32 peak stands for every format (module docstring)."""
    return Machine(
        THIS_CPU, f"{cpu_name()}, {os.cpu_count()} cores", {d: flops_per_s for d in _formats(0, 0)}, bytes_per_s, how
    )


def probe_this_cpu(buffer_bytes: int = 2**28, sizes: tuple[int, ...] = (1024, 2048), reps: int = 3) -> Machine:
    """This CPU, measured now (about a second; scripts/bench.py probes with 1 GiB and squares up to 4,096)."""
    bandwidth = streaming_bandwidth(buffer_bytes, reps)
    peak = matrix_peak(sizes, reps)
    squares = ", ".join(f"{n}" for n in sizes)
    how = (
        f"probed now: reading {buffer_bytes / 2**20:,.0f} MiB ({bandwidth['threads_reading_GBps']:.1f} GB/s summed "
        f"by {os.cpu_count()} threads, {bandwidth['matvec_GBps']:.1f} GB/s by a matrix-vector product), float32 "
        f"square products of {squares} ({peak['flops_per_s'] / 1e9:.0f} GFLOP/s at best); the float32 peak for "
        f"every format, as our engine computes in float32"
    )
    return measured_cpu(peak["flops_per_s"], bandwidth["bytes_per_s"], how)
