"""The daemon equals a fresh run after every edit.

A small project (a global-mode row-parallel linear, a typed entry, a caller)
is edited step by step: comment-only edits, planting and removing bugs,
changing a collective's ``src``, removing and restoring a region decorator,
adding and removing a file, undoing.  After each edit ``dmypy check``'s
diagnostics must be exactly a fresh mypy run's.  The plugin's per-module
state (the global regions of a module, the source text messages quote) must
follow each edit: mypy's daemon keeps the identity of a module's tree across
edits, so state keyed by identity alone goes stale.  The daemon runs one
configuration (``sp``: sequence parallelism, the GPT's flag), as a user runs
one daemon per configuration: its flags must decide each edited module's
branches again.  A second pair of daemons, one per configuration, reports a
sequence-parallel-only bug in ``sp`` only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spmd_mypy.configurations.declared import ENVIRONMENT
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


# Mutations of the shipped examples, one occurrence at a time: the bugs a
# user plants and removes while editing (a wrong dst or src, a dropped
# out_partial_axes, a region decorator removed).
MUTATIONS = {
    "tp_gpt.py": [("dst=I)", "dst=R)"), ("src=I, dst=R", "src=R, dst=R"),
                  ("src=P, dst=I", "src=P, dst=R"), ("dst=S(0))", "dst=R)"), ("src=V, dst=P", "src=V, dst=R")],
    "global_mlp.py": [("src=P, dst=R", "src=P, dst=I"), ("@spmd.global_spmd(tp)\n", ""),
                      (", out_partial_axes=tp)", ")")],
}
EXAMPLES = {"tp_gpt.py": "gpt/tp_gpt.py", "train.py": "gpt/train.py", "gloo_launch.py": "gpt/gloo_launch.py",
            "gpt_reference.py": "gpt/gpt_reference.py", "global_mlp.py": "global_mlp.py"}
Edit = tuple[str, dict[str, str | None]]
CONFIGURATIONS = "[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = true\n    no_sp: sequence_parallel = false\n"


def _small_project_edits() -> list[Edit]:
    """Scripted edits of a small project: a region, a typed entry, a caller added and removed."""
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


def _mutant_edits(sources: dict[str, str]) -> list[Edit]:
    """Each mutation of each example applied alone, every fourth one commented on, then undone."""
    edits: list[Edit] = []
    mutants = 0
    for name, mutations in MUTATIONS.items():
        original = sources[name]
        for old, new in mutations:
            start = original.find(old)
            while start != -1:
                mutant = original[:start] + new + original[start + len(old):]
                line = original.count("\n", 0, start) + 1
                edits.append((f"{name}:{line} {old.strip()!r} -> {new.strip()!r}", {name: mutant}))
                mutants += 1
                if mutants % 4 == 0:
                    edits.append(("a comment on the mutant", {name: "# edited\n" + mutant}))
                edits.append(("undo", {name: original}))
                start = original.find(old, start + 1)
    return edits


def _project_edits(sources: dict[str, str]) -> list[Edit]:
    """A rename across two modules and a file added and removed."""
    renamed = {name: sources[name].replace("sync_data_parallel_grads", "all_reduce_grads") for name in ("tp_gpt.py", "train.py")}
    return [
        ("the definition renamed", {"tp_gpt.py": renamed["tp_gpt.py"]}),
        ("its import renamed", {"train.py": renamed["train.py"]}),
        ("both undone", {"tp_gpt.py": sources["tp_gpt.py"], "train.py": sources["train.py"]}),
        ("a copy of the regions added", {"global_copy.py": sources["global_mlp.py"]}),
        ("the copy's regions removed", {"global_copy.py": sources["global_mlp.py"].replace("@spmd.global_spmd(tp)\n", "")}),
        ("the copy removed", {"global_copy.py": None}),
    ]


def edits(sources: dict[str, str]) -> list[Edit]:
    return _small_project_edits() + _mutant_edits(sources) + _project_edits(sources)


def _diagnostics(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if ": error:" in line or ": note:" in line)


def _dmypy(project: Path, *args: str, configuration: str = "sp") -> str:
    status = project / f".dmypy-{configuration}.json"
    command = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status), *args]
    environment = {**os.environ, ENVIRONMENT: configuration}
    done = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=300, env=environment)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def project(tmp_path: Path, mypy_runs: MypyRuns) -> Path:
    mypy_runs.diagnostics(case_files()[0])  # the default group's run fills the torch cache
    shutil.copytree(mypy_runs.cache_root / "mypy_cache", tmp_path / "fresh_cache")
    (tmp_path / "daemon.ini").write_text(f"[mypy]\nplugins = spmd_mypy\nmypy_path = {ROOT}\n{CONFIGURATIONS}")
    (tmp_path / "edited.py").write_text(ROW)
    for name, example in EXAMPLES.items():
        shutil.copy(ROOT / "examples" / example, tmp_path / name)
    return tmp_path


def test_every_recheck_equals_a_fresh_run(project: Path, mypy_runs: MypyRuns, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT, "sp")  # the fresh runs check the daemon's configuration
    files = lambda: sorted(p.name for p in project.glob("*.py"))  # noqa: E731 -- files change per edit
    with open(mypy_runs.cache_root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _dmypy(project, "start", "--", "--config-file", "daemon.ini", "--cache-dir",
                   str(mypy_runs.cache_root / "daemon_cache"))
            first = _diagnostics(_dmypy(project, "check", *files()))
            assert any("S(-1)@tp" not in line and "P@tp" in line for line in first), first
            divergent = []
            sources = {name: (project / name).read_text() for name in EXAMPLES}
            applied = edits(sources)
            assert len(applied) >= 100, len(applied)
            for saved_at, (what, changes) in enumerate(applied, start=int(time.time()) + 1):
                for name, text in changes.items():
                    if text is None:
                        (project / name).unlink()
                    else:
                        (project / name).write_text(text)
                        # The daemon sees a change by the file's size or its mtime in whole
                        # seconds (mypy/fswatcher.py, FileSystemWatcher._find_changed): a
                        # same-size edit within the second of the last one is invisible to
                        # it.  An editor's saves are seconds apart; these are not.
                        os.utime(project / name, (saved_at, saved_at))
                daemon = _diagnostics(_dmypy(project, "check", *files()))
                fresh = _diagnostics(run_mypy([Path(f) for f in files()], project / "daemon.ini",
                                              project / "fresh_cache", project))
                if daemon != fresh:
                    divergent.append(f"after {what}:\n daemon {daemon}\n fresh  {fresh}")
        finally:
            _dmypy(project, "stop")
    assert divergent == [], "\n".join(divergent)


SP_ONLY_BUG = """\
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, S, Tensor
from spmd_stubs.axes import tp

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]


def norm(x: Activation, weight: Tensor[I@tp]) -> Activation:
    return F.layer_norm(x, x.shape[-1:], weight)
"""


def test_one_daemon_per_configuration(project: Path, mypy_runs: MypyRuns) -> None:
    """Each daemon checks its own configuration: the norm-weight bug exists with sequence parallelism only."""
    (project / "norm.py").write_text(SP_ONLY_BUG)
    reports = {}
    with open(mypy_runs.cache_root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for configuration in ("sp", "no_sp"):
            try:
                _dmypy(project, "start", "--", "--config-file", "daemon.ini", "--cache-dir",
                       str(mypy_runs.cache_root / f"daemon_cache_{configuration}"), configuration=configuration)
                reports[configuration] = _diagnostics(_dmypy(project, "check", "norm.py", configuration=configuration))
            finally:
                _dmypy(project, "stop", configuration=configuration)
    assert [line.partition(" error: ")[0] for line in reports["sp"] if " error: " in line] == ["norm.py:11:"], reports
    assert {line.partition(": ")[0] for line in reports["sp"]} == {"norm.py:11"}, "its notes are on its line"
    assert any("[spmd-invariant-mix]" in line for line in reports["sp"])
    assert reports["no_sp"] == [], reports
