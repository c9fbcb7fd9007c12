"""The coverage report's figures and places on the fixture (tests/coverage/fixture), reasoned out by hand.

One strict in-process mypy run for the module; its cache lives in pytest's
cache directory, behind a lock for xdist workers.

What counts (spmd_mypy/coverage/scopes.py, figures.py), per function:

typed_block.column        x * w, x, w | y.relu(), y | z * 2.0, z            7 known of 7
typed_block.Block.forward column(x, w) * self.scale, column(x, w), x, w,
                          self.scale                                        5 of 5
leaky.helper              unannotated, unchecked: its expressions are Any   0 of 0
leaky.plain               t + 1, t (plain torch.Tensor)                     0 of 2
leaky.calls_helper        x (twice); helper(x), h, h + x, g are Any         2 of 2
leaky.calls_plain         plain(x) unknown, x | p * x (R: the unknown p
                          takes no part), p unknown, x | q.relu(), q        5 of 7
leaky.unmodelled          x.map_(x, max) unknown, x, x | y + x (R), y
                          unknown, x | z, x (the tuple is no tensor) |
                          z.sum(), z                                        8 of 10

Targets (y, z, h, ...) are not counted; docstrings are strings.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.coverage import Coverage, measure
from spmd_mypy.coverage.figures import Figures
from spmd_mypy.typed_run import check
from tests.plugin.harness import config_text

FIXTURE = Path(__file__).resolve().parent / "fixture"


@pytest.fixture(scope="module")
def coverage(kept_dir: Callable[[str], Path]) -> Coverage:
    root = kept_dir("spmd_coverage")
    config = root / "coverage.ini"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        config.write_text(config_text())
        run = check([FIXTURE], config, root / "mypy_cache", strict=True)
    return measure(run)


def test_figures_per_function(coverage: Coverage) -> None:
    assert {(f.module, f.name): (f.figures.expressions, f.figures.known) for f in coverage.functions} == {
        ("leaky", "<module>"): (0, 0),
        ("leaky", "helper"): (0, 0),
        ("leaky", "plain"): (2, 0),
        ("leaky", "calls_helper"): (2, 2),
        ("leaky", "calls_plain"): (7, 5),
        ("leaky", "unmodelled"): (10, 8),
        ("typed_block", "<module>"): (0, 0),
        ("typed_block", "column"): (7, 7),
        ("typed_block", "Block.forward"): (5, 5),
    }


def test_figures_per_module_and_overall(coverage: Coverage) -> None:
    assert [(m.module, m.path, m.figures) for m in coverage.modules] == [
        ("leaky", str(Path("tests/coverage/fixture/leaky.py")), Figures(21, 15)),
        ("typed_block", str(Path("tests/coverage/fixture/typed_block.py")), Figures(12, 12)),
    ]
    assert coverage.figures == Figures(33, 27)
    assert round(coverage.figures.share or 0, 4) == 0.8182
    assert [m.figures.share for m in coverage.modules] == [15 / 21, 1.0]
    functions = {f.name: f.figures.share for f in coverage.functions}
    assert (functions["helper"], functions["plain"], functions["calls_plain"]) == (None, 0.0, 5 / 7)


def test_places_in_order_of_typed_flow_cut_off(coverage: Coverage) -> None:
    """helper(x): itself, h, h + x and g are Any (4); plain(x): itself and p are unknown, p * x is R again (2);
    x.map_(x, max): itself and y (2; z = y + x is R), after plain(x) by position; a return cuts nothing here."""
    assert [(p.line, p.column, p.function, p.code, p.kind, p.cut) for p in coverage.places] == [
        (18, 9, "calls_helper", "spmd-untyped-boundary", "unannotated parameter", 4),
        (24, 9, "calls_plain", "spmd-untyped-boundary", "parameter typed plain torch.Tensor", 2),
        (30, 9, "unmodelled", "spmd-unmodelled", "unmodelled op", 2),
        (26, 12, "calls_plain", "spmd-untyped-boundary", "return typed plain torch.Tensor", 0),
    ]
    assert {p.module for p in coverage.places} == {"leaky"}
    assert coverage.places[0].message == "`helper` takes Tensor[R@tp] as `t`, lost at an unannotated parameter"
    assert coverage.other_errors == 0


def test_the_json_holds_every_figure_and_place(coverage: Coverage) -> None:
    data = coverage.as_json()
    assert data["overall"] == {"expressions": 33, "known": 27, "share": 0.8182}
    leaky = data["modules"][0]
    assert (leaky["module"], leaky["expressions"], leaky["known"], leaky["share"]) == ("leaky", 21, 15, 0.7143)
    assert [(f["name"], f["line"], f["share"]) for f in leaky["functions"]] == [
        ("<module>", 1, None), ("helper", 9, None), ("plain", 13, 0.0), ("calls_helper", 17, 1.0),
        ("calls_plain", 23, 0.7143), ("unmodelled", 29, 0.8),
    ]
    assert [(p["line"], p["kind"], p["cut"]) for p in data["places"]] == [
        (18, "unannotated parameter", 4), (24, "parameter typed plain torch.Tensor", 2),
        (30, "unmodelled op", 2), (26, "return typed plain torch.Tensor", 0),
    ]
