"""The bug gallery, bug by bug: each ``*_bug.py`` reported where it says, each ``*_fixed.py`` clean.

    python scripts/check_gallery.py [--config-file FILE] [--cache-dir DIR] [DIR]

A bug file marks the line the checker must report with a comment naming the
error code (``# E: spmd-invariant-mix``; several codes separated by commas).
One mypy run (with the plugin, under FILE, default
``spmd_mypy/recommended.ini``) checks every ``*_bug.py`` and ``*_fixed.py``
of DIR (default ``examples/bugs``); then a table says, per expected
diagnostic, whether it was reported at its line, and per fixed twin whether
it checks clean.  The exit status is 0 when everything is as expected, 1
when a bug is missed, a fixed twin is not clean, a file reports something
unmarked or a bug has no twin, and 2 when mypy stops.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPECT = re.compile(r"#\s*E:\s*(?P<codes>spmd-[a-z-]+(?:\s*,\s*spmd-[a-z-]+)*)\s*$")
ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")


def expected_errors(text: str) -> set[tuple[int, str]]:
    """The (line, code) pairs a bug file's ``# E:`` comments expect."""
    expected = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            expected |= {(number, code.strip()) for code in match["codes"].split(",")}
    return expected


@dataclass(frozen=True)
class Row:
    bug: str
    code: str
    line: int
    caught: bool


@dataclass
class Verdict:
    """What the gallery's check found: one row per expected diagnostic, one flag per fixed twin."""

    rows: list[Row] = field(default_factory=list)
    clean: dict[str, bool] = field(default_factory=dict)
    reported: list[str] = field(default_factory=list)
    """mypy's lines that were expected."""
    unexpected: list[str] = field(default_factory=list)
    """mypy's error lines no ``# E:`` comment asked for (in a bug file or a fixed twin)."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.caught for r in self.rows) and all(self.clean.values()) and not self.unexpected \
            and not self.problems


def gallery(directory: Path) -> tuple[list[Path], list[Path]]:
    return sorted(directory.glob("*_bug.py")), sorted(directory.glob("*_fixed.py"))


def judge(directory: Path, output: str, cwd: Path) -> Verdict:
    """Compare mypy's ``output`` (paths relative to ``cwd``) with what the gallery in ``directory`` expects."""
    bugs, fixes = gallery(directory)
    verdict = Verdict()
    reported: dict[Path, list[tuple[int, str, str]]] = {}
    last: tuple[Path, int] | None = None
    for text in output.splitlines():
        match = ERROR.match(text)
        if match:
            path = (cwd / match["path"]).resolve()
            reported.setdefault(path, []).append((int(match["line"]), match["code"] or "", text))
            last = (path, int(match["line"]))
        elif last is not None and text.startswith(f"{os.path.relpath(last[0], cwd)}:{last[1]}: note: "):
            line, code, shown = reported[last[0]][-1]  # the error's explanation and fix: shown with it
            reported[last[0]][-1] = (line, code, f"{shown}\n{text}")
        else:
            last = None
    for bug in bugs:
        name = bug.name[: -len("_bug.py")]
        expected = expected_errors(bug.read_text())
        if not expected:
            verdict.problems.append(f"{bug.name} marks no line with # E: <code>")
        if not (directory / f"{name}_fixed.py").exists():
            verdict.problems.append(f"{bug.name} has no fixed twin {name}_fixed.py")
        found = reported.get(bug.resolve(), [])
        for line, code in sorted(expected):
            verdict.rows.append(Row(name, code, line, any((line, code) == (got, c) for got, c, _ in found)))
        for line, code, text in found:
            (verdict.reported if (line, code) in expected else verdict.unexpected).append(text)
    for fixed in fixes:
        found = reported.get(fixed.resolve(), [])
        verdict.clean[fixed.name[: -len("_fixed.py")]] = not found
        verdict.unexpected.extend(text for _, _, text in found)
        if not (directory / fixed.name.replace("_fixed.py", "_bug.py")).exists():
            verdict.problems.append(f"{fixed.name} has no bug twin")
    return verdict


def _shown(diagnostics: list[str]) -> str:
    """Each diagnostic's lines (an error and its notes), indented and wrapped."""
    return "\n".join(textwrap.fill(line, width=110, initial_indent="    ", subsequent_indent="        ",
                                   break_on_hyphens=False)
                     for diagnostic in diagnostics for line in diagnostic.splitlines())


def report(verdict: Verdict) -> str:
    """The diagnostics (indented: expected output, not a failure), the table, and what went wrong."""
    parts = []
    if verdict.reported:
        parts.append(f"reported, as expected ({len(verdict.reported)} diagnostics):\n{_shown(verdict.reported)}\n")
    width = max([len("bug"), *(len(r.bug) for r in verdict.rows)])
    code_width = max([len("code"), *(len(r.code) for r in verdict.rows)])
    table = [f"{'bug':<{width}}  {'code':<{code_width}}  line  caught"]
    table += [f"{r.bug:<{width}}  {r.code:<{code_width}}  {r.line:>4}  {'yes' if r.caught else 'NO'}"
              for r in verdict.rows]
    parts.append("\n".join(table))
    clean = sum(verdict.clean.values())
    parts.append(f"fixed twins checking clean: {clean} of {len(verdict.clean)}"
                 + "".join(f"\n  NOT clean: {name}_fixed.py" for name, ok in verdict.clean.items() if not ok))
    if verdict.unexpected:
        parts.append(f"reported but not marked with # E: (unexpected):\n{_shown(verdict.unexpected)}")
    parts.extend(f"problem: {problem}" for problem in verdict.problems)
    caught = sum(r.caught for r in verdict.rows)
    parts.append(f"{'ok' if verdict.ok else 'FAILED'}: {caught} of {len(verdict.rows)} bugs caught at their line, "
                 f"{clean} of {len(verdict.clean)} fixes clean")
    return "\n".join(parts)


def run_mypy(files: list[Path], config: Path, cache_dir: Path | None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-color-output", "--show-error-codes",
               "--no-error-summary", "--no-pretty", "--hide-error-context"]
    if cache_dir is not None:
        command += ["--cache-dir", str(cache_dir)]
    return subprocess.run(command + [str(f) for f in files], capture_output=True, text=True,
                          env={**os.environ, "MYPY_FORCE_COLOR": "0"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check_gallery.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=REPO / "examples" / "bugs")
    parser.add_argument("--config-file", type=Path, default=REPO / "spmd_mypy" / "recommended.ini")
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)
    bugs, fixes = gallery(args.directory)
    if not bugs:
        print(f"check_gallery.py: no *_bug.py in {args.directory}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    done = run_mypy(bugs + fixes, args.config_file, args.cache_dir)
    if done.returncode not in (0, 1) or "INTERNAL ERROR" in done.stdout + done.stderr:
        print(f"mypy did not complete (exit {done.returncode}):\n{done.stdout}{done.stderr}", file=sys.stderr)
        return 2
    verdict = judge(args.directory, done.stdout, Path.cwd())
    print(report(verdict))
    print(f"(one mypy run over {len(bugs) + len(fixes)} files: {time.perf_counter() - started:.1f} s)")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
