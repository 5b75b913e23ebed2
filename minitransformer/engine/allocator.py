"""Freed arrays kept for the next pass: glibc's malloc told to serve large arrays from its heap.

A forward pass allocates and frees arrays of the same few sizes in every layer ([T, F] activations,
[H, 128, t] scores, product outputs). glibc hands each array above its mmap threshold (128 KiB, rising
to at most 32 MiB as it sees such arrays freed) to the kernel and back on every allocation, and each
fresh page then costs a page fault and the kernel's zeroing of it: measured on an AMD EPYC, 5% to 14% of a
Llama prefill's time at 512 to 2,048 positions. With mmap off for allocations (M_MMAP_MAX = 0) and the heap not
trimmed (M_TRIM_THRESHOLD), a freed array's memory is reused by the next one, untouched by the kernel.

The setting is the process's: it also serves whatever else runs beside us (transformers + torch in the
benchmark, whose prefill it changed by 1 to 2% there). The heap keeps its high-water mark, and a freed
gap inside it is reused rather than returned, so the peak can grow a little (the benchmark's peak
resident memory of a generation went from 1.26x to 1.28x GPT-2's weight bytes, 1.04x to 1.06x the
Llama-shaped model's). MINITRANSFORMER_SYSTEM_MALLOC=1 leaves malloc as it was; on a C library other
than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's <malloc.h>
_KEEP = 1 << 30  # free memory at the top of the heap kept, up to this many bytes, rather than given back
_taken: bool | None = None  # None: not asked yet


def keep_freed_memory() -> bool:
    """Have malloc reuse freed large arrays (asked once per process); True where glibc took the setting."""
    global _taken
    if _taken is None:
        _taken = os.environ.get("MINITRANSFORMER_SYSTEM_MALLOC") != "1" and _mallopt()
    return _taken


def _mallopt() -> bool:
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # no glibc (macOS, Windows, a libc without mallopt): malloc as it is
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, _KEEP))
