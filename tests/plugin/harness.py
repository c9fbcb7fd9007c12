"""The case-file harness: mypy runs once over a directory of case files, tests compare per file.

A case file states what mypy must say about it in comments on the line the
diagnostic is about::

    y = a * b  # E: spmd-partial-mul P@tp * P@tp
    reveal_type(y)  # N: Tensor[R@tp]

``# E: <code> [substring]`` expects an error with that code (and the
substring in its message: the error line and the notes after it on its
line, joined with spaces), ``# N: <substring>`` a note (reveal_type).
Several expectations may share a line.  The comparison is exact per file:
a missing or an unexpected error or reveal_type note fails.  In a directory
checked in several configurations (``spmd-check``), ``# E[sp]:`` expects a
diagnostic found in configuration ``sp`` only (``[sp, tp_only]``: in those);
an unlabelled expectation, one found in every configuration.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"
RECOMMENDED = ROOT / "spmd_mypy" / "recommended.ini"

_EXPECTATION = re.compile(r"#\s*(?P<kind>[EN])(?:\[(?P<label>[^\]]*)\])?:\s*(?P<body>.*?)\s*(?=#\s*[EN](?:\[[^\]]*\])?:|$)")
_DIAGNOSTIC = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<kind>error|note): (?:\[(?P<label>[\w, -]+)\] )?"
                         r"(?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")


@dataclass(frozen=True)
class Diagnostic:
    line: int
    kind: str  # "E" or "N"
    code: str  # error code, "" for notes
    message: str
    label: str = ""  # the configurations it occurs in, "" for all

    def __str__(self) -> str:
        code = f" [{self.code}]" if self.code else ""
        return f"{self.line}: {self.kind}{_labelled(self.label)}:{code} {self.message}"


@dataclass(frozen=True)
class Expectation:
    line: int
    kind: str
    code: str
    substring: str
    label: str = ""

    def matches(self, diagnostic: Diagnostic) -> bool:
        return (
            (self.line, self.kind, self.code, self.label)
            == (diagnostic.line, diagnostic.kind, diagnostic.code, diagnostic.label)
            and self.substring in diagnostic.message
        )

    def __str__(self) -> str:
        return f"{self.line}: {self.kind}{_labelled(self.label)}: {self.code} {self.substring}".rstrip()


def _labelled(label: str) -> str:
    return f"[{label}]" if label else ""


def expectations(path: Path) -> list[Expectation]:
    """The ``# E:`` / ``# N:`` comments of a case file."""
    return expectations_in(path.read_text())


def expectations_in(source: str) -> list[Expectation]:
    """The ``# E:`` / ``# N:`` comments of some case-file text, by line number."""
    found = []
    for number, text in enumerate(source.splitlines(), start=1):
        for match in _EXPECTATION.finditer(text):
            body, label = match.group("body"), match.group("label") or ""
            if match.group("kind") == "E":
                code, _, substring = body.partition(" ")
                found.append(Expectation(number, "E", code, substring.strip(), label))
            else:
                found.append(Expectation(number, "N", "", body, label))
    return found


def parse_output(output: str, root: Path) -> dict[Path, list[Diagnostic]]:
    """mypy's output lines, per absolute file path (errors and reveal_type notes only).

    The notes that follow an error on its line (its explanation and fix) count as part of its
    message, joined with spaces, so an expectation's substring may come from any of them.
    """
    per_file: dict[Path, list[Diagnostic]] = {}
    last_error: tuple[Path, int] | None = None
    for line in output.splitlines():
        match = _DIAGNOSTIC.match(line)
        if match is None:
            continue
        kind = "E" if match.group("kind") == "error" else "N"
        message = match.group("message")
        path = (root / match.group("path")).resolve()
        number = int(match.group("line"))
        if kind == "N" and not message.startswith("Revealed type is"):
            if last_error == (path, number):
                error = per_file[path][-1]
                per_file[path][-1] = replace(error, message=f"{error.message} {message}")
            continue
        last_error = (path, number) if kind == "E" else None
        diagnostic = Diagnostic(number, kind, match.group("code") or "", message, match.group("label") or "")
        per_file.setdefault(path, []).append(diagnostic)
    return per_file


def compare(expected: list[Expectation], actual: list[Diagnostic]) -> list[str]:
    """The problems: expectations nothing matched, and diagnostics no expectation claimed."""
    remaining = list(actual)
    problems = []
    for expectation in expected:
        match = next((d for d in remaining if expectation.matches(d)), None)
        if match is None:
            problems.append(f"missing   {expectation}")
        else:
            remaining.remove(match)
    problems.extend(f"unexpected {d}" for d in remaining)
    return problems


def config_text(extra_sections: str = "") -> str:
    """The recommended config with the repository on mypy's path, plus ``extra_sections``."""
    recommended = RECOMMENDED.read_text().replace("[mypy]\n", f"[mypy]\nmypy_path = {ROOT}\n", 1)
    return f"{recommended}\n{extra_sections}"


def run_mypy(
    files: list[Path], config: Path, cache_dir: Path, cwd: Path, flags: Sequence[str] = (), log: bool = False,
    every_configuration: bool = False,
) -> str:
    """One mypy run (a subprocess: plugin state never leaks between runs), with extra command-line ``flags``;
    with ``every_configuration``, ``spmd-check``'s run of each configuration.

    Its report, or with ``log`` what it wrote to stderr (``--verbose``'s log).
    """
    runner = "spmd_mypy.configurations.cli" if every_configuration else "mypy"
    command = [sys.executable, "-m", runner, *flags, "--config-file", str(config), "--cache-dir", str(cache_dir)]
    command += ["--show-error-codes", "--no-error-summary", "--no-pretty", "--hide-error-context"]
    env = {**os.environ, "MYPY_FORCE_COLOR": "0"}
    done = subprocess.run(command + [str(f) for f in files], capture_output=True, text=True, cwd=cwd, env=env)
    if done.returncode not in (0, 1) or "Traceback" in done.stderr + done.stdout or "INTERNAL ERROR" in done.stdout:
        raise RuntimeError(f"mypy did not complete (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stderr if log else done.stdout


def case_files(directory: Path = CASES) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if not p.name.startswith("_"))


def tally(paths: list[Path]) -> Counter[str]:
    """How many error expectations each code has over ``paths``."""
    return Counter(e.code for p in paths for e in expectations(p) if e.kind == "E")
