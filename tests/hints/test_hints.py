"""The hint harness on the case files: every hint that is an edit, applied alone, gives a program
that loses its error and gains none; and the harness's own parts can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hints.harness import Edit, Hinted, Tally, apply, copy_into, fix_each, parse
from tests.plugin.harness import CASES, case_files

# Codes whose hints are rewrites wherever the fix keeps the value's meaning
# and needs no choice (docs/spec.md#fixes).
REWRITTEN = ("spmd-backward", "spmd-collective", "spmd-invalid-transition", "spmd-partial-affine",
             "spmd-partial-mul", "spmd-partial-nonlinear", "spmd-partial-varying")


def _checked_alone(case: Path) -> bool:
    """Case files that mean what they say in one default run: not those checked per configuration, whose
    flag-chosen types are unions without their configurations (the harness runs plain mypy)."""
    return "configurations" not in case.relative_to(CASES).parts


@pytest.fixture(scope="module")
def case_hints(tmp_path_factory: pytest.TempPathFactory) -> Tally:
    work = tmp_path_factory.mktemp("case_hints")
    cases = [case for case in case_files() if _checked_alone(case)]
    copies = copy_into(cases, work / "cases", lambda p: "_".join(p.relative_to(CASES).parts))
    return fix_each(copies, work / "cases")


def test_every_edit_on_the_case_files_is_right(case_hints: Tally) -> None:
    tried = sum(case_hints.tried.values())
    assert tried == sum(case_hints.edits.values()), "a case-file hint could not be tried to the end"
    assert not case_hints.not_right, "\n".join(case_hints.not_right)


@pytest.mark.parametrize("code", REWRITTEN)
def test_the_fixes_that_need_no_choice_are_edits(case_hints: Tally, code: str) -> None:
    """Most diagnostics of these codes carry a rewrite (the rest are choices: unions, bias placement)."""
    assert case_hints.edits[code] >= 0.8 * case_hints.errors[code] > 0, (code, case_hints.rows())


def test_apply_replaces_spans_and_adds_imports_after_the_last_import() -> None:
    source = "import torch\nfrom x import (\n    a,\n)\n\ny = p + q\nz = p * p\n"
    edits = [
        Edit(6, 4, 6, 5, "f(p)", ("from spmd_stubs import R",)),
        Edit(6, 4, 6, 9, "g(p + q)"),  # overlaps the first: left out
        Edit(7, 8, 7, 9, "h(p)", ("from spmd_stubs import R",)),
    ]
    assert apply(source, edits) == (
        "import torch\nfrom x import (\n    a,\n)\nfrom spmd_stubs import R\n\ny = f(p) + q\nz = p * h(p)\n"
    )


def test_parse_pairs_each_error_with_its_notes(tmp_path: Path) -> None:
    output = (
        't.py:3: error: add mixes Invariant with Partial on axis tp (P@tp + I@tp)  [spmd-invariant-mix]\n'
        't.py:3: note: In `p + r`\n'
        't.py:3: note: Fix: all_reduce(x, tp, src=P, dst=I) on the Partial operand before add.\n'
        't.py:3: note: Fix as an edit: {"line": 3, "column": 8, "end_line": 3, "end_column": 9, '
        '"replacement": "spmd.all_reduce(p, tp, src=P, dst=I)", "imports": []}\n'
        't.py:4: error: mul mixes Invariant with Varying on axis tp (I@tp, V@tp)  [spmd-invariant-mix]\n'
        't.py:4: note: In `r * v`: ...\n'
        't.py:4: note: Fix (needs your choice): ...\n'
        't.py:4: note: Fix as an edit: none (needs your choice)\n'
        't.py:5: error: Name "R" is not defined  [name-defined]\n'
    )
    [(path, errors)] = parse(output, tmp_path).items()
    assert path == (tmp_path / "t.py").resolve()
    assert errors[0].edit == Edit(3, 8, 3, 9, "spmd.all_reduce(p, tp, src=P, dst=I)")
    assert errors[0].message == ("add mixes Invariant with Partial on axis tp (P@tp + I@tp) In `p + r` "
                                 "Fix: all_reduce(x, tp, src=P, dst=I) on the Partial operand before add.")
    assert errors[1].edit is None and errors[1].needs_choice
    assert errors[2] == Hinted(5, "name-defined", 'Name "R" is not defined', None) and not errors[2].needs_choice
