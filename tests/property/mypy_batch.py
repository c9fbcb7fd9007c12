"""One mypy run (with the ``spmd_mypy`` plugin) over a batch of files.

Shared by the soundness property and the plugin fuzzer: both write many
modules and check them all with a single mypy process and one cache, then
read each file's errors back from the output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "spmd_mypy"

_ERROR = re.compile(r"^(?P<path>[^:\n]+\.py):(?P<line>\d+):(?:\d+:)? error: (?P<message>.*?)(?:  \[(?P<code>[\w-]+)\])?$")


@dataclass
class FileErrors:
    """What mypy said about one file."""

    errors: list[str] = field(default_factory=list)
    codes: set[str] = field(default_factory=set)

    @property
    def accepted(self) -> bool:
        return not self.errors


@dataclass
class MypyRun:
    """The raw outcome of one mypy run, and the errors of each checked file."""

    returncode: int
    output: str
    files: dict[Path, FileErrors]

    @property
    def crashed(self) -> bool:
        """A traceback or an internal error, or an exit status other than 0 (clean) / 1 (errors)."""
        return (
            self.returncode not in (0, 1)
            or "Traceback (most recent call last)" in self.output
            or "INTERNAL ERROR" in self.output
        )


def write_config(directory: Path, extra: str = "") -> Path:
    """A mypy config enabling the plugin (``extra``: more ``[mypy]`` options)."""
    config = directory / "mypy.ini"
    config.write_text(f"[mypy]\nplugins = {PLUGIN}\npython_version = 3.11\n{extra}")
    return config


def run_mypy(files: list[Path], config: Path, cache_dir: Path, cwd: Path = REPO) -> MypyRun:
    """mypy once over ``files``; each file's errors (its path as given) are collected."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache_dir),
         "--no-error-summary", "--show-error-codes", "--hide-error-context", "--no-pretty",
         *map(str, files)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    output = proc.stdout + proc.stderr
    by_name = {f.resolve(): FileErrors() for f in files}
    for line in output.splitlines():
        match = _ERROR.match(line)
        if match is None:
            continue
        entry = by_name.get((cwd / match["path"]).resolve())
        if entry is not None:
            entry.errors.append(line)
            entry.codes.add(match["code"] or "untagged")
    return MypyRun(proc.returncode, output, {f: by_name[f.resolve()] for f in files})
