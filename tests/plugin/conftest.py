"""One mypy run per group of case directories, shared by every test of the session.

Case directories run together under the recommended config; a directory
with an ``_extra.ini`` (extra config sections, e.g. ``[spmd_mypy] strict =
true``) runs on its own, through ``spmd-check`` where it declares
configurations.  The cache lives in pytest's cache directory, so
only the first session pays for analysing torch; an inter-process lock keeps
xdist workers from writing it at the same time.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Callable

import pytest

from tests.plugin.harness import CASES, Diagnostic, case_files, config_text, parse_output, run_mypy

EXTRA_CONFIG = "_extra.ini"


def group_of(path: Path) -> Path:
    """The directory whose config a case file runs under (CASES: the default)."""
    for parent in path.parents:
        if (parent / EXTRA_CONFIG).exists():
            return parent
        if parent == CASES:
            break
    return CASES


class MypyRuns:
    def __init__(self, cache_root: Path) -> None:
        self.cache_root = cache_root
        self.results: dict[Path, dict[Path, list[Diagnostic]]] = {}

    def diagnostics(self, case: Path) -> list[Diagnostic]:
        group = group_of(case)
        if group not in self.results:
            self.results[group] = self._run(group)
        return self.results[group].get(case.resolve(), [])

    def outside_cases(self) -> dict[Path, list[Diagnostic]]:
        """Diagnostics the default run reports in files that are not case files (spmd_stubs itself)."""
        self.diagnostics(case_files()[0])
        return {path: found for path, found in self.results[CASES].items() if CASES not in path.parents}

    def _run(self, group: Path) -> dict[Path, list[Diagnostic]]:
        files = [f for f in case_files(group) if group_of(f) == group]
        extra = group / EXTRA_CONFIG
        name = "default" if group == CASES else group.name
        config = self.cache_root / f"{name}.ini"
        config.write_text(config_text(extra.read_text() if extra.exists() else ""))
        with open(self.cache_root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            output = run_mypy(files, config, self.cache_root / "mypy_cache", CASES,
                              every_configuration="configurations" in config.read_text())
        return parse_output(output, CASES)


@pytest.fixture(scope="session")
def mypy_runs(kept_dir: Callable[[str], Path]) -> MypyRuns:
    return MypyRuns(kept_dir("spmd_mypy"))
