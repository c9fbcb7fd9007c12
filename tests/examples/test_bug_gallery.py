"""The checker flags every bug of ``examples/bugs`` where it is, and none of the fixes.

Each ``<name>_bug.py`` marks the offending line with ``# E: spmd-<code>``; mypy
with the plugin must report exactly those (line, code) pairs in that file and
nothing else.  Each ``<name>_fixed.py`` must check clean.  The comments are
read by ``scripts/check_gallery.py``, which the main command runs
(``test_check_gallery.py`` tests it).
"""

from __future__ import annotations

import pytest
from spmd_examples import BUGS, ROOT, MypyRun, check_gallery

BUG_NAMES = sorted(p.name[: -len("_bug.py")] for p in BUGS.glob("*_bug.py"))


def expected_errors(path: str) -> set[tuple[int, str]]:
    return check_gallery.expected_errors((ROOT / path).read_text())


def test_gallery_is_complete() -> None:
    assert len(BUG_NAMES) >= 10
    for name in BUG_NAMES:
        assert (BUGS / f"{name}_fixed.py").exists(), f"{name} has no fixed twin"
        assert expected_errors(f"examples/bugs/{name}_bug.py"), f"{name}_bug.py marks no # E: line"
    assert not [p.name for p in BUGS.glob("*_fixed.py") if p.name[: -len("_fixed.py")] not in BUG_NAMES]


@pytest.mark.parametrize("name", BUG_NAMES)
def test_bug_is_reported_at_its_line(example_mypy_run: MypyRun, name: str) -> None:
    path = f"examples/bugs/{name}_bug.py"
    found = example_mypy_run.errors.get(path, [])
    assert {(d.line, d.code) for d in found} == expected_errors(path), example_mypy_run.output
    assert not [d for d in found if d.configurations], "the gallery's bugs do not depend on a flag"


@pytest.mark.parametrize("name", BUG_NAMES)
def test_fixed_twin_checks_clean(example_mypy_run: MypyRun, name: str) -> None:
    path = f"examples/bugs/{name}_fixed.py"
    assert example_mypy_run.clean(path), example_mypy_run.output
