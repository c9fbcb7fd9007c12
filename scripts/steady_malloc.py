"""Keep glibc's malloc from mapping fresh pages for every large buffer, so both sides of a benchmark run on a steady allocator.

glibc serves a request of 128 KiB or more with a fresh ``mmap`` and unmaps it
when it is freed, raising that threshold only as freed blocks teach it to
(``mallopt(3)``, ``M_MMAP_THRESHOLD``): until then every such tensor (an
activation, a copy of one) costs a page fault per 4 KiB on first touch, at
a moment that differs between processes.  With the thresholds fixed high,
freed blocks are reused, as the CUDA caching allocator reuses GPU memory
(the typed GPT step on one thread, SP off: 7.9-8.9 ms in six runs against
8.3-9.8 ms in five).  The threshold sits above the largest buffer the
benchmarks make, the 64 MiB output of a 16 MiB all_gather over 4 ranks: at
64 MiB that buffer was still mapped afresh on every call (16,385 page faults
a call, 2.1-2.8 ms of the calling thread's CPU).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 20
"""Requests of this size or more are mapped afresh: above every buffer the benchmarks make."""
TRIM_THRESHOLD = 1024 << 20


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--default-malloc``: a benchmark's way to leave the thresholds alone (``steady_malloc(not it)``)."""
    parser.add_argument(
        "--default-malloc", action="store_true", help="leave glibc's mmap threshold moving (see steady_malloc.py)"
    )


def steady_malloc(wanted: bool = True) -> str:
    """Fix glibc's thresholds in this process (before the work is timed), where ``wanted``; what was done, for the report."""
    if not wanted:
        return "malloc as it is"
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        done = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError, TypeError):  # not glibc: no mallopt
        done = 0
    if not done:
        return "malloc as it is (no glibc mallopt)"
    return f"glibc malloc: mmap threshold fixed at {MMAP_THRESHOLD >> 20} MiB, trim at {TRIM_THRESHOLD >> 20} MiB"
