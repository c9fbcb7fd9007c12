"""The hint harness: apply the fixes the checker prints as edits, mechanically, and check again.

mypy runs with ``[spmd_mypy] show_fixes = true``, so every SPMD error is
followed by a ``Fix as an edit`` note (:mod:`spmd_mypy.fixes`).  Two
questions, each answered with one mypy run per round over a batch of files:

* :func:`fix_whole` -- a program: apply every edit of a round, check again,
  until it checks clean, an error needs a choice, or the rounds run out.
  The programs that end clean are then run against their reference
  (the bug gallery on gloo ranks, the generated programs in the simulated
  world: ``tests/examples/test_bug_hints.py``, ``tests/property/spmd_hints.py``).
* :func:`fix_each` -- one hint at a time: a copy of the file with that one
  edit applied (and the edits of any error it newly causes, for a few
  rounds) must lose that error and gain none.  For files with many errors
  and no reference (the case files).
"""

from __future__ import annotations

import ast
import enum
import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from tests.plugin.harness import config_text, run_mypy

_LINE = re.compile(r"^(?P<path>[^:\n]+\.py):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")
EDIT_NOTE = "Fix as an edit: "
CONFIG = "[spmd_mypy]\nshow_fixes = true\n"


@dataclass(frozen=True)
class Edit:
    """A span of the source (lines 1-based, columns 0-based, end exclusive) and its replacement."""

    line: int
    column: int
    end_line: int
    end_column: int
    replacement: str
    imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hinted:
    """One SPMD error and the edit its note carries (None: the fix needs a choice)."""

    line: int
    code: str
    message: str
    edit: Edit | None

    @property
    def needs_choice(self) -> bool:
        """An SPMD error whose fix is no edit (any other error is no hint at all)."""
        return self.edit is None and self.code.startswith("spmd")

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the error when lines move (an added import shifts them)."""
        return self.code, self.message


def parse(output: str, root: Path) -> dict[Path, list[Hinted]]:
    """The errors of mypy's ``output``, per file, each with the edit of its ``Fix as an edit`` note; its
    other notes (where, why, the fix in words) join its message, which tells apart errors of one line."""
    found: dict[Path, list[Hinted]] = {}
    last: tuple[Path, int] | None = None
    for text in output.splitlines():
        match = _LINE.match(text)
        if match is None:
            continue
        path, line, message = (root / match["path"]).resolve(), int(match["line"]), match["message"]
        if match["kind"] == "error":
            found.setdefault(path, []).append(Hinted(line, match["code"] or "", message, None))
            last = (path, line)
        elif last == (path, line) and message.startswith(EDIT_NOTE):
            errors = found[path]
            errors[-1] = replace(errors[-1], edit=_edit(message[len(EDIT_NOTE):]))
        elif last == (path, line):
            errors = found[path]
            errors[-1] = replace(errors[-1], message=f"{errors[-1].message} {message}")
    return found


def _edit(text: str) -> Edit | None:
    if not text.startswith("{"):
        return None
    fields = json.loads(text)
    return Edit(fields["line"], fields["column"], fields["end_line"], fields["end_column"],
                fields["replacement"], tuple(fields["imports"]))


def apply(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with ``edits`` applied: overlapping ones after the first are left out, imports go
    after the module's last top-level import."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    chosen: list[tuple[int, int, Edit]] = []
    for edit in edits:
        start = offsets[edit.line - 1] + edit.column
        end = offsets[edit.end_line - 1] + edit.end_column
        if all(end <= s or start >= e for s, e, _ in chosen):
            chosen.append((start, end, edit))
    text = source
    for start, end, edit in sorted(chosen, key=lambda c: c[0], reverse=True):
        text = text[:start] + edit.replacement + text[end:]
    imports = [i for _, _, edit in chosen for i in edit.imports]
    return _with_imports(text, list(dict.fromkeys(imports)))


def _with_imports(text: str, imports: list[str]) -> str:
    if not imports:
        return text
    lines = text.splitlines(keepends=True)
    tops = ast.parse(text).body
    last = max((node.end_lineno or node.lineno for node in tops if isinstance(node, (ast.Import, ast.ImportFrom))),
               default=0)
    return "".join(lines[:last] + [f"{i}\n" for i in imports] + lines[last:])


def check(paths: Sequence[Path], workdir: Path) -> dict[Path, list[Hinted]]:
    """One mypy run over ``paths`` (their directory's root is ``workdir``), fixes shown."""
    config = workdir / "hints.ini"
    config.write_text(config_text(CONFIG))
    output = run_mypy(list(paths), config, workdir / "mypy_cache", workdir)
    found = parse(output, workdir)
    return {path.resolve(): found.get(path.resolve(), []) for path in paths}


class Status(str, enum.Enum):
    CLEAN = "checks clean"
    CHOICE = "an error needs a choice"
    STUCK = "errors remain"


@dataclass
class Whole:
    """One program fixed as a whole: its first errors, the status it ended in, the rounds it took."""

    first: list[Hinted]
    status: Status = Status.STUCK
    rounds: int = 0


def _in_rounds(paths: Sequence[Path], workdir: Path, rounds: int,
               step: Callable[[Path, list[Hinted], bool], list[Edit]]) -> None:
    """Check the open files, round after round: ``step`` sees each file's errors (and whether this is
    the last round) and gives the edits for another round; a file it gives none has ended."""
    open_paths = list(paths)
    for round_number in range(rounds + 1):
        if not open_paths:
            break
        found = check(open_paths, workdir)
        still_open = []
        for path in open_paths:
            edits = step(path, found[path], round_number == rounds)
            if edits:
                path.write_text(apply(path.read_text(), edits))
                still_open.append(path)
        open_paths = still_open


def fix_whole(paths: Sequence[Path], workdir: Path, rounds: int = 4) -> dict[Path, Whole]:
    """Fix every file in place: each round applies all its edits, until every file ends."""
    results: dict[Path, Whole] = {}

    def step(path: Path, errors: list[Hinted], last: bool) -> list[Edit]:
        if path in results:
            results[path].rounds += 1
        whole = results.setdefault(path, Whole(errors))
        if not errors:
            whole.status = Status.CLEAN
        elif any(e.needs_choice for e in errors):
            whole.status = Status.CHOICE
        elif not last:
            return [e.edit for e in errors if e.edit is not None]
        return []

    _in_rounds([p.resolve() for p in paths], workdir, rounds, step)
    return results


@dataclass
class Tally:
    """Per error code: the hints that are edits, those tried to the end, and the ones that ended right."""

    errors: Counter[str] = field(default_factory=Counter)
    edits: Counter[str] = field(default_factory=Counter)
    tried: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    """Hints whose program checks clean but computes something else: each is a bug."""
    not_right: list[str] = field(default_factory=list)
    """Where each tried hint that did not end right was given."""

    def add(self, hinted: Hinted, right: bool | None) -> None:
        """``right``: None where the program also needs a choice, so the edit could not be tried to the end."""
        self.errors[hinted.code] += 1
        if hinted.edit is not None:
            self.edits[hinted.code] += 1
            self.tried[hinted.code] += right is not None
            self.right[hinted.code] += bool(right)

    def rows(self) -> list[tuple[str, int, int, int, int]]:
        """(code, errors, edits, tried, right) per error code."""
        return [(code, n, self.edits[code], self.tried[code], self.right[code]) for code, n in sorted(self.errors.items())]


def fix_each(paths: Sequence[Path], workdir: Path, rounds: int = 3) -> Tally:
    """One hint at a time (see the module docstring); a hint is right when its copy loses its error
    and, after following the edits of the errors it newly causes, gains none."""
    originals = check(paths, workdir)
    variants: dict[Path, tuple[list[Hinted], Hinted]] = {}
    tally = Tally()
    for path, errors in originals.items():
        for number, hinted in enumerate(errors):
            if not hinted.code.startswith("spmd"):
                continue
            if hinted.edit is None:
                tally.add(hinted, None)
                continue
            variant = workdir / "each" / f"{path.stem}__{number}.py"
            variant.parent.mkdir(parents=True, exist_ok=True)
            variant.write_text(apply(path.read_text(), [hinted.edit]))
            variants[variant.resolve()] = (errors, hinted)
    outcome = _follow(list(variants), variants, workdir, rounds)
    for variant, (_, hinted) in variants.items():
        tally.add(hinted, outcome[variant])
        if not outcome[variant]:
            tally.not_right.append(f"{variant.name}:{hinted.line}: [{hinted.code}] {hinted.message}")
    return tally


def _follow(paths: list[Path], origin: dict[Path, tuple[list[Hinted], Hinted]], workdir: Path,
            rounds: int) -> dict[Path, bool]:
    """Whether each copy ends with no error its original lacked (edits of new errors applied)."""
    right: dict[Path, bool] = {}

    def step(path: Path, errors: list[Hinted], last: bool) -> list[Edit]:
        before, hinted = origin[path]
        new = _new_errors(errors, before, hinted)
        edits = [e.edit for e in new if e.edit is not None]
        # Ended: nothing new (right), or a new error that is a choice or no SPMD error at all.
        right[path] = not new
        return [] if last or len(edits) < len(new) else edits

    _in_rounds(paths, workdir, rounds, step)
    return right


def _new_errors(after: list[Hinted], before: list[Hinted], fixed: Hinted) -> list[Hinted]:
    """The errors of a fixed copy that its original did not have, the fixed one counted as gone."""
    expected = Counter(e.key for e in before)
    expected[fixed.key] -= 1
    new = []
    for error in after:
        if expected[error.key] > 0:
            expected[error.key] -= 1
        else:
            new.append(error)
    return new


def copy_into(paths: Iterable[Path], directory: Path, rename: Callable[[Path], str] = lambda p: p.name) -> list[Path]:
    """Copies of ``paths`` in ``directory`` (made empty first)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    copies = []
    for path in paths:
        copy = directory / rename(path)
        shutil.copyfile(path, copy)
        copies.append(copy)
    return copies
