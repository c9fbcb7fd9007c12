"""``scripts/check_gallery.py``, the main command's gallery step: a missed bug or a fix that is not clean fails it.

``test_bug_gallery.py`` checks the gallery itself; here the script is given
galleries that are wrong on purpose.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from spmd_examples import BUGS, ROOT, check_gallery

BUG = """\
from spmd_stubs import I, P, Tensor
from spmd_stubs.axes import tp


def f(p: Tensor[P@tp], r: Tensor[I@tp]) -> Tensor[P@tp]:
    return p + r  # E: spmd-invariant-mix
"""
FIXED = BUG.replace("p + r  # E: spmd-invariant-mix", "p")


def _error(path: str, line: int, code: str) -> str:
    return f"{path}:{line}: error: something on axis tp (P@tp + I@tp)  [{code}]"


@pytest.fixture
def gallery(tmp_path: Path) -> Path:
    (tmp_path / "mix_bug.py").write_text(BUG)
    (tmp_path / "mix_fixed.py").write_text(FIXED)
    return tmp_path


def test_a_bug_reported_at_its_line_passes(gallery: Path) -> None:
    verdict = check_gallery.judge(gallery, _error("mix_bug.py", 6, "spmd-invariant-mix") + "\n", gallery)
    assert verdict.ok
    assert verdict.rows == [check_gallery.Row("mix", "spmd-invariant-mix", 6, True)]
    assert verdict.clean == {"mix": True}


@pytest.mark.parametrize("output", [
    "",  # not reported at all
    _error("mix_bug.py", 5, "spmd-invariant-mix"),  # at another line
    _error("mix_bug.py", 6, "spmd-partial-affine"),  # with another code
])
def test_a_missed_bug_fails(gallery: Path, output: str) -> None:
    verdict = check_gallery.judge(gallery, output, gallery)
    assert not verdict.ok
    assert verdict.rows == [check_gallery.Row("mix", "spmd-invariant-mix", 6, False)]
    assert check_gallery.report(verdict).splitlines()[-1].startswith("FAILED: 0 of 1 bugs caught")


def test_a_fix_that_is_not_clean_fails(gallery: Path) -> None:
    output = _error("mix_bug.py", 6, "spmd-invariant-mix") + "\n" + _error("mix_fixed.py", 6, "spmd-collective")
    verdict = check_gallery.judge(gallery, output, gallery)
    assert not verdict.ok and verdict.clean == {"mix": False}
    assert "  NOT clean: mix_fixed.py" in check_gallery.report(verdict)


def test_a_bug_without_twin_or_mark_fails(gallery: Path) -> None:
    (gallery / "mix_fixed.py").unlink()
    (gallery / "unmarked_bug.py").write_text(FIXED)
    (gallery / "unmarked_fixed.py").write_text(FIXED)
    verdict = check_gallery.judge(gallery, _error("mix_bug.py", 6, "spmd-invariant-mix"), gallery)
    assert verdict.problems == ["mix_bug.py has no fixed twin mix_fixed.py",
                                "unmarked_bug.py marks no line with # E: <code>"]
    assert not verdict.ok


def test_the_script_fails_on_a_gallery_whose_bug_is_fixed(tmp_path: Path, kept_dir: Callable[[str], Path]) -> None:
    """The real gallery with one bug file replaced by its fixed twin: one mypy run, exit 1, that row says NO."""
    copy = tmp_path / "bugs"
    shutil.copytree(BUGS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(BUGS / "row_parallel_bias_fixed.py", copy / "row_parallel_bias_bug.py")
    (copy / "row_parallel_bias_bug.py").write_text((copy / "row_parallel_bias_bug.py").read_text()
                                                  + "# E: spmd-invariant-mix\n")
    cache = kept_dir("check-gallery-mypy")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_gallery.py"), "--cache-dir", str(cache),
                           "bugs"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line.split()[-1] for line in done.stdout.splitlines() if "  spmd-" in line}
    assert rows.pop("row_parallel_bias") == "NO", done.stdout
    assert set(rows.values()) == {"yes"} and len(rows) >= 10, done.stdout
    assert "FAILED: 11 of 12 bugs caught at their line, 12 of 12 fixes clean" in done.stdout
    # mypy's diagnostics are shown as expected output: indented under a heading, never as a bare error line.
    assert "reported, as expected (11 diagnostics):" in done.stdout
    assert not [line for line in done.stdout.splitlines() if ": error: " in line and not line.startswith("    ")]
