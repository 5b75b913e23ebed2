"""The demo retrains, run in the background while the rest of the suite runs.

A retrain is minutes of torch on two threads; most of the suite is one thread of NumPy. Started as soon as pytest knows
which tests it will run (conftest's pytest_collection_finish), one after the other, they overlap the suite instead of
adding to it, and their tests (tests/models/test_demo_model.py) wait for their result. Their bits do not depend on the
load: the training script fixes its seed, its data order, its two threads and torch's deterministic kernels."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_demo_model.py"
MARKER = "retrain"
# Beside the suite a retrain's two threads share the cores with it: threads that wait sleep instead of spinning (how
# long a thread spins changes no result; measured: spinning, a busy retrain burned 3.5 times its CPU time).
QUIET_WAITING = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}


# What the retrain's process runs first, then the script in its place: end it when pytest ends, however pytest ends
# (Linux's PR_SET_PDEATHSIG, which an exec keeps; elsewhere a killed pytest leaves the retrain to finish on its own, in
# its temporary folder). Not subprocess's preexec_fn: that makes it fork, and a fork runs OpenBLAS's handler, which
# joins the BLAS's threads while the suite's main thread may be inside a product on them: the whole suite hung, every
# thread asleep (seen once, the main thread waiting for the GIL the forking thread held).
END_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n    pass\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


@dataclass
class Retrain:
    """One run of the training script: where it writes, and its result once it has ended."""

    name: str
    out: Path
    fixture: Path
    done: threading.Event = field(default_factory=threading.Event)
    result: subprocess.CompletedProcess | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-c", END_WITH_PARENT, str(SCRIPT), "--family", "llama" if self.name == "demo-llama" else "gpt2",
                "--out", str(self.out), "--fixture", str(self.fixture)]  # fmt: skip


class Retrains:
    """The retrains this session selected, run in order on one background thread."""

    def __init__(self) -> None:
        self.runs: dict[str, Retrain] = {}
        self.folders: list[Path] = []
        self.process: subprocess.Popen | None = None
        self.stopped = False
        # Whether to start the next retrain and whether to stop are decided one at a time: a session that ended
        # between the thread's check and its start (pytest --collect-only) otherwise left a retrain no one killed,
        # and waited two minutes for it at the end.
        self.deciding = threading.Lock()

    def start(self, names: list[str]) -> None:
        """Start the named retrains, if torch and transformers are here (without them their tests skip)."""
        if not names or self.runs or not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
            return
        runs = [self._new(name) for name in names]
        threading.Thread(target=self._run_all, args=(runs,), name="demo retrains", daemon=True).start()

    def _new(self, name: str) -> Retrain:
        self.folders.append(Path(tempfile.mkdtemp(prefix=f"minitransformer-retrain-{name}-")))
        self.runs[name] = Retrain(name, self.folders[-1] / name, self.folders[-1] / "fixture.npz")
        return self.runs[name]

    def _run_all(self, runs: list[Retrain]) -> None:
        for run in runs:
            with self.deciding:
                process = (
                    None
                    if self.stopped
                    else subprocess.Popen(
                        run.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=QUIET_WAITING
                    )
                )
                self.process = process
            if process is not None:
                stdout, stderr = process.communicate()
                run.result = subprocess.CompletedProcess(run.command(), process.returncode, stdout, stderr)
            run.done.set()

    def wait(self, name: str) -> Retrain:
        """The named retrain once it has ended (no time limit: on a busy machine a retrain is slow, not wrong)."""
        if name not in self.runs:  # not started with the session's collection: run it here
            self._run_all([self._new(name)])
        run = self.runs[name]
        run.done.wait()
        return run

    def stop(self) -> None:
        """End of the session: stop a retrain no test waits for any more and remove what the retrains wrote."""
        with self.deciding:
            self.stopped = True
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
        for run in self.runs.values():
            run.done.wait(timeout=60)
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)


RETRAINS = Retrains()
