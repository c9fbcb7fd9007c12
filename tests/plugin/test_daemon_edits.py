"""The daemon equals a fresh run after every edit.

A small project (a global-mode row-parallel linear, a typed entry, a caller)
is edited step by step: comment-only edits, planting and removing bugs,
changing a collective's ``src``, removing and restoring a region decorator,
adding and removing a file, undoing.  After each edit ``dmypy check``'s
diagnostics must be exactly a fresh mypy run's.  The plugin's per-module
state (the global regions of a module, the source text messages quote) must
follow each edit: mypy's daemon keeps the identity of a module's tree across
edits, so state keyed by identity alone goes stale.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import ROOT, case_files, run_mypy

ROW = """\
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def row(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    y = spmd.linear(h, w, out_partial_axes=tp)
    reveal_type(y)
    return spmd.all_reduce(y, tp, src=P, dst=R)


def enter(x: Tensor[I@tp]) -> Tensor[R@tp]:
    return spmd.convert(x, tp, src=I, dst=R)
"""

CALLER = """\
from spmd_stubs import R, Tensor
from spmd_stubs.axes import tp
from edited import row


def use(h: Tensor[R@tp], w: Tensor[R@tp]) -> None:
    reveal_type(row(h, w))
"""


def _edits() -> list[tuple[str, dict[str, str | None]]]:
    """(what changes, {file: new text or None to delete}), applied in order."""
    contraction = ROW.replace("spmd.linear(h, w, out_partial_axes=tp)", "F.linear(h, w)")
    wrong_src = ROW.replace("src=I, dst=R)", "src=R, dst=R)")
    undecorated = ROW.replace("@spmd.global_spmd(tp)\n", "")
    return [
        ("a comment", {"edited.py": ROW + "# a comment\n"}),
        ("a sharded contraction", {"edited.py": contraction}),
        ("a comment beside it", {"edited.py": "# note\n" + contraction}),
        ("undo", {"edited.py": ROW}),
        ("a wrong src", {"edited.py": wrong_src}),
        ("a comment above the wrong src", {"edited.py": "# note\n" + wrong_src}),
        ("undo", {"edited.py": ROW}),
        ("no region", {"edited.py": undecorated}),
        ("the region back", {"edited.py": ROW}),
        ("a caller added", {"caller.py": CALLER}),
        ("the callee's spec changed", {"edited.py": ROW.replace("Tensor[S(1)@tp]) -> Tensor[R@tp]", "Tensor[S(0)@tp]) -> Tensor[R@tp]")}),
        ("undo", {"edited.py": ROW}),
        ("the caller removed", {"caller.py": None}),
        ("a comment", {"edited.py": ROW + "# again\n"}),
    ]


def _diagnostics(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if ": error:" in line or ": note:" in line)


def _dmypy(project: Path, *args: str) -> str:
    command = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(project / ".dmypy.json"), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=300)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def project(tmp_path: Path, mypy_runs: MypyRuns) -> Path:
    mypy_runs.diagnostics(case_files()[0])  # the default group's run fills the torch cache
    shutil.copytree(mypy_runs.cache_root / "mypy_cache", tmp_path / "fresh_cache")
    (tmp_path / "daemon.ini").write_text(f"[mypy]\nplugins = spmd_mypy\nmypy_path = {ROOT}\n")
    (tmp_path / "edited.py").write_text(ROW)
    return tmp_path


def test_every_recheck_equals_a_fresh_run(project: Path, mypy_runs: MypyRuns) -> None:
    files = lambda: sorted(p.name for p in project.glob("*.py"))  # noqa: E731 -- files change per edit
    with open(mypy_runs.cache_root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _dmypy(project, "start", "--", "--config-file", "daemon.ini", "--cache-dir",
                   str(mypy_runs.cache_root / "daemon_cache"))
            first = _diagnostics(_dmypy(project, "check", *files()))
            assert any("S(-1)@tp" not in line and "P@tp" in line for line in first), first
            divergent = []
            for what, changes in _edits():
                for name, text in changes.items():
                    if text is None:
                        (project / name).unlink()
                    else:
                        (project / name).write_text(text)
                daemon = _diagnostics(_dmypy(project, "check", *files()))
                fresh = _diagnostics(run_mypy([Path(f) for f in files()], project / "daemon.ini",
                                              project / "fresh_cache", project))
                if daemon != fresh:
                    divergent.append(f"after {what}:\n daemon {daemon}\n fresh  {fresh}")
        finally:
            _dmypy(project, "stop")
    assert divergent == [], "\n".join(divergent)
