"""``spmd-migrate --infer`` under declared configurations: a type is written only where it holds in every one.

One inference run over ``infer_configurations/`` (its ``mypy.ini`` declares
``sp`` and ``no_sp`` on ``sequence_parallel``), each round checked in both.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.migrate.infer import Inference, infer, overlay_toml
from spmd_mypy.migrate.overlay import SpmdChoice, SpmdType, load_overlays

CASE = Path(__file__).resolve().parent / "infer_configurations"


@pytest.fixture(scope="module")
def cache(kept_dir: Callable[[str], Path]) -> Iterator[Path]:
    kept = kept_dir("spmd_infer")
    with open(kept / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield kept / "mypy"


@pytest.fixture(scope="module")
def inferred(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Inference, Path]:
    workdir = tmp_path_factory.mktemp("configurations")
    shutil.copy(CASE / "block.py", workdir / "block.py")
    return infer([workdir], CASE / "mypy.ini", cache), (workdir / "block.py").resolve()


def test_a_type_both_configurations_decide_is_written(inferred: tuple[Inference, Path]) -> None:
    result, path = inferred
    assert "def _bias_added(b: Tensor[R@tp]) -> Tensor[R@tp]:\n" in result.texts[path]


def test_types_a_flag_chooses_are_written_as_the_alias_that_chooses_them(inferred: tuple[Inference, Path]) -> None:
    """``S(0)@tp`` in sp and ``I@tp`` in no_sp is ``Activation``: neither type alone holds in both."""
    result, path = inferred
    assert "def _scaled(x: Activation) -> Activation:\n" in result.texts[path]


def test_types_no_alias_chooses_leave_a_todo(inferred: tuple[Inference, Path]) -> None:
    result, path = inferred
    text = result.texts[path]
    assert "def _picked(z):\n" in text
    [todo] = [line for line in text.splitlines() if line.startswith("# TODO(spmd-migrate): parameter z of _picked")]
    assert "the configurations disagree (sp: Tensor[S(-1)@tp], no_sp: Tensor[R@tp])" in todo


def test_a_type_one_configuration_decides_and_another_does_not_leaves_a_todo(
        inferred: tuple[Inference, Path]) -> None:
    result, path = inferred
    text = result.texts[path]
    assert "def _halved(v):\n" in text
    [todo] = [line for line in text.splitlines() if line.startswith("# TODO(spmd-migrate): parameter v of _halved")]
    assert "the configurations disagree (sp: Tensor[S(-1)@tp]; no_sp: no type)" in todo


def test_what_is_written_checks_in_every_configuration(inferred: tuple[Inference, Path]) -> None:
    result, path = inferred
    assert [d for d in result.diagnostics if d.severity == "error"] == []
    assert result.runs % 2 == 0  # every check ran in both configurations


def test_the_overlay_writes_the_alias_as_the_flag_choice(inferred: tuple[Inference, Path], tmp_path: Path) -> None:
    result, _ = inferred
    overlay_file = tmp_path / "inferred.toml"
    overlay_file.write_text(overlay_toml(result.overlays()))
    choice = SpmdChoice("sequence_parallel", SpmdType.parse("S(0)@tp", ""), SpmdType.parse("I@tp", ""))
    assert load_overlays([overlay_file])["block"].functions["_scaled"] == {"x": choice, "return": choice}


def test_a_second_run_changes_nothing(inferred: tuple[Inference, Path], cache: Path, tmp_path: Path) -> None:
    result, path = inferred
    (tmp_path / "block.py").write_text(result.texts[path])
    again = infer([tmp_path], CASE / "mypy.ini", cache)
    assert not again.written
    assert again.texts[(tmp_path / "block.py").resolve()] == result.texts[path]
