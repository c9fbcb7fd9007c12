"""Which diagnostics after a round of ``--infer`` take its annotations back: only those it caused."""

from __future__ import annotations

from pathlib import Path

from spmd_mypy.migrate.infer import new_rejections
from spmd_mypy.typed_run import Diagnostic, TypedRun

OLD = "import torch\n\n\nclass Doubled(Layer):\n    def forward(self, x):\n        return x * 2\n"
NEW = ("import torch\n\n\nclass Doubled(Layer):\n    weight: Tensor[I@tp]\n"
       "    def forward(self, x: Tensor[R@tp]):\n        return x * 2\n")
"""The round declared an attribute and annotated ``forward``: old line 5 is new line 6, in a stretch the edit
rewrote (one line became two)."""

OVERRIDE = 'Signature of "forward" incompatible with supertype "Layer"'


def _run(path: Path, *found: tuple[int, str, str]) -> TypedRun:
    return TypedRun([Diagnostic(str(path), line, 5, "error", message, code) for line, message, code in found], {}, {})


def test_an_error_the_code_had_before_is_no_rejection_where_its_line_moved(tmp_path: Path) -> None:
    path = (tmp_path / "layer.py").resolve()
    before = _run(path, (5, OVERRIDE, "override"))
    after = _run(path, (6, OVERRIDE, "override"))
    assert new_rejections(before, {path: OLD}, after, {path: NEW}) == []


def test_a_new_error_is_one_named_at_the_line_it_comes_from(tmp_path: Path) -> None:
    path = (tmp_path / "layer.py").resolve()
    before = _run(path, (5, OVERRIDE, "override"))
    after = _run(path, (6, OVERRIDE, "override"), (6, 'Argument 1 of "forward" is incompatible', "override"),
                 (7, OVERRIDE, "override"), (6, "mixes Invariant with Varying on axis tp", "spmd-invariant-mix"))
    found = new_rejections(before, {path: OLD}, after, {path: NEW})
    assert [(d.line, d.message) for d in found] == [(5, 'Argument 1 of "forward" is incompatible'), (6, OVERRIDE)]


def test_an_error_in_a_module_the_round_did_not_edit_counts_where_it_is_new(tmp_path: Path) -> None:
    path, user = (tmp_path / "layer.py").resolve(), (tmp_path / "user.py").resolve()
    before = _run(user, (3, "Incompatible types in assignment", "assignment"))
    after = _run(user, (3, "Incompatible types in assignment", "assignment"),
                 (7, 'Argument 1 to "doubled" has incompatible type "int"', "arg-type"))
    found = new_rejections(before, {path: OLD}, after, {path: NEW})
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("user.py", 7, "arg-type")]
