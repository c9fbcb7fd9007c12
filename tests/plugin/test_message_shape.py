"""Messages in mypy's shape: a short error line naming the axis, the explanation and the fix as notes.

Checked on every code's example (``cases/errors``), with ``show_fixes`` on:
each SPMD error line is under :data:`MAX_ERROR_LINE` characters (its
message, without the file and line or the code), names a mesh axis
(``axis tp`` or a type ``R@tp``) and says no fix; the notes on its line
carry the fix sentence, and the fix as an edit comes last.  A malformed
annotation (``spmd-annotation``, found while mypy analyses types) is the
exception to the last: it has no rewrite to print, and where it shows how
to write the annotation (``e.g. S(0)@tp``) it has no fix sentence.
"""

from __future__ import annotations

import fcntl
import re
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.message_parts import parts_of
from tests.hints.harness import EDIT_NOTE
from tests.plugin.harness import CASES, case_files, config_text, run_mypy

MAX_ERROR_LINE = 120
EXAMPLES = CASES / "errors"
_LINE = re.compile(r"^(?P<path>[^:\n]+\.py):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*?)"
                   r"(?:  \[(?P<code>[a-z0-9-]+)\])?$")
_NAMES_AN_AXIS = re.compile(r"\baxis \w+|@\(?\w")
ANNOTATION = "spmd-annotation"
_FIX = re.compile(r"^Fix(?: \(needs your choice\))?: ")


Reported = tuple[str, str, str, list[str]]
"""An SPMD error: its place, its code, its message and the notes after it on its line."""


def _errors_with_notes(output: str) -> list[Reported]:
    """Each SPMD error of mypy's output, with its notes."""
    found: list[Reported] = []
    for line in output.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        place = f"{match['path']}:{match['line']}"
        if match["kind"] == "error" and (match["code"] or "").startswith("spmd"):
            found.append((place, match["code"], match["message"], []))
        elif match["kind"] == "note" and found and found[-1][0] == place:
            found[-1][3].append(match["message"])
    return found


@pytest.fixture(scope="module")
def example_errors(kept_dir: Callable[[str], Path]) -> list[Reported]:
    cache = kept_dir("spmd_mypy")
    config = cache / "message_shape.ini"
    config.write_text(config_text("[spmd_mypy]\nshow_fixes = true\n"))
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        output = run_mypy(case_files(EXAMPLES), config, cache / "mypy_cache", CASES)
    return _errors_with_notes(output)


def test_every_example_is_reported(example_errors: list[Reported]) -> None:
    reported = {place.partition(":")[0] for place, _, _, _ in example_errors}
    assert reported == {str(path.relative_to(CASES)) for path in case_files(EXAMPLES)}


def test_the_error_line_is_short_and_names_the_axis(example_errors: list[Reported]) -> None:
    problems = [f"{place}: {message}" for place, _, message, _ in example_errors
                if len(message) >= MAX_ERROR_LINE or not _NAMES_AN_AXIS.search(message) or "Fix" in message]
    assert not problems, "\n".join(problems)


def test_the_fix_is_a_note_and_the_edit_comes_last(example_errors: list[Reported]) -> None:
    problems = [f"{place}: {message} {notes}" for place, code, message, notes in example_errors
                if code != ANNOTATION and not (any(_FIX.match(note) for note in notes) and notes[-1].startswith(EDIT_NOTE))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("message", [
    "add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp); the R@tp term would be counted once per "
    "rank by the pending sum. Fix: all_reduce(x, tp, src=P, dst=R) on the Partial operand first.",
    "x[i] = y uses a Partial tensor as the index on axis tp (x: R@tp, i: P@tp); a pending sum cannot select "
    "positions. Fix: all_reduce(i, tp, src=P, dst=R) first.",
    "all_gather(src=P, dst=R) does not exist on axis tp. Fix: use all_reduce(x, tp, src=P, dst=R).",
])
def test_the_parts_are_the_message_cut(message: str) -> None:
    """Nothing is lost: the parts, joined by the separator they were cut at, are the message."""
    parts = parts_of(message)
    assert "axis tp" in parts.headline and parts.fix.startswith("Fix: ")
    assert re.sub(r"[;.] ", " ", message) == re.sub(r"[;.] ", " ", " ".join(
        p for p in (parts.headline, parts.explanation, parts.fix) if p))
