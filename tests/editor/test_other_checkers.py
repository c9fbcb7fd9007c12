"""pyright, basedpyright, pyrefly and ty on code typed for the plugin: no false errors.

Many code bases run one of them in the editor beside mypy in CI.  They do not
check SPMD types (only mypy with the plugin does); they must read the
annotations as the tensors they are.  Each checker, at the version pinned in
the test set-up, runs on two things:

* the shipped examples, rewritten in the spelling docs/checker.md gives for
  such code bases (``R[tp]``, ``Sharded[Literal[0], tp]``): the only errors
  allowed are the documented one, a flag-chosen alias (``Activation``) used as
  a type, at each line that uses it;
* ``other_checkers/gradual_adoption.py``: plain tensors, parameters, torch
  ops' and collectives' results flowing into typed annotations: no error;
* ``other_checkers/canonical_shard.py``: ``S[0, tp]``, an error in ty only.

mypy with the plugin reports exactly the same diagnostics on the rewritten
examples as on the originals, so the spelling means the same types.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plugin.harness import ROOT, run_mypy

HERE = Path(__file__).parent / "other_checkers"
BIN = Path(sys.executable).parent
UNCHANGED = ("gradual_adoption.py", "canonical_shard.py")
"""Copied as they are: the plugin's users' code, half-way typed; the canonical shard spelling."""
Errors = set[tuple[str, int]]
"""(file relative to the project, line) of each error a checker reports."""

_ENTRY = re.compile(r"\b(R|I|V|P|Pavg|Pmax|Pmin)@(\w+)|\bS\((-?\d+)\)@(\w+|\([\w, ]+\))|\bS\[(-?\d+), ([\w, ]+)\]")
_SPMD_IMPORT = re.compile(r"^from spmd_stubs import (.*)$", re.M)


def portable_spelling(source: str) -> str:
    """Each ``Tensor[...]`` in the spelling every checker reads; lines keep their numbers.

    ``R@tp`` -> ``R[tp]``; ``S(0)@(dp, tp)`` and ``S[0, dp, tp]`` -> ``Sharded[Literal[0], dp, tp]``.
    Value-level entries (``assert_type(x, S(1)@dp)``) stay: they are expressions, not types.
    """

    def entry(match: re.Match[str]) -> str:
        if match[1]:
            return f"{match[1]}[{match[2]}]"
        dim, axes = (match[3], match[4].strip("()")) if match[3] else (match[5], match[6])
        return f"Sharded[Literal[{dim}], {', '.join(a.strip() for a in axes.split(','))}]"

    pieces, end = [], 0
    for start in (m.end() for m in re.finditer(r"\bTensor\[", source)):
        if start < end:
            continue
        depth, stop = 1, start
        while depth:
            depth += {"[": 1, "]": -1}.get(source[stop], 0)
            stop += 1
        pieces += [source[end:start], _ENTRY.sub(entry, source[start:stop])]
        end = stop
    rewritten = "".join(pieces) + source[end:]
    if "Sharded[" in rewritten and "Sharded[" not in source:
        assert _SPMD_IMPORT.search(rewritten), "a file using Sharded must import from spmd_stubs"
        rewritten = _SPMD_IMPORT.sub(r"from spmd_stubs import \1, Sharded; from typing import Literal", rewritten,
                                     count=1)
    return rewritten


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    for source in (ROOT / "examples").rglob("*.py"):
        target = project / source.relative_to(ROOT / "examples")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(portable_spelling(source.read_text()))
    for name in UNCHANGED:
        shutil.copy(HERE / name, project / name)
    # The examples' modules are scripts importing each other from their folder,
    # which pyrefly finds on a search path only; basedpyright's own default
    # mode adds rules beyond type errors (such implicit relative imports), its
    # standard mode is pyright's.
    (project / "pyproject.toml").write_text('[tool.basedpyright]\ntypeCheckingMode = "standard"\n\n'
                                            '[tool.pyrefly]\nsearch-path = [".", "gpt", "moe", "dtensor_plan"]\n')
    return project


def _run(command: list[str], project: Path) -> str:
    done = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: errors found; anything else: it failed
    return done.stdout


def _pyright_like(name: str) -> Callable[[Path], Errors]:
    def check(project: Path) -> Errors:
        report = json.loads(_run([str(BIN / name), "--pythonpath", sys.executable, "--outputjson"], project))
        return {(str(Path(d["file"]).relative_to(project)), d["range"]["start"]["line"] + 1)
                for d in report["generalDiagnostics"] if d["severity"] == "error"}
    return check


def _pyrefly(project: Path) -> Errors:
    output = _run([str(BIN / "pyrefly"), "check", "--python-interpreter-path", sys.executable,
                   "--output-format", "min-text", "."], project)
    return {(m[1], int(m[2])) for m in re.finditer(r"^ERROR (\S+?):(\d+):", output, re.M)}


def _ty(project: Path) -> Errors:
    output = _run([str(BIN / "ty"), "check", "--python", sys.executable, "--output-format", "concise", "."], project)
    return {(m[1], int(m[2])) for m in re.finditer(r"^(\S+?):(\d+):\d+: error\[", output, re.M)}


CHECKERS = {"pyright": _pyright_like("pyright"), "basedpyright": _pyright_like("basedpyright"),
            "pyrefly": _pyrefly, "ty": _ty}


def _flag_chosen_alias_uses(project: Path) -> Errors:
    """Each line annotating with the GPT's flag-chosen ``Activation`` (docs/checker.md: not read as a type there)."""
    lines = (project / "gpt" / "tp_gpt.py").read_text().splitlines()
    return {("gpt/tp_gpt.py", number) for number, line in enumerate(lines, 1)
            if re.search(r"[:>]\s*(\w+\[)?Activation\b", line)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("other_checkers"))


@pytest.mark.parametrize("checker", CHECKERS)
def test_no_false_errors(checker: str, project: Path) -> None:
    expected = _flag_chosen_alias_uses(project)
    assert len(expected) >= 3, expected
    if checker == "ty":  # no subscripted S: ty wants a generic class (docs/checker.md)
        lines = (project / "canonical_shard.py").read_text().splitlines()
        expected |= {("canonical_shard.py", n) for n, line in enumerate(lines, 1) if "S[" in line and "def" in line}
    assert CHECKERS[checker](project) == expected


_MYPY_ERROR = re.compile(r"^(?P<where>\S+:\d+): error: (?:(?P<label>\[[\w, ]+\]) )?.*\[(?P<code>[\w-]+)\]$", re.M)


@pytest.fixture(scope="module")
def mypy_cache(kept_dir: Callable[[str], Path]) -> Path:
    """This module's own mypy cache: mypy replays a cached module's errors with the path it was
    checked under, so a cache shared with runs from another directory would change the paths."""
    return kept_dir("other-checkers-mypy")


def _mypy_errors(root: Path, files: list[Path], cache: Path) -> list[str]:
    """``spmd-check``'s errors in the examples' configurations: where, which configuration, which code."""
    output = run_mypy([f.relative_to(root) for f in files], ROOT / "examples" / "mypy.ini", cache,
                      root, every_configuration=True)
    return sorted(f"{m['where']} {m['label'] or ''} {m['code']}" for m in _MYPY_ERROR.finditer(output))


def test_the_portable_spelling_means_the_same_types(project: Path, mypy_cache: Path) -> None:
    rewritten = sorted(p for p in project.rglob("*.py") if p.name not in UNCHANGED)
    assert sum("Sharded[Literal[" in path.read_text() for path in rewritten) >= 10
    assert all(portable_spelling(path.read_text()) == path.read_text() for path in rewritten)  # nothing left
    original = _mypy_errors(ROOT / "examples", sorted((ROOT / "examples").rglob("*.py")), mypy_cache)
    assert len(original) >= 10, original  # the bug gallery's
    assert _mypy_errors(project, rewritten, mypy_cache) == original
    assert _mypy_errors(project, [project / "gradual_adoption.py"], mypy_cache) == []
