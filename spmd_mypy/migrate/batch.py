"""Many files at once: the codemod over a process pool, each file's outcome, and progress on stderr.

Each file is migrated on its own (the codemod reads nothing but the file,
its module name, the overlays and the group declarations), so files go to
worker processes and come back in the order they were given: the diff, the
site list and the files written are the same whatever the number of jobs.

A file runs through libcst's per-file runner (``libcst.codemod.transform_module``),
which turns whatever goes wrong in it into a ``TransformFailure``: a file
that does not parse, or whose overlay entries went stale, comes back as a
:class:`Failure` that names the line and the reason, and the other files
are migrated all the same.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence, TextIO

import libcst as cst
from libcst.codemod import TransformExit, TransformFailure, TransformSuccess, transform_module

from spmd_mypy import config
from spmd_mypy.migrate.engine import FileMigration, module_context
from spmd_mypy.migrate.files import read_source
from spmd_mypy.migrate.names import module_of_path
from spmd_mypy.migrate.overlay import ModuleOverlay, OverlayError
from spmd_mypy.migrate.transformer import Report

__all__ = ["Job", "Options", "Failure", "Outcome", "Progress", "default_jobs", "transformed"]

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
    groups: config.AxisNames


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Failure:
    """Why a file was left as it was: ``reason``, at ``line`` where one is to blame.

    ``traceback`` is set only for an error of the codemod itself (a bug to
    report), not for what is wrong with the file.
    """

    reason: str
    line: int | None = None
    traceback: str = ""


@dataclass(frozen=True)
class Outcome:
    """One file: its text, the migrated text (the same text where it failed), what was done, or why it failed."""

    original: str
    code: str
    report: Report
    failure: Failure | None = None


def _syntax_error(text: str, error: cst.ParserSyntaxError) -> Failure:
    """Where Python's parser puts the error, with its message (``'(' was never closed``); libcst's
    points at the token it stopped on, often a line later.  Code Python parses and libcst does not
    gets libcst's."""
    try:
        ast.parse(text)
    except SyntaxError as python_error:
        return Failure(f"syntax error: {python_error.msg}", python_error.lineno)
    except ValueError:  # null bytes, which Python 3.11 reports so
        pass
    return Failure(f"libcst cannot parse it: {error.message}", error.raw_line)


def _failure(failed: TransformFailure, text: str) -> Failure:
    if isinstance(failed.error, cst.ParserSyntaxError):
        return _syntax_error(text, failed.error)
    if isinstance(failed.error, OverlayError):
        return Failure(str(failed.error))
    return Failure(f"internal error: {type(failed.error).__name__}: {failed.error}", traceback=failed.traceback_str)


def transform(job: Job, options: Options) -> Outcome:
    """One file through libcst's per-file runner: its text, the migrated text and what the codemod did."""
    try:
        original = read_source(job.source)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:  # SyntaxError: a bad coding line
        return Outcome("", "", Report(), Failure(f"cannot read it: {error}"))
    module = module_of_path(job.source, options.roots)
    migration = FileMigration(module_context(module, is_package=job.source.name == "__init__.py"),
                              overlay=options.overlays.get(module), replicated_dst=options.replicated_dst,
                              groups=options.groups)
    result = transform_module(migration, original)
    if isinstance(result, TransformExit):  # libcst's runner caught a Ctrl-C: stop, as without it
        raise KeyboardInterrupt
    if isinstance(result, TransformFailure):
        return Outcome(original, original, Report(), _failure(result, original))
    assert isinstance(result, TransformSuccess)  # the migration never skips a file
    return Outcome(original, result.code, migration.report)


_WORKER_OPTIONS: list[Options] = []


def _start_worker(options: Options) -> None:
    _WORKER_OPTIONS.append(options)


def _transform_in_worker(job: Job) -> Outcome:
    return transform(job, _WORKER_OPTIONS[0])


def transformed(jobs: Sequence[Job], options: Options, processes: int) -> Iterator[Outcome]:
    """``transform`` of every job, in order, over up to ``processes`` worker processes."""
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
