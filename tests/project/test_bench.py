"""scripts/bench.py --predict-from, the one run of the benchmark that measures nothing: docs/hardware.md gives it as
a command anyone can run on a fresh clone, so it must need no earlier run's files and neither torch nor transformers
(an earlier version read each model's config from the random checkpoint a bench run had left in the temporary
folder, and ended in a traceback where there was none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

# What a fresh clone has: the package, the script and its JSON; torch and transformers made unimportable, and a
# temporary folder that no bench run has written to.
WITHOUT_TORCH = """
import runpy, sys
sys.modules["torch"] = None
sys.modules["transformers"] = None
sys.argv = ["scripts/bench.py", "--predict-from", sys.argv[1]]
runpy.run_path("scripts/bench.py", run_name="__main__")
"""


def predict_from(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    env = {**os.environ, "TMPDIR": str(fresh), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, str(path)], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)  # fmt: skip


def documented_table() -> list[str]:
    """The table docs/hardware.md pastes under its marker for this command."""
    lines = (ROOT / "docs" / "hardware.md").read_text().splitlines()
    start = lines.index("<!-- measured: scripts/bench.py --predict-from scripts/bench_epyc.json -->") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_predict_from_the_latest_run_needs_no_earlier_run_nor_torch_and_prints_the_documented_table(tmp_path):
    done = predict_from(ROOT / "scripts" / "bench_epyc.json", tmp_path)
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table == documented_table(), "\n".join(table)
    assert not any((tmp_path / "tmp").iterdir())  # it wrote no model to the temporary folder


def test_a_run_that_kept_no_config_and_whose_models_are_gone_says_what_to_run_in_one_line(tmp_path):
    earlier = json.loads((ROOT / "scripts" / "bench_epyc.json").read_text())
    for model in earlier["models"]:
        del model["config"]  # as a run before the JSON kept them wrote it
        model["weights"] = str(tmp_path / "gone" / Path(model["weights"]).name)
    path = tmp_path / "older.json"
    path.write_text(json.dumps(earlier))
    done = predict_from(path, tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bench.py: {tmp_path / 'gone' / 'minitransformer-bench-gpt2-random'} is gone and that run's JSON does not "
        "keep its config.json: run `python scripts/bench.py --predicted-only` to measure afresh"
    ], done.stderr


# The benchmark's runs in turn (ours, then torch's, then ours...) each begin once the threads of the run before have
# stopped spinning: a thread of this process that keeps a core busy must hold settle() back until it idles. The spinner
# runs until it has used SPIN_CPU_S of its own CPU time, however long the machine's load makes that take; settle() is
# given a quiet window of QUIET_S, many clock ticks, so that a spinner the scheduler leaves waiting for a while is not
# taken for one that has stopped, and at most MOST_S, far longer than any load makes SPIN_CPU_S take (the bench's own
# 2 s gave up on a spinner that a busy machine let use 0.38 s of CPU in that time: no wall-clock limit in a test).
SETTLE_WHILE_A_THREAD_SPINS = """
import json, runpy, sys, threading, time
sys.argv = ["scripts/bench.py", "--predict-from", "scripts/bench_epyc.json"]
bench = runpy.run_path("scripts/bench.py")
if {child!r}:  # the copy a child process of the benchmark runs (stored_in_turn): its source alone, executed afresh
    bench = {{}}
    exec(runpy.run_path("scripts/bench.py")["settle_source"](), bench)
bench["settle"].__globals__["SETTLE_QUIET_S"] = {quiet}  # run_path returns a copy of the globals
bench["settle"].__globals__["SETTLE_MAX_S"] = {most}  # a spinner slowed by the machine's load is waited for
started, done, release = threading.Event(), threading.Event(), threading.Event()

def spin():  # then idle, as a library's thread is once it stops spinning: alive, waiting, using no CPU
    started.set()
    begin = time.thread_time()
    while time.thread_time() - begin < {spin}:
        pass
    done.set()
    release.wait()

ticks_before = bench["other_threads_cpu_ticks"]()
spinner = threading.Thread(target=spin)
spinner.start()
started.wait()
bench["settle"]()
settled_after_spinner = done.is_set()
ticks_after = bench["other_threads_cpu_ticks"]()
bench["settle"]()  # nothing spins now: one quiet window
release.set()
spinner.join()
record = bench["SETTLED"]
line = bench["settled_line"]({{**record, "unsettled": 3}}) if "settled_line" in bench else None
print(json.dumps({{"settled_after_spinner": settled_after_spinner, "ticks": [ticks_before, ticks_after],
                   "record": record, "line": line}}))
"""
QUIET_S, SPIN_CPU_S, MOST_S = 0.3, 0.4, 3600


@pytest.mark.parametrize("child", [False, True], ids=["the benchmark's settle", "its copy in a child process"])
def test_a_run_in_turn_begins_only_once_every_other_thread_of_the_process_has_stopped_spinning(child):
    code = SETTLE_WHILE_A_THREAD_SPINS.format(quiet=QUIET_S, spin=SPIN_CPU_S, most=MOST_S, child=child)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["settled_after_spinner"], seen
    before, after = seen["ticks"]
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    assert after - before >= (SPIN_CPU_S - 0.05) * ticks_per_s, seen  # the spinner's CPU time, seen in /proc
    record = seen["record"]
    assert record["waits"] == 2 and record["unsettled"] == 0, record
    assert record["longest_s"] >= QUIET_S and record["waited_s"] >= 2 * QUIET_S, record
    assert child or seen["line"].endswith(f"; 3 did not settle within {MOST_S} s"), seen["line"]


# Which JSON a run writes, by the CPU's /proc/cpuinfo fields: a Zen 5 (AMD family 26) computes twice a Zen 4's vector
# width per cycle, so its tables are not the Zen 4's and get a JSON of their own; so does an EPYC whose virtual machine
# hides AVX-512 (the libraries' AVX2 kernels, half the width).
CPU_KIND_OF = """
import json, runpy, sys
cpus = json.loads(sys.argv[1])
sys.argv = ["scripts/bench.py", "--predict-from", "scripts/bench_epyc.json"]
bench = runpy.run_path("scripts/bench.py")
kinds = []
for fields in cpus:
    bench["cpu_kind"].__globals__["_cpuinfo"] = lambda: fields  # run_path returns a copy of the globals
    kinds.append(bench["cpu_kind"]())
record = {"kind": "epyc_zen5", "model": "AMD EPYC", "family": "26", "model_number": "2", "cores": 2,
          "flags": {"avx2": True, "avx512f": True, "amx_tile": False},
          "numpy_blas": [{"internal_api": "openblas", "version": "0.3.31", "architecture": "Haswell"}]}
lines = [bench["describe_cpu"](record), bench["describe_cpu"]({**record, "openblas_coretype": "Haswell"})]
print(json.dumps({"kinds": kinds, "lines": lines}))
"""
CPUS = [
    ({"model name": "AMD EPYC", "cpu family": "25"}, "epyc"),
    ({"model name": "AMD EPYC", "cpu family": "25", "flags": "fpu avx2 fma avx512f avx512_bf16"}, "epyc"),
    ({"model name": "AMD EPYC", "cpu family": "25", "flags": "fpu avx2 fma"}, "epyc_avx2"),  # AVX-512 hidden by its VM
    ({"model name": "AMD EPYC", "cpu family": "26", "flags": "fpu avx2 fma avx512"}, "epyc_zen5_avx2"),  # no avx512f
    ({"model name": "AMD EPYC 9B45", "cpu family": "26"}, "epyc_zen5"),
    ({"model name": "AMD EPYC", "cpu family": "27"}, "epyc_zen5"),
    ({"model name": "AMD EPYC"}, "epyc"),  # no family read: the first EPYC's JSON, as before the family was read
    ({"model name": "Intel(R) Xeon(R) Processor", "cpu family": "6"}, "xeon"),
    ({"model name": "AMD Ryzen 9 9950X", "cpu family": "26"}, "cpu"),
]


def test_a_run_names_its_json_by_the_cpus_kind_and_says_when_the_environment_chose_openblass_kernels():
    done = subprocess.run([sys.executable, "-c", CPU_KIND_OF, json.dumps([fields for fields, _ in CPUS])],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["kinds"] == [kind for _, kind in CPUS], seen["kinds"]
    plain, forced = seen["lines"]
    assert plain == ("AMD EPYC (epyc_zen5, family 26 model 2), 2 cores, flags avx2, avx512f; numpy's BLAS openblas "
                     "0.3.31 (Haswell kernels)"), plain  # fmt: skip
    assert forced == plain + ", OPENBLAS_CORETYPE=Haswell set", forced
