"""Side-by-side benchmark: minitransformer vs transformers + torch on the same weights and threads.

    python scripts/bench.py                    # table on stdout, JSON in scripts/bench_<the CPU's kind>.json
    python scripts/bench.py --reps 3 --quick   # fewer sizes, for a smoke run
    python scripts/bench.py --family llama     # one family only
    python scripts/bench.py --busy 0           # without the busy column

One run measures both libraries and the machine's own limits, so every number is read as a
ratio: against transformers + torch (eager, with its KV cache), against our own no-cache path, and
against the rooflines (decode: the bytes a step must read, every weight plus the cached K and V,
over the streaming bandwidth; prefill: the larger of its FLOPs over the sgemm peak and its weights'
bytes over the streaming bandwidth, and which of the two binds). The machine's limits are measured
as they are defined: the streaming bandwidth as the best of several reads of a buffer far larger than
the caches on every thread the run uses (as STREAM does), the sgemm peak as the best of several large
square products of three sizes; both before the measures and again after them, the best of the two (the
machine's speed drifts over a run). A speed above 100% of a roofline means the roofline is wrong: the
benchmark says so. Where a prefill's time goes is shown stage by stage, ours beside torch's, with the
products with weights also timed on their own (what the BLAS does with those shapes, in the faster of
the two layouts). Medians of several repetitions, each measure's runs in turn with those of the measure it is read
against (ours and torch's, our clocked pass and the BLAS alone's products), so that the machine's speed, which drifts
from one minute to the next, hits both alike. Two models: GPT-2 124M (weights/gpt2 when present,
else a random-initialised one saved by transformers) and a Llama-shaped 0.54B with grouped-query attention
(20 layers, d_model 1536, 12 query heads over 2 key/value heads, SwiGLU width 4096, vocabulary
32,000, tied; random weights saved by transformers). The arithmetic of random weights is the same
as of trained ones; only the answers are noise.

Busy: the prefill and decode measures are taken again while other processes spin (--busy N, by default
as many as the cores: what a compiler, a test run or a browser leave of a laptop or a CI box), ours and
torch's in turn under the same load; and one product of attention on its own, quiet and busy (the scores
of one chunk of GPT-2's 128 query rows against 512 keys: q [12, 128, 64] x K^T [12, 64, 512], views of
one qkv), as our engine runs it (Tape.matmul), as the BLAS runs it with all its threads, and as torch
does. The machine's load average is printed beside the figures: "quiet" is quiet only where it is low.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a GPT-2 directory (default: weights/gpt2, else random 124M)")
    parser.add_argument("--family", choices=("gpt2", "llama", "both"), default="both", help="which models to measure")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both libraries")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and steps")
    parser.add_argument(
        "--json",
        type=Path,
        help="where the JSON goes (default: scripts/bench_<kind>.json, the kind of CPU: "
        "epyc, epyc_zen5, xeon, else cpu, _avx2 added where a VM hides AVX-512; one JSON for each kind of machine)",
    )
    parser.add_argument("--batch-only", action="store_true", help="only the batched generation (B = 1, 4, 16)")
    parser.add_argument(
        "--stored-only",
        action="store_true",
        help="only the ~1.2B bfloat16 checkpoint kept in its bytes against its float32 upcast",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=os.cpu_count(),
        metavar="N",
        help="spinning processes for the busy column (default: as many as the cores; 0: none)",
    )
    parser.add_argument(
        "--predict-from",
        type=Path,
        metavar="JSON",
        help="measure nothing: the roofline's prediction beside the measures of an earlier run's JSON, with the limits "
        "it probed (default: none)",
    )
    parser.add_argument(
        "--predicted-only",
        action="store_true",
        help="only the roofline's prediction (count --hardware this-cpu) beside our engine's measured time, and "
        "torch's bfloat16 forward on a GPU where CUDA is present; JSON in scripts/bench_predicted.json (or --json)",
    )
    return parser.parse_args()


ARGS = parse_args()
DEFAULT_JSON = ARGS.json is None  # the kind of CPU names it, once the CPU is read (cpu_kind)
# Thread pools are sized when the libraries load, so this must precede the imports below.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

from minitransformer import UserError, load_model  # noqa: E402
from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.engine.tape import Dims, Tape  # noqa: E402
from minitransformer.families.table import architecture_of, config_from_hf_dict  # noqa: E402
from minitransformer.verbs import hardware  # noqa: E402

if not ARGS.predict_from:  # measuring needs torch and transformers; --predict-from measures nothing and needs neither
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig

    torch.set_num_threads(ARGS.threads)


def run_times(fn, reps: int, warmup: int = 1, setup=None) -> list[float]:
    """Seconds of each of `reps` runs of fn, after `warmup` runs that are not timed; setup(), untimed, before each."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median_time(fn, reps: int, warmup: int = 1) -> float:
    return statistics.median(run_times(fn, reps, warmup))


def medians_in_turn(fns: list, reps: int) -> list[float]:
    """The median of `reps` runs of each of fns, run in turn (a b a b ...) after one warm-up each, so that a change in
    the machine's load hits them alike, each begun once the threads of the run before it have settled (`settle`); a
    fn that times itself returns its seconds, else its run is clocked."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, each in zip(fns, times):
            settle()
            start = time.perf_counter()
            seconds = fn()
            each.append(seconds if isinstance(seconds, float) else time.perf_counter() - start)
    return [statistics.median(each) for each in times]


# A library's threads keep spinning on their cores for a while after a call, waiting for the next (OpenBLAS's about
# 2**28 cycles, a tenth of a second; torch's OpenMP threads less): a run of the other library begun meanwhile shares its
# cores with them. Measured on the Xeon (medians of 9): torch's prefill of GPT-2's 5 positions took 135 ms begun right
# after ours, 107 ms begun 0.01 s after, 97 ms 0.05 s after, 55 to 58 ms 0.1 to 0.3 s after (ours after torch's: 82
# and 76 to 78 ms). So a run in turn waits until the process's other threads have used no CPU for SETTLE_QUIET_S, at
# most SETTLE_MAX_S (the same torch prefill then took 58 ms; the longest wait 0.20 s).
SETTLE_QUIET_S = 0.05
SETTLE_MAX_S = 2.0
SETTLED = {"waits": 0, "waited_s": 0.0, "longest_s": 0.0, "unsettled": 0}  # recorded in the JSON's "machine"


def other_threads_cpu_ticks() -> int | None:
    """CPU time used so far by this process's threads but the calling one, in clock ticks (Linux's /proc); None where
    there is no /proc."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    me, ticks = str(threading.get_native_id()), 0
    for task in tasks.iterdir():
        if task.name == me:
            continue
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a thread that ended since the folder was listed
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime and stime: stat's 14th and 15th fields, the 3rd is fields[0]
    return ticks


def settled_line(settled: dict) -> str:
    line = (
        f"Runs in turn began once the run before had settled (its threads idle for {SETTLE_QUIET_S:.2f} s): "
        f"{settled['waits']} waits, {settled['waited_s']:.1f} s in all, the longest {settled['longest_s']:.2f} s"
    )
    return line + (
        f"; {settled['unsettled']} did not settle within {SETTLE_MAX_S:.0f} s" if settled["unsettled"] else ""
    )


def sleep_then_ticks() -> int | None:
    time.sleep(SETTLE_QUIET_S)
    return other_threads_cpu_ticks()


def settle() -> None:
    """Wait until no other thread of this process has run for SETTLE_QUIET_S (the last run's library threads have
    stopped spinning), at most SETTLE_MAX_S; where there is no /proc, wait SETTLE_MAX_S / 10."""
    start = time.perf_counter()
    before = other_threads_cpu_ticks()
    if before is None:
        time.sleep(SETTLE_MAX_S / 10)
    else:
        while (now := sleep_then_ticks()) != before:
            if time.perf_counter() - start > SETTLE_MAX_S:
                SETTLED["unsettled"] += 1
                break
            before = now
    waited = time.perf_counter() - start
    SETTLED["waits"] += 1
    SETTLED["waited_s"] += waited
    SETTLED["longest_s"] = max(SETTLED["longest_s"], waited)


@contextmanager
def spinning(n: int):
    """n other processes, each keeping a core busy, while the measures inside run."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # until each has started spinning
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def weights_dir(family: str) -> Path:
    if family == "llama":
        return random_llama_dir()
    if ARGS.model:
        return ARGS.model
    if (ROOT / "weights" / "gpt2" / "model.safetensors").exists():
        return ROOT / "weights" / "gpt2"
    directory = Path(tempfile.gettempdir()) / "minitransformer-bench-gpt2-random"
    if not (directory / "model.safetensors").exists():
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).save_pretrained(directory)
    return directory


LLAMA_SHAPES = dict(
    num_hidden_layers=20,
    hidden_size=1536,
    num_attention_heads=12,
    num_key_value_heads=2,
    intermediate_size=4096,
    vocab_size=32000,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)


def random_llama_dir() -> Path:
    directory = Path(tempfile.gettempdir()) / "minitransformer-bench-llama-0.5b-random"
    if not list(directory.glob("*.safetensors")):
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(LlamaConfig(**LLAMA_SHAPES)).save_pretrained(directory)
    return directory


_EVICT: list = []  # a buffer read to push the operands out of the caches (evict_caches)


def evict_caches() -> None:
    """Read a buffer of 512 MiB, more than any CPU's last-level cache (Sapphire Rapids': up to 112.5 MB a socket),
    so that the next product reads its weight from memory."""
    if not _EVICT:
        _EVICT.append(np.ones(2**27, np.float32))
    np.add.reduce(_EVICT[0])


PROBE_SLICES = 8  # 128 MiB each: as long a read as a logits product's (GPT-2's 154 MB, the Llama-shaped's 197) ...
PROBE_WIDTH = 4096  # ... of rows of 4,096 (on the Zen 5 EPYC: 16,384 read 1% to 2% slower than 768 to 4,096)
_PROBE_READ: list = []  # a row and the slices of a 1 GiB weight, read beside each timed step (probe_read)


def probe_read(reads: list[float]) -> None:
    """One read of 1 GiB as a decode step reads a weight (a row times it stored [out, in], the BLAS's call on its
    threads), in PROBE_SLICES slices timed apart, each one's bytes/s appended to `reads`; it also empties the caches,
    as evict_caches does (each slice was last read 7/8 GiB before). The host's memory is faster at some moments than
    at others (on the Zen 5 EPYC, 41 to 66 GB/s within one run), and a product timed at many moments outran probes
    taken at a few (a logits product read at 72 GB/s, the best of the run's probes 66); a read of 1 GiB in one piece,
    16 ms, averages over more of the slow moments than a product of 2 to 3 ms (another logits product read at 66.9
    GB/s, the whole reads' best 66.4). So a decode breakdown probes beside every run it times, as often, at the same
    moments, in reads as long."""
    if not _PROBE_READ:
        weight = np.ones((2**30 // 4 // PROBE_WIDTH, PROBE_WIDTH), np.float32)
        _PROBE_READ.append((np.ones((1, PROBE_WIDTH), np.float32), np.array_split(weight, PROBE_SLICES)))
    row, slices = _PROBE_READ[0]
    for part in slices:
        start = time.perf_counter()
        np.matmul(row, part.T)
        reads.append(part.nbytes / (time.perf_counter() - start))


def from_memory(fn, reps: int, warmup: int = 1) -> float:
    """The fastest of `reps` runs, each after the caches are emptied (evict_caches): a product whose weight a pass
    reads from memory, as it reads it there."""
    return min(run_times(fn, reps, warmup, setup=evict_caches))


# --- the machine's limits --------------------------------------------------------------------------
def best_time(fn, reps: int) -> float:
    """The fastest of `reps` runs after a warm-up: a machine's limit is what it can do, not what it usually does."""
    return min(run_times(fn, reps))


def streaming_bandwidth(reps: int, threads: int) -> dict:
    """Bytes/s of a read of 1 GiB, far beyond any cache, the best of the probes and of `reps` runs each: every
    thread the run uses summing its own slice (STREAM's way), a row times the buffer as a weight in both layouts
    through our engine (the way a decode step reads a weight), the package's own probe (verbs/hardware.py), which
    `count --hardware this-cpu` runs on a smaller buffer; and the same row times the buffer by torch (its BLAS, MKL
    in its wheels, may read faster than NumPy's OpenBLAS: a roofline that torch's step outran read low). A roofline
    is the fastest the memory was seen to go, by anyone."""
    probed = hardware.streaming_bandwidth(2**30, reps, threads)
    if ARGS.predict_from or ARGS.predicted_only:
        return probed
    side = int((2**30 // 4) ** 0.5)
    matrix, row = torch.ones(side, side), torch.ones(1, side)
    torch_GBps = (
        max(matrix.numel() * 4 / best_time(lambda w=w: torch.matmul(row, w), reps) for w in (matrix, matrix.T)) / 1e9
    )
    return {**probed, "bytes_per_s": max(probed["bytes_per_s"], torch_GBps * 1e9), "torch_matvec_GBps": torch_GBps}


SQUARE_SIZES = (2048, 3072, 4096)
# [m, k] x [k, n] as a long prompt's products with weights are shaped (the Llama-shaped model's MLP and logits at 2,048
# positions): the BLAS's own call ran the MLP's at 214 GFLOP/s on the Zen 4 EPYC, where its squares made 209; on the
# Zen 5 the logits' made 500 where the squares made 490, and the BLAS alone's products at 2,048 positions had outrun
# a peak probed without them by 0.2%
PROMPT_SHAPES = ((2048, 1536, 4096), (2048, 4096, 1536), (2048, 1536, 32000))


def sgemm_peak(reps: int) -> dict:
    """FLOP/s of large square float32 matrix products: the best of `reps` at each of SQUARE_SIZES, all large enough
    for the BLAS to reach its stride on every thread (which size is fastest differs from machine to machine), and the
    best of the probes: the package's (verbs/hardware.py: through our engine, in column blocks on one BLAS thread
    each), the BLAS's own call on its threads, and torch's; and the BLAS's own call on products shaped as a long
    prompt's (PROMPT_SHAPES). A roofline is the fastest the machine was seen to go, by anyone: with our engine's squares
    alone (196 to 201 GFLOP/s on the EPYC, where the BLAS's own made 209), the BLAS alone's products of 1,024 rows
    and more outran their roofline by 2% to 4%; with the squares of all three, the Llama's at 2,048 rows by 0.6%."""
    probed = hardware.matrix_peak(SQUARE_SIZES, reps)
    if ARGS.predict_from or ARGS.predicted_only:
        return probed
    squares = {n: (np.ones((n, n), np.float32), torch.ones(n, n)) for n in SQUARE_SIZES}
    blas = {n: 2 * n**3 / best_time(lambda a=a: np.matmul(a, a), reps) / 1e9 for n, (a, _) in squares.items()}
    by_torch = {n: 2 * n**3 / best_time(lambda t=t: torch.matmul(t, t), reps) / 1e9 for n, (_, t) in squares.items()}
    shaped = {}
    for m, k, n in PROMPT_SHAPES:
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        shaped[f"{m}x{k}x{n}"] = 2 * m * k * n / best_time(lambda a=a, b=b: np.matmul(a, b), reps) / 1e9
    best = 1e9 * max(probed["flops_per_s"] / 1e9, *blas.values(), *by_torch.values(), *shaped.values())
    return {**probed, "flops_per_s": best, "blas_GFLOPs_by_size": blas, "torch_GFLOPs_by_size": by_torch,
            "blas_GFLOPs_by_prompt_shape": shaped}  # fmt: skip


def machine_limits(reps: int) -> dict:
    """The streaming bandwidth and the sgemm peak, probed once."""
    return {"bandwidth": streaming_bandwidth(reps, ARGS.threads), "sgemm": sgemm_peak(reps)}


# --- minitransformer ---------------------------------------------------------------------------------
def ours_decode(model, context: int, steps: int, ledger: bool) -> float:
    """Seconds per decoded token with the KV cache, after a prefill of `context` tokens."""
    ids = list(range(1000, 1000 + context))
    cache = model.new_cache(capacity=context + steps + 1)
    model.run(ids, cache=cache)
    start = time.perf_counter()
    for k in range(steps):
        phase = Phase("decode", k + 1, 1, context + k + 1) if ledger else None
        model.run([1000 + k], cache=cache, phase=phase)
    return (time.perf_counter() - start) / steps


def ours_no_cache_step(model, context: int) -> float:
    """Seconds per token without a cache: the whole context recomputed, logits for the last position."""
    ids = list(range(1000, 1000 + context))
    return median_time(lambda: model.run(ids, phase=Phase("decode", 1, context, context, cached=False)), 3)


def peak_rss_of_ours(directory: Path, context: int, steps: int) -> int:
    """Peak resident memory (bytes) of a fresh process that loads the model and generates, alone.

    Read from VmHWM: getrusage's ru_maxrss would report this (torch-laden) parent's size, which
    Linux carries into a child across fork + exec.
    """
    code = (
        "import minitransformer as mt\n"
        f"m = mt.load_model({str(directory)!r})\n"
        f"m.generate(list(range(1000, {1000 + context})), max_new_tokens={steps}, stop_at_eos=False)\n"
        "print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    return int(out.stdout.strip().splitlines()[-1])


# --- transformers + torch ----------------------------------------------------------------------------
def torch_decode(model, context: int, steps: int) -> float:
    ids = torch.arange(1000, 1000 + context).unsqueeze(0)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        start = time.perf_counter()
        for k in range(steps):
            out = model(torch.tensor([[1000 + k]]), past_key_values=out.past_key_values, use_cache=True)
        return (time.perf_counter() - start) / steps


def torch_prefill(model, ids: list[int]) -> None:
    with torch.no_grad():
        model(torch.tensor([ids]))


# --- busy: the same measures while other processes spin ---------------------------------------------
def measure_busy(ours, theirs, results: dict, steps: int, reps: int) -> None:
    """Each prefill and decode measure of `results` again, ours and torch's in turn, while ARGS.busy other processes
    spin: its "busy" entry."""

    with spinning(ARGS.busy):
        for p in results["prefill"]:
            ids = list(range(1000, 1000 + p["tokens"]))
            ours_s, torch_s = medians_in_turn([lambda: ours.logits(ids), lambda: torch_prefill(theirs, ids)], reps)
            p["busy"] = {"ours_s": ours_s, "torch_s": torch_s}
        for d in results["decode"]:
            context = d["context"]
            ours_s, torch_s = medians_in_turn([lambda: ours_decode(ours, context, steps, ledger=True),
                                               lambda: torch_decode(theirs, context, steps)], reps)  # fmt: skip
            d["busy"] = {"ours_s": ours_s, "torch_s": torch_s}


def per_head_product(reps: int) -> dict:
    """Milliseconds of one product of attention, quiet and busy: the scores of GPT-2's chunk of query rows 128..255
    against the first 512 keys, q [12, 128, 64] x K^T [12, 64, 512], each a view of one qkv [512, 2304] as the
    forward pass has them; through our engine's door (Tape.matmul, on the threads it chooses), as np.matmul with
    the BLAS's threads as they are (what the engine did before it chose), and torch.matmul on the same views."""
    qkv = np.random.default_rng(0).standard_normal((512, 2304)).astype(np.float32).reshape(512, 3, 12, 64)
    q, k = qkv[128:256, 0].swapaxes(0, 1), qkv[:, 1].swapaxes(0, 1)
    k_t = k.swapaxes(-1, -2)
    tape = Tape(Dims(T=128, t=512, D=768, H=12, F=3072, V=50257, R=1))  # no ledger, no watcher: the product alone
    q_torch, k_t_torch = torch.from_numpy(q), torch.from_numpy(k_t)
    fns = [lambda: tape.matmul("scores", q, k_t, "H T dh, H dh t -> H T t"), lambda: np.matmul(q, k_t),
           lambda: torch.matmul(q_torch, k_t_torch)]  # fmt: skip
    n = max(30, 10 * reps)  # a product takes a millisecond or so: many, for a steady median
    quiet = medians_in_turn(fns, n)
    with spinning(ARGS.busy):
        busy = medians_in_turn(fns, n)
    names = ("ours_ms", "blas_all_threads_ms", "torch_ms")
    return {"quiet": {name: 1e3 * t for name, t in zip(names, quiet)},
            "busy": {name: 1e3 * t for name, t in zip(names, busy)}}  # fmt: skip


# --- where a prefill's time goes ---------------------------------------------------------------------
# Three parts of a prefill, named alike in both libraries: the products with weights (every product but
# attention's), attention (its scores and mix products, and the scale, mask and softmax between them), and the rest
# (norms, activations, rotary, reshapes, residual adds, the embedding).
ATTENTION_OPS = ("scores", "scale", "mask", "softmax", "mix")
TORCH_WEIGHT_OPS = ("aten::addmm", "aten::mm", "aten::linear", "aten::matmul", "aten::bmm")
TORCH_ATTENTION_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
                       "aten::_scaled_dot_product_attention_math", "aten::softmax", "aten::_softmax")  # fmt: skip


def prefill_part(op: str, is_product: bool) -> str:
    return "attention" if op in ATTENTION_OPS else "weights" if is_product else "rest"


def decode_part(op: str, is_product: bool) -> str:
    """A decode step's parts: the prefill's, with the logits product and the cache append on their own."""
    return op if op in ("logits", "cache") else prefill_part(op, is_product)


@contextmanager
def stage_clock(parts: dict, part_of=prefill_part):
    """Time every stage of the passes run inside, by the clock read as each product or stage goes through the tape:
    the time since the one before is that stage's, added to its part (part_of(op, is_product)). A watcher would do
    the same, but a watched pass computes attention dense and nothing in place, which is not the pass being
    measured; this clock leaves the pass as it runs unwatched (in row chunks, in place) and adds one clock read per
    stage."""
    from minitransformer.engine import tape

    matmul, stage = tape.Tape.matmul, tape.Tape.stage
    last = [time.perf_counter()]

    def clocked(method, is_product: bool):
        def through_the_tape(self, op, *args, **kwargs):
            out = method(self, op, *args, **kwargs)
            now = time.perf_counter()
            parts[part_of(op, is_product)] += now - last[0]
            last[0] = now
            return out

        return through_the_tape

    tape.Tape.matmul, tape.Tape.stage = clocked(matmul, True), clocked(stage, False)
    try:
        last[0] = time.perf_counter()
        yield
    finally:
        tape.Tape.matmul, tape.Tape.stage = matmul, stage


def ours_breakdown(model, ids: list[int], phase, reps: int) -> dict:
    """Seconds of each part of our prefill (the fastest of `reps` clocked passes, stage_clock), with the whole
    clocked pass's time beside the parts, and the BLAS alone's seconds for the pass's products with weights
    (BlasAlone), each pass and each run of the BLAS alone in turn: the host's speed drifts from one minute to the
    next (on the Xeon here, GPT-2's products of 1,024 rows read 1.51 times the BLAS alone's, measured minutes apart,
    1.09 times in turn in the next full run), and a ratio of two measures must not read the drift. Each begins settled
    (`settle`): GPT-2's pass of 128 positions begun while the BLAS alone's threads still spun took 338 ms, 285 settled,
    its workers sharing the cores with them."""
    best: dict[str, float] = {}
    alone = BlasAlone(phase)
    for _ in range(reps):
        parts = {"weights": 0.0, "attention": 0.0, "rest": 0.0}
        settle()
        with stage_clock(parts):
            start = time.perf_counter()
            model.logits(ids)
            parts["total"] = time.perf_counter() - start
        if not best or parts["total"] < best["total"]:
            best = parts
        settle()
        alone.run()
    return {**best, "blas_alone": min(alone.seconds)}


DECODE_PARTS = ("weights", "logits", "attention", "cache", "rest")


def decode_breakdown(model, context: int, steps: int) -> dict:
    """Seconds of each part of a decode step after `context` positions (the fastest of `steps` clocked steps, the
    ledger on as in the decode measure: stage_clock, decode_part), the products with weights of such a step on their
    own (BLAS alone: the same operands, the model's own weights, as the step hands them to the BLAS, the fastest of
    `steps` runs) and the bytes each part must read, for its roofline (place_rooflines); and the streaming bandwidth
    probed beside them: the host's memory is not as fast from one minute to the next (on the EPYC, 45.5 GB/s before a
    quick run and 36.5 after it), and a logits product read at 38.0 GB/s between two probes of 37.7 and 37.8. So a
    read of the probe's (probe_read) follows every clocked step and precedes every run of the BLAS alone: each run
    then reads its weights from memory, and the probe reads at the moments the runs do."""
    from minitransformer.engine import tape

    cache = model.new_cache(capacity=context + steps + 1)
    model.run(list(range(1000, 1000 + context)), cache=cache)
    settle()
    best: dict[str, float] = {}
    reads: list[float] = []
    for k in range(steps - 1):
        probe_read(reads)
        parts = dict.fromkeys(DECODE_PARTS, 0.0)
        with stage_clock(parts, decode_part):
            start = time.perf_counter()
            model.run([1000 + k], cache=cache, phase=Phase("decode", k + 1, 1, context + k + 1))
            parts["total"] = time.perf_counter() - start
        if not best or parts["total"] < best["total"]:
            best = parts
    operands: dict[str, list] = {"weights": [], "logits": []}  # the last step's, as Tape.matmul receives them
    matmul = tape.Tape.matmul

    def keep(self, op, a, b, spec, bias=None):
        if b.ndim == 2:  # a weight
            operands["logits" if op == "logits" else "weights"].append((np.ones(a.shape, a.dtype), b))
        return matmul(self, op, a, b, spec, bias)

    tape.Tape.matmul = keep
    try:
        model.run([1000 + steps], cache=cache)
    finally:
        tape.Tape.matmul = matmul
    for part, pairs in operands.items():
        # each run from memory, as in a step (where the other weights pass through the caches between two logits
        # products): a weight left in a cache as large as some Xeons' outran the memory's roofline
        runs = run_times(lambda: [np.matmul(a, b) for a, b in pairs], steps, setup=lambda: probe_read(reads))
        best[f"{part}_blas_alone"] = min(runs)
        best[f"{part}_bytes"] = sum(b.nbytes for _, b in pairs)
    best["bandwidth_beside_Bps"] = max(streaming_bandwidth(3, ARGS.threads)["bytes_per_s"], *reads)
    return best


class BlasAlone:
    """The BLAS's seconds for a pass's products with weights on their own, run by run (`run`; `seconds`, one a run):
    each record's product, of its shapes, on arrays of ones, in the faster of the two layouts a family stores a weight
    in (GPT-2's [in, out], x @ W; the Llama family's [out, in], x @ W.T), summed over the records. Each product reads
    its W from memory (the caches emptied before it), as a pass reads each layer's own weights and as the decode
    breakdown's BLAS alone does: one W per shape repeated could stay in a last-level cache that holds it (a Xeon's
    holds a Llama layer's), a speed no pass has. (On the EPYC the two were alike: the Llama's products of 5 rows on
    one layer's weights repeated 20 times 220 ms, on 20 layers' 222; of 128 rows 802 and 795.) A run's sum, not the
    sum of each shape's fastest of all runs: that would add up the luck of several runs."""

    def __init__(self, phase) -> None:
        self.counts: dict[tuple, int] = {}
        for r in phase.records:
            if r.kind == "matmul" and r.op not in ATTENTION_OPS:
                key = (r.a_shape, r.b_shape)
                self.counts[key] = self.counts.get(key, 0) + 1
        self.operands = {(a, b): (np.ones(a, np.float32), np.ones(b, np.float32), np.ones(b[::-1], np.float32))
                         for a, b in self.counts}  # fmt: skip
        self.seconds: list[float] = []
        self.run(timed=False)  # a warm-up

    def run(self, timed: bool = True) -> None:
        seconds = 0.0
        for key, (x, stored_in_out, stored_out_in) in self.operands.items():
            fastest = min(from_memory(lambda: np.matmul(x, stored_in_out), 1, warmup=0),
                          from_memory(lambda: np.matmul(x, stored_out_in.T), 1, warmup=0))  # fmt: skip
            seconds += self.counts[key] * fastest
        if timed:
            self.seconds.append(seconds)


def torch_breakdown(model, ids: list[int]) -> dict:
    """Seconds of each part of transformers' prefill, by torch's profiler (self CPU time of each aten operator:
    the products with weights, attention (SDPA, or eager's matmuls of q and k inside it), the rest)."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(torch.tensor([ids]))  # warm
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            model(torch.tensor([ids]))
            total = time.perf_counter() - start
    parts = {"weights": 0.0, "attention": 0.0, "rest": 0.0, "total": total}
    for event in prof.key_averages():
        seconds = event.self_cpu_time_total / 1e6
        key = "attention" if event.key in TORCH_ATTENTION_OPS else "weights" if event.key in TORCH_WEIGHT_OPS else ""
        if key:
            parts[key] += seconds
    parts["rest"] = max(0.0, total - parts["weights"] - parts["attention"])
    return parts


def weight_flops(phase) -> int:
    """FLOPs of a pass's products with weights (every product but attention's scores and mix)."""
    return 2 * sum(r.macs for r in phase.records if r.kind == "matmul" and r.op not in ATTENTION_OPS)


def attention_flops(phase) -> int:
    """FLOPs of a pass's attention products (scores and mix), as computed (in row chunks where the pass ran so)."""
    return 2 * sum(r.macs for r in phase.records if r.kind == "matmul" and r.op in ATTENTION_OPS)


# --- predicted beside measured: the roofline `count --hardware` gives, against a measured pass -----------------------
PREDICTED_JSON = ROOT / "scripts" / "bench_predicted.json"
# A GPU's name as torch reports it -> the machine of the package's table (verbs/hardware.py) it is.
GPU_NAMES = (("H100", "h100-sxm"), ("H200", "h200"), ("B200", "b200"), ("A100", "a100-80gb"), ("MI300X", "mi300x"),
             ("4090", "rtx-4090"))  # fmt: skip


def load_average() -> str:
    """The machine's load, as `uptime` says it: the mean number of runnable processes over 1, 5 and 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def predicted_prefill(config, T: int, on, dtype: str = "float32") -> float:
    """The roofline of a prefill of T positions with every position's logits (as model.logits and transformers'
    forward compute it): our forward's ledger of that pass, from a shape-only run (the same records as a real one)."""
    from minitransformer.models.model import Model
    from minitransformer.verbs.roofline import phase_time

    phase = Phase("prefill", 0, T, T)
    Model.without_weights(config).run([0] * T, all_positions=True, phase=phase)
    return phase_time(config, phase, on, dtype).time_s


def predicted_decode(config, context: int, on, dtype: str = "float32") -> float:
    """The roofline of a decode step at `context` (one new position after context - 1 cached ones)."""
    from minitransformer.verbs.count import decode_at
    from minitransformer.verbs.roofline import pass_time

    step = decode_at(config, context)
    return pass_time(config, step.weighted(), step, on, dtype).time_s


def measure_ours(directory: Path, reps: int) -> dict:
    """Our engine's prefill (every position's logits) and decode step with the KV cache, measured (medians of `reps`),
    as measure() measures them, without transformers: for predictions_of."""
    from minitransformer.views.report import describe_model

    ours = load_model(directory)
    config = ours.config
    sizes = [5, 128] if ARGS.quick else [T for T in (5, 128, 512, 1024, 2048) if T <= config.n_positions]
    steps = 8 if ARGS.quick else 32
    prefill = []
    for T in sizes:
        ids = list(range(1000, 1000 + T))
        prefill.append({"tokens": T, "ours_s": median_time(lambda: ours.logits(ids), reps)})
    decode = [{"context": context, "ours_s": statistics.median(ours_decode(ours, context, steps, ledger=True)
                                                               for _ in range(reps))}
              for context in ([5, 128] if ARGS.quick else [5, 512])]  # fmt: skip
    return {"model": describe_model(config.to_dict(), str(directory)), "weights": str(directory),
            "config": config_json(directory), "prefill": prefill, "decode": decode}  # fmt: skip


def torch_on_gpu(directory: Path, reps: int) -> dict:
    """transformers' bfloat16 forward on the GPU, where torch has CUDA: its prefill and decode step measured beside the
    roofline of the machine of the package's table the GPU is (by its name); else it says why it did not run."""
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA in this torch (or no GPU): torch's bfloat16 forward on a GPU is not measured here"}
    name = torch.cuda.get_device_name()
    table = next((key for part, key in GPU_NAMES if part in name), None)
    on = hardware.MACHINES[table] if table else None
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).to("cuda").eval()
    config = load_model(directory).config

    def timed(fn) -> float:
        def run() -> None:
            fn()
            torch.cuda.synchronize()

        return median_time(run, reps)

    rows = []
    with torch.no_grad():
        for T in [T for T in (128, 512, 1024, 2048) if T <= config.n_positions]:
            ids = torch.arange(1000, 1000 + T, device="cuda").unsqueeze(0)
            rows.append({"measure": f"prefill T={T} (every position's logits)", "measured_s": timed(lambda: model(ids)),
                         "predicted_s": predicted_prefill(config, T, on, "bfloat16") if on else None})  # fmt: skip
        for context in (5, 512):
            cache = model(torch.arange(1000, 1000 + context, device="cuda").unsqueeze(0), use_cache=True)
            token = torch.tensor([[1000]], device="cuda")
            step = timed(lambda: model(token, past_key_values=copy.deepcopy(cache.past_key_values), use_cache=True))
            rows.append({"measure": f"decode step, context {context}", "measured_s": step,
                         "predicted_s": predicted_decode(config, context + 1, on, "bfloat16") if on else None})  # fmt: skip
    return {"gpu": name, "machine": table, "rows": rows}


def render_predicted(report: dict) -> list[str]:
    limits = report.get("limits", "this run's probed limits")
    lines = [f"Predicted by the roofline (count --hardware this-cpu: each product's max(2 MACs / peak, bytes / "
             f"bandwidth), float32, with {limits}) beside our engine measured; load average "
             f"{report['load']['before']} before the measures and {report['load']['after']} after", "",
             "| model | measure | predicted, ms | measured, ms | measured / predicted |", "|---|---|---:|---:|---:|"]  # fmt: skip
    for r in report["models"]:
        name = r.get("name") or r["model"].split(":")[0]
        for row in r["rows"]:
            lines.append(f"| {name} | {row['measure']} | {1e3 * row['predicted_s']:.2f} | {1e3 * row['measured_s']:.2f} "
                         f"| {row['measured_s'] / row['predicted_s']:.2f} |")  # fmt: skip
    gpu = report["gpu"]
    lines.append("")
    if "skipped" in gpu:
        lines.append(f"torch on a GPU: {gpu['skipped']}")
    else:
        machine = gpu["machine"] or "none: not in the table"
        lines.append(f"transformers + torch, bfloat16, on {gpu['gpu']} (roofline of {machine}):")
        for row in gpu["rows"]:
            predicted = row["predicted_s"]
            versus = f", predicted {1e3 * predicted:.2f} ms, {row['measured_s'] / predicted:.2f}x" if predicted else ""
            lines.append(f"  {row['measure']}: measured {1e3 * row['measured_s']:.2f} ms{versus}")
    return lines


def config_json(directory: Path) -> dict:
    """The config.json of a measured model, kept in the run's JSON: --predict-from needs the shapes, not the weights
    (the random ones live in the temporary folder, which a fresh clone or a reboot has not got)."""
    return json.loads((Path(directory) / "config.json").read_text())


def config_of(r: dict):
    """The config of a model an earlier run measured: the config.json its JSON keeps, or, from a run that kept none,
    the directory's own while it still exists; else one line saying what to run first."""
    if "config" in r:
        return config_from_hf_dict(r["config"], name=Path(r["weights"]).name)
    if (Path(r["weights"]) / "config.json").is_file():
        return load_model(r["weights"]).config
    raise UserError(
        f"{r['weights']} is gone and that run's JSON does not keep its config.json: run `python scripts/bench.py "
        f"--predicted-only` to measure afresh"
    )


def short_name(config) -> str:
    """A measured model as the tables name it: "GPT-2 124M", "Llama-shaped 0.54B" (its parameters, closed form)."""
    parameters = architecture_of(config).formulas.parameters(config)
    size = f"{parameters / 1e9:.2f}B" if parameters >= 5e8 else f"{parameters / 1e6:.0f}M"
    return f"{'GPT-2' if config.family == 'gpt2' else 'Llama-shaped'} {size}"


def predictions_of(models: list[dict], cpu) -> list[dict]:
    """Our engine's measures (measure() or measure_ours()) beside what the roofline of this CPU's probed limits
    predicts for the same passes (`count --hardware this-cpu`: each product's max(2 MACs / peak, bytes / bandwidth))."""
    steps = 8 if ARGS.quick else 32
    out = []
    for r in models:
        config = config_of(r)
        rows = [{"measure": f"prefill T={p['tokens']} (every position's logits)", "measured_s": p["ours_s"],
                 "predicted_s": predicted_prefill(config, p["tokens"], cpu)} for p in r["prefill"]]  # fmt: skip
        rows += [{"measure": f"decode step, context {d['context']}", "measured_s": d["ours_s"],
                  "predicted_s": predicted_decode(config, d["context"] + (steps + 1) // 2, cpu)} for d in r["decode"]]  # fmt: skip
        out.append({"model": r["model"], "name": short_name(config), "rows": rows})
    return out


def main_predicted() -> None:
    """--predicted-only: the machine's limits probed before and after, our engine measured beside the roofline."""
    reps = ARGS.reps
    load_before = load_average()
    before = machine_limits(max(reps, 3))
    families = ("gpt2", "llama") if ARGS.family == "both" else (ARGS.family,)
    measured = [measure_ours(weights_dir(family), reps) for family in families]
    after = machine_limits(max(reps, 3))
    cpu = this_cpu(before, after)  # the best of the probes, as the full benchmark's rooflines
    report = {"machine": {"cpu": _cpu_name(), "cpu_record": cpu_record(), "cores": os.cpu_count(), "threads": ARGS.threads,
                          "numpy": np.__version__, "torch": torch.__version__, "this_cpu": cpu.to_dict(),
                          "probes": {"before": probe_summary(before), "after": probe_summary(after)}},
              "load": {"before": load_before, "after": load_average()}, "models": predictions_of(measured, cpu),
              "gpu": torch_on_gpu(weights_dir(families[-1]), reps)}  # fmt: skip
    path = PREDICTED_JSON if DEFAULT_JSON else ARGS.json  # --json given: there
    path.write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(render_predicted(report)))
    print(f"\nJSON: {path}")


def this_cpu(before: dict, after: dict, beside: tuple[float, ...] = ()):
    """This CPU as the package's roofline sees it, from the best of the probes (`beside`: bandwidths probed between
    them, bytes/s)."""
    bandwidth = max(before["bandwidth"]["bytes_per_s"], after["bandwidth"]["bytes_per_s"], *beside)
    peak = max(before["sgemm"]["flops_per_s"], after["sgemm"]["flops_per_s"])
    how = (f"probed by scripts/bench.py: streaming read of 1 GiB {bandwidth / 1e9:.1f} GB/s, float32 squares of "
           f"{', '.join(map(str, SQUARE_SIZES))} {peak / 1e9:.0f} GFLOP/s at best")  # fmt: skip
    return hardware.measured_cpu(peak, bandwidth, how)


def main_predict_from(path: Path) -> None:
    """--predict-from: an earlier run's measures of our engine beside the roofline of the limits that run probed."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{path} is not a bench run's JSON ({err}); `python scripts/bench.py` writes one") from None
    m = earlier["machine"]
    cpu = hardware.measured_cpu(m["sgemm_GFLOPs"] * 1e9, m["bandwidth_GBps"] * 1e9,
                                f"{m['bandwidth_GBps']:.1f} GB/s, {m['sgemm_GFLOPs']:.0f} GFLOP/s")  # fmt: skip
    loads = m.get("load_average")
    load = {"before": f"{loads['before']:.2f} (1 minute)", "after": f"{loads['after']:.2f}"} if loads else {
        "before": "not recorded", "after": "not recorded"}  # fmt: skip
    print("\n".join(render_predicted({"models": predictions_of(earlier["models"], cpu), "load": load,
                                       "limits": f"the limits probed by the run of {path.name} ({cpu.source})",
                                       "gpu": {"skipped": "not measured by that run"}})))  # fmt: skip


# --- a bfloat16 checkpoint in its own bytes ---------------------------------------------------------------
# Llama 3.2 1B's shapes: 1.24 B parameters, 2.47 GB in bfloat16, its tied 128,256 x 2,048 embedding a quarter of it.
STORED_SHAPES = dict(n_layer=16, D=2048, H=32, Hkv=8, F=8192, V=128256)


def random_two_byte_llama_dir(stored: str = "BF16") -> Path:
    """A Llama-shaped checkpoint of ~1.2B random parameters in bfloat16 (stored "BF16") or float16 ("F16": the same
    draw), written tensor by tensor (never all in memory) as safetensors lays it out, so that writing it needs no more
    memory than its largest tensor."""
    import ml_dtypes

    dtype = {"BF16": ml_dtypes.bfloat16, "F16": np.float16}[stored]
    directory = Path(tempfile.gettempdir()) / f"minitransformer-bench-llama-1b-{stored.lower()}"
    if (directory / "model.safetensors").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    s = STORED_SHAPES
    dh = s["D"] // s["H"]
    shapes = {"model.embed_tokens.weight": (s["V"], s["D"]), "model.norm.weight": (s["D"],)}
    for i in range(s["n_layer"]):
        p = f"model.layers.{i}."
        shapes |= {p + "input_layernorm.weight": (s["D"],), p + "post_attention_layernorm.weight": (s["D"],),
                   p + "self_attn.q_proj.weight": (s["H"] * dh, s["D"]), p + "self_attn.k_proj.weight": (s["Hkv"] * dh, s["D"]),
                   p + "self_attn.v_proj.weight": (s["Hkv"] * dh, s["D"]), p + "self_attn.o_proj.weight": (s["D"], s["H"] * dh),
                   p + "mlp.gate_proj.weight": (s["F"], s["D"]), p + "mlp.up_proj.weight": (s["F"], s["D"]),
                   p + "mlp.down_proj.weight": (s["D"], s["F"])}  # fmt: skip
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": stored, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    with open(directory / "model.safetensors", "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for shape in shapes.values():
            values = np.ones(shape, np.float32) if len(shape) == 1 else rng.standard_normal(shape, np.float32) * 0.02
            f.write(values.astype(dtype).view("<u2").tobytes())
    config = {"model_type": "llama", "num_hidden_layers": s["n_layer"], "hidden_size": s["D"],
              "num_attention_heads": s["H"], "num_key_value_heads": s["Hkv"], "intermediate_size": s["F"],
              "vocab_size": s["V"], "max_position_embeddings": 2048, "tie_word_embeddings": True,
              "rope_theta": 500000.0, "torch_dtype": np.dtype(dtype).name}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def stored_run(directory: Path, weights: str, context: int, steps: int) -> dict:
    """A fresh process that loads the checkpoint (weights="stored" or "float32"), prefills `context` tokens and decodes
    `steps`: seconds to load, seconds per decoded token, and its peak resident memory (VmHWM, which counts the
    file's pages mapped in as a pass reads them)."""
    code = (
        "import time, minitransformer as mt\n"
        "t0 = time.perf_counter()\n"
        f"m = mt.load_model({str(directory)!r}, weights={weights!r})\n"
        "t1 = time.perf_counter()\n"
        f"cache = m.new_cache(capacity={context + steps + 1})\n"
        f"m.run(list(range(1000, {1000 + context})), cache=cache)\n"
        "t2 = time.perf_counter()\n"
        f"for k in range({steps}):\n"
        "    m.run([1000 + k], cache=cache)\n"
        "t3 = time.perf_counter()\n"
        "hwm = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) * 1024\n"
        f"print(t1 - t0, t2 - t1, (t3 - t2) / {steps}, hwm)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    load, prefill, decode, hwm = out.stdout.split()
    return {"load_s": float(load), "prefill_s": float(prefill), "decode_s_per_token": float(decode),
            "peak_rss_bytes": int(hwm)}  # fmt: skip


def settle_source() -> str:
    """`settle` and what it calls, as source for a child process whose runs in turn must begin as this one's do."""
    constants = f"SETTLE_QUIET_S, SETTLE_MAX_S, SETTLED = {SETTLE_QUIET_S!r}, {SETTLE_MAX_S!r}, {dict(SETTLED)!r}\n"
    functions = (other_threads_cpu_ticks, sleep_then_ticks, settle)
    return "import threading, time\nfrom pathlib import Path\n" + constants + "".join(map(inspect.getsource, functions))


def stored_in_turn(directory: Path, context: int, steps: int) -> dict:
    """Both modes loaded in one fresh process, their decode steps taken in turn (stored, float32, stored, ...) after
    one prefill of `context` tokens each, each step begun settled (`settle`): the median seconds of each mode's step,
    and the median of the ratios of steps taken side by side, which a shared machine's load hits alike.

    Settled, as the benchmark's other runs in turn are: a float32 step's products run on the BLAS's threads, which
    spin for a tenth of a second after it, and a stored step begun meanwhile shares a core with them, its blocks
    being widened on the engine's own threads (measured on the Zen 5, medians of 12 steps in turn: stored 0.201 and
    0.203 s a step unsettled, 0.186 and 0.189 settled; float32 0.147 and 0.155, 0.163 and 0.152)."""
    code = settle_source() + (
        "import os, statistics, minitransformer as mt\n"
        f"models = [mt.load_model({str(directory)!r}, weights=w) for w in ('stored', 'float32')]\n"
        f"caches = [m.new_cache(capacity={context + steps + 2}) for m in models]\n"
        "for m, c in zip(models, caches):\n"
        f"    m.run(list(range(1000, {1000 + context})), cache=c)\n"
        "    m.run([999], cache=c)\n"  # a first step each, untimed: the pages of the weights mapped in
        "times, cpu = [[], []], [[], []]\n"
        f"for k in range({steps}):\n"
        "    for m, c, t, u in zip(models, caches, times, cpu):\n"
        "        settle()\n"
        "        start, used = time.perf_counter(), sum(os.times()[:2])\n"
        "        m.run([1000 + k], cache=c)\n"
        "        t.append(time.perf_counter() - start)\n"
        "        u.append(sum(os.times()[:2]) - used)\n"
        "print(*(statistics.median(x) for x in (*times, *cpu)), statistics.median(a / b for a, b in zip(*times)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    stored, upcast, stored_cpu, upcast_cpu, ratio = (float(x) for x in out.stdout.split())
    # the CPU seconds of a step (all its threads'), beside the clock's: what a machine whose cores other processes
    # share stretches least
    return {"stored_s_per_token": stored, "float32_s_per_token": upcast, "stored_over_float32": ratio,
            "stored_cpu_s_per_token": stored_cpu, "float32_cpu_s_per_token": upcast_cpu, "settled": True}  # fmt: skip


def measure_stored(context: int = 16, steps: int = 8) -> dict:
    """The ~1.2B bfloat16 checkpoint kept in its bytes against its float32 upcast: peak memory over the file's size
    and decode speed, each in a fresh process, then the two modes' decode steps in turn in one process (their ratio,
    read side by side), with the load average beside them (the machine is shared)."""
    directory = random_two_byte_llama_dir()
    file_bytes = sum(f.stat().st_size for f in directory.glob("*.safetensors"))
    load_before = os.getloadavg()
    runs = {weights: stored_run(directory, weights, context, steps) for weights in ("stored", "float32")}
    # the same draw in float16, kept stored: widened by moving its bits (precision.widened), not by ml_dtypes' cast
    runs["stored, a float16 file"] = stored_run(random_two_byte_llama_dir("F16"), "stored", context, steps)
    for r in runs.values():
        r["peak_rss_over_file"] = r["peak_rss_bytes"] / file_bytes  # the two files' sizes differ by a header's bytes
    in_turn = stored_in_turn(directory, context, 2 * steps)
    return {"model": "Llama-shaped 1.24B, bfloat16, random", "file_bytes": file_bytes, "context": context,
            "steps": steps, "load_average": [load_before, os.getloadavg()], "runs": runs,
            "in_turn": in_turn}  # fmt: skip


def render_stored(r: dict) -> list[str]:
    (b1, _, _), (a1, _, _) = r["load_average"]
    lines = [f"A bfloat16 checkpoint in its own bytes (and the same draw in float16, where a row says so): {r['model']}, "
             f"file {r['file_bytes'] / 1e9:.2f} GB; a prefill "
             f"of {r['context']} tokens, {r['steps']} decode steps, each mode in a fresh process (load average "
             f"{b1:.2f} before, {a1:.2f} after)", "",
             "| weights | peak resident memory | / file size | load | decode, s/token |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for weights, x in r["runs"].items():
        lines.append(f"| {weights} | {x['peak_rss_bytes'] / 1e9:.2f} GB | {x['peak_rss_over_file']:.2f} | "
                     f"{x['load_s']:.1f} s | {x['decode_s_per_token']:.3f} |")  # fmt: skip
    if "in_turn" in r:  # runs before it was measured lack it
        t = r["in_turn"]
        settled = ", each begun settled" if t.get("settled") else ""
        lines += ["", f"Both modes in one process, their decode steps in turn{settled}: stored "
                      f"{t['stored_s_per_token']:.3f} s a token, float32 {t['float32_s_per_token']:.3f} s (medians); "
                      "stored / float32, step beside step: "
                      f"{t['stored_over_float32']:.2f}x"]  # fmt: skip
        if "stored_cpu_s_per_token" in t:
            lines[-1] += (f"; CPU seconds a step (its threads' together) {t['stored_cpu_s_per_token']:.3f} stored, "
                          f"{t['float32_cpu_s_per_token']:.3f} float32")  # fmt: skip
    return lines


def main() -> None:
    if DEFAULT_JSON:  # one JSON for each kind of machine; a run of one part alone goes beside, not over it
        part = "_stored" if ARGS.stored_only else ""
        ARGS.json = (ROOT / "scripts" if not part else Path(tempfile.gettempdir())) / f"bench_{cpu_kind()}{part}.json"
    if ARGS.predict_from:
        try:
            main_predict_from(ARGS.predict_from)
        except UserError as err:
            print(f"bench.py: {err}", file=sys.stderr)
            sys.exit(2)
        return
    if ARGS.predicted_only:
        main_predicted()
        return
    if ARGS.stored_only:
        stored = measure_stored()
        ARGS.json.write_text(json.dumps({"machine": {"cpu_record": cpu_record()}, "stored": stored}, indent=1) + "\n")
        print(describe_cpu(cpu_record()))
        print(f"JSON: {ARGS.json}")
        print("\n".join(render_stored(stored)))
        return
    reps = ARGS.reps
    # The machine's limits, probed before the measures and again after them: its speed drifts in the minutes
    # between (a clock that boosts, a neighbour on the host), and a roofline is the fastest it was seen to go.
    load_before = os.getloadavg()[0]
    before = machine_limits(max(reps, 3))
    product = per_head_product(reps) if ARGS.busy and not ARGS.batch_only else None
    families = ("gpt2", "llama") if ARGS.family == "both" else (ARGS.family,)
    models = [] if ARGS.batch_only else [measure(weights_dir(family), reps) for family in families]
    batches = [measure_batches(weights_dir(family), reps) for family in families]
    after = machine_limits(max(reps, 3))
    beside = [d["breakdown"]["bandwidth_beside_Bps"] for r in models for d in r["decode"]]
    bandwidth = max(before["bandwidth"]["bytes_per_s"], after["bandwidth"]["bytes_per_s"], *beside)
    peak = max(before["sgemm"]["flops_per_s"], after["sgemm"]["flops_per_s"])
    for r in models:
        place_rooflines(r, bandwidth, peak)
    for b in batches:
        for row in b["rows"]:
            row["roofline_tok_s"] = row["batch"] * bandwidth / row["decode_step_bytes"]
    report = {
        "machine": {"cpu": _cpu_name(), "cpu_record": cpu_record(), "cores": os.cpu_count(), "threads": ARGS.threads,
                    "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                    "bandwidth_GBps": bandwidth / 1e9, "sgemm_GFLOPs": peak / 1e9,
                    "probes": {"before": probe_summary(before), "after": probe_summary(after),
                               "beside_decode_GBps": [b / 1e9 for b in beside]},
                    "load_average": {"before": load_before, "after": os.getloadavg()[0]},
                    "busy_processes": ARGS.busy, "settled": SETTLED},
        "per_head_product": product,
        "models": models,
        "batches": batches,
    }  # fmt: skip
    if not ARGS.quick and not ARGS.batch_only:
        report["stored"] = measure_stored()
    report["roofline_bugs"] = roofline_bugs(report)
    report["predicted"] = {
        "models": predictions_of(models, this_cpu(before, after, tuple(beside))),
        "gpu": {"skipped": "torch on a GPU is measured by --predicted-only"},
        "load": {"before": f"{load_before:.2f} (1 minute) on {os.cpu_count()} cores", "after": load_average()},
    }
    ARGS.json.write_text(json.dumps(report, indent=1) + "\n")
    print(render(report))
    for b in batches:
        print("\n" + "\n".join(render_batches(b)))
    if "stored" in report:
        print("\n" + "\n".join(render_stored(report["stored"])))
    print("\n" + "\n".join(render_predicted(report["predicted"])))
    for bug in report["roofline_bugs"]:
        print(f"\nROOFLINE BUG: {bug}")
    print(f"\nJSON: {ARGS.json}")


def probe_summary(limits: dict) -> dict:
    bw = limits["bandwidth"]
    return {"threads_reading_GBps": bw["threads_reading_GBps"], "matvec_GBps": bw["matvec_GBps"],
            **({"torch_matvec_GBps": bw["torch_matvec_GBps"]} if "torch_matvec_GBps" in bw else {}),
            "sgemm_GFLOPs_by_size": limits["sgemm"]["GFLOPs_by_size"],
            **{k: limits["sgemm"][k] for k in ("blas_GFLOPs_by_size", "torch_GFLOPs_by_size", "blas_GFLOPs_by_prompt_shape")
               if k in limits["sgemm"]}}  # fmt: skip


def place_rooflines(r: dict, bandwidth: float, peak: float) -> None:
    """Each measure of model report `r` gets its roofline from the work it must do (stored by measure) and the
    machine's limits: a decode step's bytes over the bandwidth; a prefill's FLOPs over the sgemm peak or its
    weights' bytes over the bandwidth, whichever is longer; the same for its products with weights alone."""
    for d in r["decode"]:
        d["roofline_s"] = d["bytes_read"] / bandwidth
        b = d["breakdown"]
        for part in ("weights", "logits", "kv"):
            b[f"{part}_roofline_s"] = b[f"{part}_bytes"] / bandwidth
    for p in r["prefill"]:
        compute_s, memory_s = p["flops"] / peak, r["weight_bytes"] / bandwidth  # every weight read at least once
        p.update(compute_s=compute_s, memory_s=memory_s, roofline_s=max(compute_s, memory_s),
                 binds="compute" if compute_s >= memory_s else "memory")  # fmt: skip
        b = p["breakdown"]
        b["weights_roofline_s"] = max(b["weight_flops"] / peak, memory_s)
        b["attention_roofline_s"] = b["attention_flops"] / peak


def roofline_bugs(report: dict) -> list[str]:
    """Every measure that ran faster than its roofline: the roofline, not the speed, is then wrong."""
    bugs = []
    for r in report["models"]:
        for d in r["decode"]:
            if d["roofline_s"] > d["ours_s"] or d["roofline_s"] > d["torch_s"]:
                bugs.append(f"{r['model'].split(':')[0]} decode at context {d['context']} ran faster than its "
                            f"memory roofline: the streaming-bandwidth probe read low")  # fmt: skip
            b = d["breakdown"]
            for part in ("weights", "logits"):
                if b[f"{part}_roofline_s"] > min(b[part], b[f"{part}_blas_alone"]):
                    bugs.append(f"{r['model'].split(':')[0]} decode at context {d['context']}: the {part} products "
                                f"ran faster than their memory roofline")  # fmt: skip
        for p in r["prefill"]:
            if p["roofline_s"] > p["ours_s"] or p["roofline_s"] > p["torch_s"]:
                bugs.append(f"{r['model'].split(':')[0]} prefill T={p['tokens']} ran faster than its roofline "
                            f"({p['binds']}-bound): a probe read low")  # fmt: skip
            b = p["breakdown"]
            if b["weights_roofline_s"] > min(b["ours"]["weights"], b["torch"]["weights"], b["weights_blas_alone_s"]):
                bugs.append(f"{r['model'].split(':')[0]} prefill T={p['tokens']}: products with weights ran faster "
                            f"than their roofline")  # fmt: skip
            # Ours only: torch's kernel may skip another share of the masked scores than our row chunks do.
            if b["attention_roofline_s"] > b["ours"]["attention"]:
                bugs.append(f"{r['model'].split(':')[0]} prefill T={p['tokens']}: attention ran faster than the "
                            f"roofline of its products")  # fmt: skip
    for b in report["batches"]:
        for row in b["rows"]:
            if row["ours_tok_s"] > row["roofline_tok_s"] or row["torch_tok_s"] > row["roofline_tok_s"]:
                bugs.append(f"batch of {row['batch']} ran faster than its memory roofline")
    return bugs


def measure(directory: Path, reps: int) -> dict:
    """Every measure of one model, ours and transformers', in this process, with the work each must do (FLOPs,
    bytes) for place_rooflines."""
    contexts = [5, 128] if ARGS.quick else [5, 512]
    steps = 8 if ARGS.quick else 32

    load_ours = median_time(lambda: load_model(directory), reps)
    ours = load_model(directory)
    # Every prefill length up to the context: 2,048 where the model has it (the Llama-shaped one).
    prefill_sizes = [5, 128] if ARGS.quick else [T for T in (5, 128, 512, 1024, 2048) if T <= ours.config.n_positions]
    load_torch = median_time(lambda: AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32), reps)
    theirs = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    weight_bytes = sum(p.numel() for p in theirs.parameters()) * 4

    results = {"prefill": [], "decode": []}
    for T in prefill_sizes:
        ids = list(range(1000, 1000 + T))
        phase = Phase("prefill", 0, T, T)
        ours.run(ids, all_positions=True, phase=phase)
        flops = phase.flops
        ours_s, torch_s = medians_in_turn([lambda: ours.logits(ids), lambda: torch_prefill(theirs, ids)], reps)
        ours_parts = ours_breakdown(ours, ids, phase, reps)
        breakdown = {"ours": ours_parts, "torch": torch_breakdown(theirs, ids),
                     "weights_blas_alone_s": ours_parts.pop("blas_alone"), "weight_flops": weight_flops(phase),
                     "attention_flops": attention_flops(phase)}  # fmt: skip
        results["prefill"].append({"tokens": T, "ours_s": ours_s, "torch_s": torch_s, "flops": flops,
                                   "breakdown": breakdown})  # fmt: skip

    config = ours.config
    for context in contexts:
        on_s, off_s, torch_s = medians_in_turn([lambda: ours_decode(ours, context, steps, ledger=True),
                                                lambda: ours_decode(ours, context, steps, ledger=False),
                                                lambda: torch_decode(theirs, context, steps)], reps)  # fmt: skip
        no_cache = ours_no_cache_step(ours, context)
        # A decode step must read every weight once and the cached K and V of every earlier position.
        kv_bytes = 2 * config.n_layer * context * config.n_kv_head * config.d_head * 4
        breakdown = {**decode_breakdown(ours, context, steps), "kv_bytes": kv_bytes}
        results["decode"].append({"context": context, "ours_s": on_s,
                                  "ours_no_ledger_s": off_s, "torch_s": torch_s,
                                  "ours_no_cache_s": no_cache, "bytes_read": weight_bytes + kv_bytes,
                                  "breakdown": breakdown})  # fmt: skip
    if ARGS.busy:
        measure_busy(ours, theirs, results, steps, reps)

    rss = peak_rss_of_ours(directory, contexts[-1], steps)
    from minitransformer.views.report import describe_model

    return {"model": describe_model(config.to_dict(), str(directory)), "weights": str(directory),
            "config": config_json(directory), "weight_bytes": weight_bytes, "load": {"ours_s": load_ours, "torch_s": load_torch},
            "peak_rss_bytes": rss, **results}  # fmt: skip


# --- batched generation ------------------------------------------------------------------------------
BATCH_PROMPT_LENGTHS = (5, 17, 9, 30)  # mixed lengths, cycled: every batch but B = 1 is left-padded


def batch_prompts(B: int) -> list[list[int]]:
    return [list(range(1000 + 7 * b, 1000 + 7 * b + BATCH_PROMPT_LENGTHS[b % 4])) for b in range(B)]


def measure_batches(directory: Path, reps: int) -> dict:
    """Tokens per second generating B prompts of mixed lengths together, N new tokens each (greedy, no early stop):
    ours (generate with a list, ledger on) against transformers' batched generate with left padding, and the
    roofline of a batched decode step: the weights read once for all B rows, plus each row's cached K and V."""
    n_new = 8 if ARGS.quick else 32
    ours = load_model(directory)
    theirs = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    config = ours.config
    weight_bytes = sum(p.numel() for p in theirs.parameters()) * 4
    pad_id = config.eos_token_ids[0] if config.eos_token_ids else 0
    rows = []
    for B in (1, 4, 16):
        prompts = batch_prompts(B)
        T = max(map(len, prompts))
        ids = [[pad_id] * (T - len(p)) + p for p in prompts]
        mask = [[0] * (T - len(p)) + [1] * len(p) for p in prompts]

        def torch_generate():
            with torch.no_grad():
                theirs.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=n_new,
                                min_new_tokens=n_new, do_sample=False, pad_token_id=pad_id)  # fmt: skip

        ours_s, torch_s = medians_in_turn(
            [lambda: ours.generate(prompts, max_new_tokens=n_new, stop_at_eos=False), torch_generate], reps
        )
        context = T + n_new // 2  # the mean context of the decode steps
        step_bytes = weight_bytes + B * 2 * config.n_layer * context * config.n_kv_head * config.d_head * 4
        rows.append({"batch": B, "prompt_tokens": T, "new_tokens": n_new, "ours_s": ours_s, "torch_s": torch_s,
                     "ours_tok_s": B * n_new / ours_s, "torch_tok_s": B * n_new / torch_s,
                     "decode_step_bytes": step_bytes})  # fmt: skip
    return {"model": str(directory), "weight_bytes": weight_bytes, "rows": rows}


def render_batches(r: dict) -> list[str]:
    lines = [f"Batched generation, {r['model']}: prompts of mixed lengths, left-padded, "
             f"{r['rows'][0]['new_tokens']} new tokens each", "",
             "| batch | minitransformer tok/s | transformers + torch tok/s | ours vs torch | roofline tok/s "
             "(decode step) |", "|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in r["rows"]:
        lines.append(f"| {row['batch']} | {row['ours_tok_s']:.1f} | {row['torch_tok_s']:.1f} | "
                     f"{row['ours_tok_s'] / row['torch_tok_s']:.2f}x | {row['roofline_tok_s']:.0f} |")  # fmt: skip
    return lines


def _cpu_name() -> str:
    return _cpuinfo().get("model name") or platform.processor() or "unknown"


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


# The CPU flags the libraries' kernels choose their code by: AVX2 and FMA (OpenBLAS's Haswell kernels), AVX-512
# (SkylakeX's, MKL's), bfloat16 and float16 in AVX-512 and the AMX tiles (what a Sapphire Rapids adds: torch's
# oneDNN uses them, OpenBLAS's sgemm does not)
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16")


def cpu_kind() -> str:
    """Which kind of machine a run was on, the JSON's name: "epyc" (family 25, a Zen 4), "epyc_zen5" (family 26 and
    later: twice a Zen 4's vector width, so a JSON of its own), "xeon", else "cpu"; an EPYC whose virtual machine
    hides AVX-512 (its flags list no avx512f) adds "_avx2": OpenBLAS and torch then take their AVX2 kernels, half the
    width, and its tables are not those of the same CPU with AVX-512."""
    name, cpuinfo = _cpu_name(), _cpuinfo()
    if "EPYC" in name:
        family = cpuinfo.get("cpu family", "")
        kind = "epyc_zen5" if family.isdigit() and int(family) >= 26 else "epyc"
        return kind + ("_avx2" if "flags" in cpuinfo and "avx512f" not in cpuinfo["flags"].split() else "")
    return "xeon" if "Xeon" in name else "cpu"


def cpu_record() -> dict:
    """The CPU and the BLAS libraries a run measured, so that a JSON says which machine it came from: the model (name,
    family and model number), its kernel flags (present or not), its cores, NumPy's BLAS as threadpoolctl sees it
    loaded (library, version, the kernels it chose for this CPU) and torch's (its build's BLAS, oneDNN's version, the
    vector code it chose)."""
    from threadpoolctl import threadpool_info

    cpuinfo = _cpuinfo()
    flags = set(cpuinfo.get("flags", "").split())
    numpy_blas = [{key: lib.get(key) for key in ("internal_api", "version", "architecture", "threading_layer")}
                  for lib in threadpool_info() if lib.get("user_api") == "blas"]  # fmt: skip
    record = {"kind": cpu_kind(), "model": _cpu_name(), "vendor": cpuinfo.get("vendor_id", ""),
              # the name alone ("AMD EPYC") does not tell one generation from the next; family and model number do
              "family": cpuinfo.get("cpu family", ""), "model_number": cpuinfo.get("model", ""),
              "flags": {flag: flag in flags for flag in KERNEL_FLAGS}, "cores": os.cpu_count(),
              "numpy_blas": numpy_blas,
              # set, it overrides OpenBLAS's own choice of kernels (some machines here set Haswell's, half the vector)
              "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}  # fmt: skip
    if not ARGS.predict_from:
        build = torch.__config__.show()
        blas = next(
            (part.split("=", 1)[1] for part in build.replace(",", " ").split() if part.startswith("BLAS_INFO=")), ""
        )
        record["torch_blas"] = {"blas": blas, "libraries": [line.strip(" -") for line in build.splitlines()
                                                            if "Math Kernel" in line or "MKL-DNN" in line or "OpenBLAS" in line],
                                "cpu_capability": torch.backends.cpu.get_cpu_capability()}  # fmt: skip
    return record


def describe_cpu(c: dict) -> str:
    """One line: the CPU, its kernel flags present, and the two libraries' BLAS."""
    flags = ", ".join(flag for flag, present in c["flags"].items() if present) or "none of " + ", ".join(c["flags"])
    numpy_blas = "; ".join(f"{b['internal_api']} {b['version']} ({b['architecture']} kernels)" for b in c["numpy_blas"])
    generation = f", family {c['family']} model {c['model_number']}" if c.get("family") else ""  # older runs lack it
    forced = f", OPENBLAS_CORETYPE={c['openblas_coretype']} set" if c.get("openblas_coretype") else ""
    line = (f"{c['model']} ({c['kind']}{generation}), {c['cores']} cores, flags {flags}; numpy's BLAS "
            f"{numpy_blas or 'not seen'}{forced}")  # fmt: skip
    if "torch_blas" in c:
        t = c["torch_blas"]
        line += f"; torch's BLAS {t['blas']} ({'; '.join(t['libraries'])}), its vector code {t['cpu_capability']}"
    return line


def beside_line(probes: dict) -> str:
    """The streaming reads probed beside each decode breakdown (runs before they were probed lack them)."""
    beside = probes.get("beside_decode_GBps")
    if not beside:
        return ""
    return f"; beside each decode breakdown, streaming read {', '.join(f'{b:.1f}' for b in beside)} GB/s"


def render(report: dict) -> str:
    m = report["machine"]
    lines = [
        *([f"CPU: {describe_cpu(m['cpu_record'])}"] if "cpu_record" in m else []),  # runs before it was kept lack it
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['threads']} threads for both libraries; numpy {m['numpy']}, "
        f"torch {m['torch']}; streaming read {m['bandwidth_GBps']:.1f} GB/s, "
        f"sgemm peak {m['sgemm_GFLOPs']:.0f} GFLOP/s: the best of the probes before and after the measures "
        f"({probe_line(m['probes']['before'], m['threads'])}; {probe_line(m['probes']['after'], m['threads'])}"
        f"{beside_line(m['probes'])})",
        f"Load average (1 minute) {m['load_average']['before']:.2f} when the run began, {m['load_average']['after']:.2f} "
        f"when it ended" + (f"; busy: {m['busy_processes']} other processes spinning" if m["busy_processes"] else ""),
        *([settled_line(m["settled"])] if "settled" in m else []),  # runs before it was kept lack it
    ]
    if report["per_head_product"]:
        lines += ["", *render_product(report["per_head_product"])]
    for r in report["models"]:
        lines += ["", *render_model(r)]
    return "\n".join(lines)


def render_product(p: dict) -> list[str]:
    quiet, busy = p["quiet"], p["busy"]
    lines = ["One product of attention, GPT-2's scores of a chunk of 128 query rows against 512 keys (q [12, 128, 64] "
             "x K^T [12, 64, 512], views of one qkv), ms (median)", "",
             "| computed by | quiet | busy | busy / quiet |", "|---|---:|---:|---:|"]  # fmt: skip
    for name, key in (("ours (Tape.matmul)", "ours_ms"), ("np.matmul, the BLAS's threads as they are", "blas_all_threads_ms"),
                      ("torch.matmul", "torch_ms")):  # fmt: skip
        lines.append(f"| {name} | {quiet[key]:.2f} | {busy[key]:.2f} | {busy[key] / quiet[key]:.1f}x |")
    return lines


def probe_line(p: dict, threads: int) -> str:
    def squares(by_size: dict) -> str:
        return ", ".join(f"{n}^3 {rate:.0f}" for n, rate in by_size.items())

    torch_read = f", torch's {p['torch_matvec_GBps']:.1f}" if "torch_matvec_GBps" in p else ""
    others = "".join(f"; {who} {squares(p[key])}" for who, key in (("the BLAS's own", "blas_GFLOPs_by_size"),
                     ("torch's", "torch_GFLOPs_by_size")) if key in p)  # fmt: skip
    if "blas_GFLOPs_by_prompt_shape" in p:
        shaped = ", ".join(f"{shape} {rate:.0f}" for shape, rate in p["blas_GFLOPs_by_prompt_shape"].items())
        others += f"; the BLAS's own, shaped as a long prompt's products {shaped}"
    return (f"{threads} threads summing their slices of 1 GiB {p['threads_reading_GBps']:.1f} GB/s, a row times it "
            f"as a weight {p['matvec_GBps']:.1f}{torch_read}, square products {squares(p['sgemm_GFLOPs_by_size'])}"
            f"{others} GFLOP/s")  # fmt: skip


def render_model(r: dict) -> list[str]:
    busy = "busy" in r["prefill"][0]
    lines = [
        f"Model {r['model']}; {r['weight_bytes'] / 1e6:.0f} MB float32",
        "",
        "| measure | minitransformer | transformers + torch | ours vs torch | % of roofline |"
        + (" busy: minitransformer | transformers + torch | ours vs torch |" if busy else ""),
        "|---|---:|---:|---:|---:|" + ("---:|---:|---:|" if busy else ""),
    ]

    def busy_columns(m: dict, value) -> str:
        if not busy:
            return ""
        b = m["busy"]
        return f" {value(b['ours_s'])} | {value(b['torch_s'])} | {b['torch_s'] / b['ours_s']:.2f}x |"

    for d in r["decode"]:
        lines.append(f"| decode tok/s, context {d['context']} | {1 / d['ours_s']:.1f} | {1 / d['torch_s']:.1f} | "
                     f"{d['torch_s'] / d['ours_s']:.2f}x | {100 * d['roofline_s'] / d['ours_s']:.0f}% |"
                     + busy_columns(d, lambda s: f"{1 / s:.1f}"))  # fmt: skip
    for p in r["prefill"]:
        lines.append(f"| prefill T={p['tokens']} (all-position logits), ms | {1e3 * p['ours_s']:.1f} | "
                     f"{1e3 * p['torch_s']:.1f} | {p['torch_s'] / p['ours_s']:.2f}x | "
                     f"{100 * p['roofline_s'] / p['ours_s']:.0f}% ({p['binds']}-bound) |"
                     + busy_columns(p, lambda s: f"{1e3 * s:.1f}"))  # fmt: skip
    lines.append(f"| load, ms | {1e3 * r['load']['ours_s']:.0f} | {1e3 * r['load']['torch_s']:.0f} | "
                 f"{r['load']['torch_s'] / r['load']['ours_s']:.1f}x | |" + (" | | |" if busy else ""))  # fmt: skip
    lines += ["", "| ours, other paths | value |", "|---|---:|"]
    for d in r["decode"]:
        overhead = 100 * (d["ours_s"] / d["ours_no_ledger_s"] - 1)
        lines.append(f"| ledger overhead in decode, context {d['context']} | {overhead:+.1f}% |")
        lines.append(f"| no-cache step at context {d['context']} vs cached step | "
                     f"{d['ours_no_cache_s'] / d['ours_s']:.1f}x slower |")  # fmt: skip
    lines.append(f"| peak RSS (load + generate), vs weight bytes | {r['peak_rss_bytes'] / 1e6:.0f} MB = "
                 f"{r['peak_rss_bytes'] / r['weight_bytes']:.2f}x |")  # fmt: skip
    return lines + ["", *render_breakdown(r), "", *render_decode_breakdown(r)]


def render_breakdown(r: dict) -> list[str]:
    """Where each prefill's time goes, ours (a clocked pass, stage_clock) and torch's (its profiler), in ms: the
    products with weights beside the BLAS's time for them alone and their roofline (their FLOPs at the sgemm peak, or
    their weights' bytes at the streaming bandwidth, whichever is longer), attention beside the roofline of its
    products, and the rest."""
    lines = ["Where a prefill's time goes (ms; ours from the fastest clocked pass, torch's from its profiler; BLAS "
             "alone: the same products with weights on their own; roofline: their FLOPs at the sgemm peak or their "
             "weights' bytes at the bandwidth, whichever is longer)", "",
             "| T | weights: ours | torch | BLAS alone | roofline | ours % | BLAS alone % | attention: ours | torch | "
             "its products' roofline | rest: ours | torch | total: ours clocked (unclocked median) | torch |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for p in r["prefill"]:
        b = p["breakdown"]
        o, t, roof, alone = b["ours"], b["torch"], b["weights_roofline_s"], b["weights_blas_alone_s"]
        lines.append(f"| {p['tokens']} | {1e3 * o['weights']:.1f} | {1e3 * t['weights']:.1f} | {1e3 * alone:.1f} | "
                     f"{1e3 * roof:.1f} | {100 * roof / o['weights']:.0f}% | {100 * roof / alone:.0f}% | "
                     f"{1e3 * o['attention']:.1f} | {1e3 * t['attention']:.1f} | "
                     f"{1e3 * b['attention_roofline_s']:.1f} | {1e3 * o['rest']:.1f} | {1e3 * t['rest']:.1f} | "
                     f"{1e3 * o['total']:.1f} ({1e3 * p['ours_s']:.1f}) | {1e3 * t['total']:.1f} |")  # fmt: skip
    return lines


def render_decode_breakdown(r: dict) -> list[str]:
    """Where a decode step's time goes, ms: the products with weights of the layers and the logits product, each
    beside the same products on their own (BLAS alone) and their roofline (their weights' bytes at the streaming
    bandwidth); attention beside the roofline of the cached K and V it reads; the cache append; the rest (norms,
    activations, reshapes, residual adds, the embedding and the bookkeeping between stages)."""
    lines = ["Where a decode step's time goes (ms; the fastest clocked step of the ledger-on measure; BLAS alone: the "
             "step's products with weights on their own, same operands; roofline: the bytes each part must read at the "
             "streaming bandwidth)", "",
             "| context | step: clocked | roofline | layers' weights: ours | BLAS alone | roofline | logits: ours | "
             "BLAS alone | roofline | attention: ours | K and V roofline | cache append | rest |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for d in r["decode"]:
        b = d["breakdown"]
        ms = {key: f"{1e3 * value:.2f}" for key, value in b.items() if not key.endswith("_bytes")}
        lines.append(f"| {d['context']} | {ms['total']} | {1e3 * d['roofline_s']:.2f} | {ms['weights']} | "
                     f"{ms['weights_blas_alone']} | {ms['weights_roofline_s']} | {ms['logits']} | "
                     f"{ms['logits_blas_alone']} | {ms['logits_roofline_s']} | {ms['attention']} | "
                     f"{ms['kv_roofline_s']} | {ms['cache']} | {ms['rest']} |")  # fmt: skip
    return lines


if __name__ == "__main__":
    main()
