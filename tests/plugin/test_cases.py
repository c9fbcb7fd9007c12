"""Every case file: mypy's diagnostics equal the file's expectations, exactly.

Plus the generated files (transition cases, docs/errors.md) are current, and
every error code has an example that fails and a fixed twin that passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin import generate_errors_doc, generate_transitions
from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import CASES, case_files, compare, expectations, expectations_in


@pytest.mark.parametrize("case", case_files(), ids=lambda p: str(p.relative_to(CASES)))
def test_case(case: Path, mypy_runs: MypyRuns) -> None:
    problems = compare(expectations(case), mypy_runs.diagnostics(case))
    assert not problems, "\n".join(problems)


def test_spmd_stubs_checks_clean_under_the_plugin(mypy_runs: MypyRuns) -> None:
    """The typed runtime (Megatron helpers, collectives) type-checks clean with the plugin on."""
    outside = mypy_runs.outside_cases()
    assert not outside, "\n".join(f"{path}: {d}" for path, found in outside.items() for d in found)


def test_generated_transitions_are_current() -> None:
    assert generate_transitions.TARGET.read_text() == generate_transitions.render(), (
        "core.transitions() changed: run python -m tests.plugin.generate_transitions"
    )


def test_errors_doc_is_current() -> None:
    assert generate_errors_doc.TARGET.read_text() == generate_errors_doc.render(), (
        "a per-code case file changed: run python -m tests.plugin.generate_errors_doc"
    )


@pytest.mark.parametrize("code", generate_errors_doc.codes())
def test_every_code_has_a_wrong_and_a_fixed_example(code: str) -> None:
    """Each code's example file expects that code in ``wrong`` and no error in ``fixed``."""
    path = generate_errors_doc.example_path(code)
    assert path is not None, f"no example for {code}"
    wrong, _, fixed = path.read_text().partition("\ndef fixed(")
    assert any(e.code == code for e in expectations_in(wrong)), f"{path.name}: wrong() does not expect {code}"
    assert fixed, f"{path.name}: no fixed() example"
    assert not any(e.kind == "E" for e in expectations_in(fixed)), f"{path.name}: fixed() expects errors"
