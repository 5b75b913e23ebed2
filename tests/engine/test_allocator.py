"""engine/allocator.py: a pass's large arrays reuse freed memory instead of the kernel's fresh pages."""

import os
import platform
import subprocess
import sys

import pytest

GLIBC = platform.libc_ver()[0] == "glibc"

# A fresh process each time, with and without the setting (a pytest process has it from the first model a test
# loads): it allocates, fills and frees a 16 MiB array 20 times and prints the page faults those cycles cost (the
# first cycle, which grows the heap, not counted).
CYCLES = 20
CHILD = f"""
import resource, numpy as np
from minitransformer.engine.allocator import keep_freed_memory
taken = keep_freed_memory()
def cycle():
    a = np.empty(4 << 20, np.float32); a.fill(1.0); del a
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({CYCLES}):
    cycle()
print(taken, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(system_malloc: bool) -> tuple[bool, int]:
    env = dict(os.environ, MINITRANSFORMER_SYSTEM_MALLOC="1" if system_malloc else "0")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, env=env)
    taken, count = out.stdout.split()
    return taken == "True", int(count)


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_freed_arrays_are_reused_without_page_faults_and_the_setting_can_be_declined():
    taken, kept = faults(system_malloc=False)
    declined, returned = faults(system_malloc=True)
    assert taken and not declined
    # glibc's default gives each 16 MiB array back to the kernel: every cycle faults pages in again (how many
    # depends on the kernel's page sizes); kept, the heap's memory is reused untouched.
    assert returned >= CYCLES
    assert kept < CYCLES


def test_a_model_with_weights_asks_for_it_once_and_a_shape_only_one_does_not(small_gpt2_dir, monkeypatch):
    from minitransformer import GPT2Config, Model, load_model
    from minitransformer.engine import allocator

    monkeypatch.setattr(allocator, "_taken", None)
    Model.without_weights(GPT2Config(n_layer=2, n_head=2, n_embd=8))
    assert allocator._taken is None  # counting allocates nothing worth keeping
    load_model(small_gpt2_dir)
    assert allocator._taken is (GLIBC and os.environ.get("MINITRANSFORMER_SYSTEM_MALLOC") != "1")
    assert allocator.keep_freed_memory() is allocator._taken
