"""Many files at once: the codemod over a process pool, and progress on stderr.

Each file is migrated on its own (the codemod reads nothing but the file,
its module name, the overlays and the group declarations), so files go to
worker processes and come back in the order they were given: the diff, the
site list and the files written are the same whatever the number of jobs.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence, TextIO

from spmd_mypy import config
from spmd_mypy.migrate.engine import migrate_source
from spmd_mypy.migrate.names import module_of_path
from spmd_mypy.migrate.overlay import ModuleOverlay, apply_overlay
from spmd_mypy.migrate.transformer import Report

__all__ = ["Job", "Options", "Progress", "default_jobs", "transformed"]

FILES_PER_WORKER = 4
"""A worker starts a Python and imports libcst (about a second): fewer files than this each run in one process."""

PROGRESS_EVERY = 100
"""Without a terminal, a progress line every this many files (none for smaller runs)."""


@dataclass(frozen=True)
class Job:
    """One file: read from ``source`` (which also names its module), write to ``destination``."""

    source: Path
    destination: Path


@dataclass(frozen=True)
class Options:
    """What every file's migration shares."""

    overlays: dict[str, ModuleOverlay]
    replicated_dst: str | None
    roots: tuple[Path, ...]
    groups: config.GroupDeclarations


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def transform(job: Job, options: Options) -> tuple[str, str, Report]:
    """One file: its text, the migrated text, and what the codemod did."""
    original = job.source.read_text()
    module = module_of_path(job.source, options.roots)
    code = original
    if module in options.overlays:
        code = apply_overlay(code, module, options.overlays[module])
    result = migrate_source(code, module, is_package=job.source.name == "__init__.py",
                            replicated_dst=options.replicated_dst, groups=options.groups)
    return original, result.code, result.report


_WORKER_OPTIONS: list[Options] = []


def _start_worker(options: Options) -> None:
    _WORKER_OPTIONS.append(options)


def _transform_in_worker(job: Job) -> tuple[str, str, Report]:
    return transform(job, _WORKER_OPTIONS[0])


def transformed(jobs: Sequence[Job], options: Options, processes: int) -> Iterator[tuple[str, str, Report]]:
    """``transform`` of every job, in order, over up to ``processes`` worker processes.

    An error of one file (a bad overlay entry) is raised here, as it is
    without workers; the pool stops with it.
    """
    workers = min(processes, len(jobs) // FILES_PER_WORKER)
    if workers <= 1:
        yield from (transform(job, options) for job in jobs)
        return
    # spawn: a fresh interpreter per worker, whatever threads the caller runs.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(options,)) as pool:
        yield from pool.imap(_transform_in_worker, jobs, chunksize=max(1, min(16, len(jobs) // (4 * workers))))


class Progress:
    """``spmd-migrate: 300/2000 files`` on stderr while files are migrated.

    On a terminal one line is rewritten in place (at most ten times a
    second, and cleared before anything else is printed); otherwise, so
    that a CI log stays readable, a line every ``PROGRESS_EVERY`` files,
    and nothing for smaller runs.
    """

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self._shown_at = 0.0
        self._showing = False

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.live:
            now = time.monotonic()
            if now - self._shown_at >= 0.1 or self.done == self.total:
                self._shown_at = now
                self.stream.write(f"\rspmd-migrate: {self.done}/{self.total} files\x1b[K")
                self.stream.flush()
                self._showing = True
        elif self.done % PROGRESS_EVERY == 0:
            print(f"spmd-migrate: {self.done}/{self.total} files", file=self.stream, flush=True)

    def clear(self) -> None:
        """Take the live line off the terminal before other output."""
        if self._showing:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._showing = False
