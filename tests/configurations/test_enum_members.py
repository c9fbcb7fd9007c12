"""A flag declared by its enum type, set to a member the class lacks: one ``spmd-configuration`` error where
code names the class's members, in every configuration's run, never a silent "every comparison is false"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.harness import ROOT

LAYER = """\
from enum import Enum, auto


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


def collective(mode: TensorParallelLinearMode) -> str:
    if mode is TensorParallelLinearMode.ALL_REDUCE:
        return "all_reduce"
    return 1
"""
"""``return 1`` is wrong where ``mode`` is not ALL_REDUCE: reported only in the configurations that run it."""


def _config(values: dict[str, str]) -> str:
    lines = "".join(f"    {name}: tp_mode = {value}\n" for name, value in values.items())
    return f"[mypy]\nplugins = spmd_mypy\nmypy_path = {ROOT}\n\n[spmd_mypy]\nconfigurations =\n{lines}"


def _run(tmp_path: Path, values: dict[str, str], *tool: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mypy.ini").write_text(_config(values))
    (tmp_path / "layer.py").write_text(LAYER)
    command = [sys.executable, "-m", *tool, "--cache-dir", str(tmp_path / "cache"), "--hide-error-context",
               "--no-pretty", "layer.py"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MYPY_FORCE_COLOR": "0"})


def test_a_member_the_class_lacks_is_an_error_naming_its_members(tmp_path: Path) -> None:
    run = _run(tmp_path, {"rs": "TensorParallelLinearMode.REDUCE_SCATER", "ar": "TensorParallelLinearMode.ALL_REDUCE"},
               "spmd_mypy.configurations.cli")
    said = run.stdout + run.stderr
    assert run.returncode == 1 and "Traceback" not in said, said
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert errors[0] == (
        "layer.py:10: error: configuration rs sets tp_mode = TensorParallelLinearMode.REDUCE_SCATER, which is no "
        "member of layer.TensorParallelLinearMode: every comparison with its members is decided false  "
        "[spmd-configuration]"), said
    assert ("layer.py:10: note: Fix (needs your choice): set tp_mode to one of TensorParallelLinearMode.ALL_REDUCE, "
            "TensorParallelLinearMode.REDUCE_SCATTER in the configurations of [spmd_mypy]") in run.stdout, said


@pytest.mark.parametrize("module", ["", "layer."])
def test_each_configuration_decides_the_comparisons_by_the_members_class(tmp_path: Path, module: str) -> None:
    """``mode`` is no flag's name: the member's class decides; a module path, where written, is the class's."""
    run = _run(tmp_path, {"rs": f"{module}TensorParallelLinearMode.REDUCE_SCATTER",
                          "ar": f"{module}TensorParallelLinearMode.ALL_REDUCE"}, "spmd_mypy.configurations.cli")
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("layer.py:12: error: [rs] Incompatible return value type"), (
        run.stdout + run.stderr)


def test_a_module_path_that_names_another_class_checks_nothing_of_this_one(tmp_path: Path) -> None:
    """Where the written path is not the class's, the misspelt member goes unreported (the comparisons are
    still decided by the class's own name: documented in docs/checker.md)."""
    run = _run(tmp_path, {"rs": "elsewhere.TensorParallelLinearMode.REDUCE_SCATER"}, "mypy")
    assert "spmd-configuration" not in run.stdout, run.stdout
