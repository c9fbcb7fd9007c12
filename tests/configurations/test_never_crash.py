"""Deciding a module's flags never crashes mypy: a failure is said once, and the module is checked undecided."""

from __future__ import annotations

import pytest
from mypy.nodes import MypyFile
from mypy.options import Options

from spmd_mypy.configurations import pruning
from spmd_mypy.main import SpmdPlugin


def test_a_failing_decision_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def broken(tree: MypyFile, flags: pruning.Flags) -> None:
        raise RuntimeError("an unforeseen tree")

    monkeypatch.setattr(pruning, "prune", broken)
    plugin = SpmdPlugin(Options())
    module = MypyFile([], [])
    module._fullname = "model"
    module.path = "model.py"
    assert plugin.get_additional_deps(module) == []
    assert capsys.readouterr().err == (
        "spmd_mypy: model.py: the configuration's flags could not be decided (RuntimeError: an unforeseen tree); "
        "every branch is checked. Please report it.\n")
