"""Every case file: mypy's diagnostics equal the file's expectations, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import CASES, case_files, compare, expectations


@pytest.mark.parametrize("case", case_files(), ids=lambda p: str(p.relative_to(CASES)))
def test_case(case: Path, mypy_runs: MypyRuns) -> None:
    problems = compare(expectations(case), mypy_runs.diagnostics(case))
    assert not problems, "\n".join(problems)


def test_generated_transitions_are_current() -> None:
    from tests.plugin import generate_transitions

    assert generate_transitions.TARGET.read_text() == generate_transitions.render(), (
        "algebra.transitions() changed: run python -m tests.plugin.generate_transitions"
    )
