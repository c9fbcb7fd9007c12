"""The hidden SPMD type argument survives mypy's incremental cache and the daemon.

The SPMD type of a function's signature lives in ``a.py``'s cache entry once
``a.py`` is fresh; ``b.py`` is rechecked against it.  If the representation
did not survive serialisation, ``b.py`` would see ``Tensor[Any]`` (and miss
the error) on the second run.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import ROOT, case_files, parse_output, run_mypy

MODULE_A = """\
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def column(x: Tensor[R@tp], w: Tensor[S(0)@tp]) -> Tensor[V@tp]:
    return x @ w.T


def partial(x: Tensor[V@tp]) -> Tensor[P@tp, V@dp]: ...
"""

MODULE_B = """\
from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import dp, tp
from incremental_a import column, partial


def use(x: Tensor[R@tp, R@dp], w: Tensor[S(0)@tp]) -> None:
    h = column(x, w)
    reveal_type(h)
    p = partial(h)
    reveal_type(p)
    p * p
"""

EXPECTED_B = [
    (8, "Revealed type is \"torch._tensor.Tensor[R@dp, V@tp]\""),
    (10, "Revealed type is \"torch._tensor.Tensor[V@dp, P@tp]\""),
    (11, "mul multiplies 2 Partial factors on axis tp"),
]


@pytest.fixture
def project(tmp_path: Path, mypy_runs: MypyRuns) -> Path:
    """A two-module project with a copy of the warm torch cache of the case run."""
    mypy_runs.diagnostics(case_files()[0])  # the default group's run fills the cache
    shutil.copytree(mypy_runs.cache_root / "mypy_cache", tmp_path / "cache")
    shutil.copy(mypy_runs.cache_root / "default.ini", tmp_path / "mypy.ini")
    (tmp_path / "incremental_a.py").write_text(MODULE_A)
    (tmp_path / "incremental_b.py").write_text(MODULE_B)
    return tmp_path


def _check_b(output: str, root: Path) -> None:
    found = parse_output(output, root).get((root / "incremental_b.py").resolve(), [])
    for line, text in EXPECTED_B:
        assert any(d.line == line and text in d.message for d in found), f"line {line}: {text!r} not in\n{output}"


def test_cache_round_trip(project: Path) -> None:
    files = [project / "incremental_a.py", project / "incremental_b.py"]
    first = run_mypy(files, project / "mypy.ini", project / "cache", project)
    _check_b(first, project)
    # Only b changes: a's signatures come back from the cache.
    (project / "incremental_b.py").write_text(MODULE_B + "\n# edited\n")
    second = run_mypy(files, project / "mypy.ini", project / "cache", project)
    _check_b(second, project)
    assert second == first


FUNCTION_MODULE = """\
from typing import Any

import torch

from spmd_stubs import I, R, Tensor, convert
from spmd_stubs.axes import tp


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(x, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, g: Tensor[R@tp]) -> Tensor[I@tp]:
        return convert(g, tp, src=R, dst=I, expert_mode=True)
"""


def test_backward_contract_reported_once_from_the_cache(project: Path) -> None:
    """The semantic-analysis-time ``spmd-autograd`` error of a fresh (cached) module is replayed, once."""
    (project / "incremental_fn.py").write_text(FUNCTION_MODULE)
    files = [project / "incremental_fn.py", project / "incremental_b.py"]
    for _ in range(2):
        output = run_mypy(files, project / "mypy.ini", project / "cache", project)
        assert output.count("[spmd-autograd]") == 1, output
        (project / "incremental_b.py").write_text(MODULE_B + "\n# edited\n")


def _dmypy(project: Path, *args: str) -> str:
    command = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(project / ".dmypy.json"), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=300)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout


def test_daemon_recheck_and_inspect(project: Path, mypy_runs: MypyRuns) -> None:
    """The editor set-up of docs/checker.md: the daemon on the plain config, its own cache.

    (mypy 2.4.1's daemon mishandles per-module ``follow_imports = skip`` on torch
    and crashes on ``recheck --export-types`` even without this plugin, so the
    daemon runs without both; ``inspect --force-reload`` reads the types.)
    """
    (project / "daemon.ini").write_text(f"[mypy]\nplugins = spmd_mypy\nmypy_path = {ROOT}\n")
    cache = mypy_runs.cache_root / "daemon_cache"
    with open(mypy_runs.cache_root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _dmypy(project, "start", "--", "--config-file", "daemon.ini", "--cache-dir", str(cache))
            _check_b(_dmypy(project, "check", "--export-types", "incremental_a.py", "incremental_b.py"), project)
            # Edit a: the partial becomes replicated; the daemon rechecks b against the new signature.
            (project / "incremental_a.py").write_text(MODULE_A.replace("Tensor[P@tp, V@dp]: ...", "Tensor[R@tp, V@dp]: ..."))
            output = _dmypy(project, "recheck")
            assert 'Revealed type is "torch._tensor.Tensor[V@dp, R@tp]"' in output, output
            assert "spmd-partial-mul" not in output, output
            inspected = _dmypy(project, "inspect", "--force-reload", "incremental_b.py:9:9")
            assert "Tensor[V@dp, R@tp]" in inspected, inspected
        finally:
            _dmypy(project, "stop")
