"""The checker's own code is checked: mypy --strict, ruff, its docstring examples, its sizes.

mypy runs with the plugin on (the recommended config), since the runtime's
own signatures are written in SPMD types.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import spmd_mypy
import spmd_stubs

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (spmd_stubs, spmd_mypy)


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith(".__main__"):  # importing it runs the command
                names.append(info.name)
    return sorted(names)


MAX_FILE_LINES = 520
MAX_FUNCTION_LINES = 65
"""Files small enough to read at once, functions small enough to hold in one's head."""


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in Path(package.__path__[0]).rglob("*.py"))


def test_no_file_is_too_long_to_read_at_once() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_is_too_long() -> None:
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                if (lines := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_mypy_strict_finds_nothing(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "mypy", "--strict", "--config-file", "spmd_mypy/recommended.ini",
        "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "-p", "spmd_stubs", "-p", "spmd_mypy",
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_finds_nothing() -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def _examples(name: str) -> int:
    return sum(len(test.examples) for test in doctest.DocTestFinder().find(importlib.import_module(name)))


def test_the_core_states_its_rules_by_example() -> None:
    assert sum(_examples(name) for name in _modules() if name.startswith("spmd_stubs.core")) >= 10


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


TOP_LEVEL = {"pyproject.toml", "spmd_mypy", "spmd_stubs", "tests", "docs", "examples", "scripts", "README.md",
             "LICENSE", ".ci", ".gitignore", ".pre-commit-hooks.yaml", "MANIFEST.in"}
"""What the repository holds at its top; everything else lives under one of these."""


def test_the_top_level_stays_tidy() -> None:
    run = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip("not a git checkout")
    assert {path.split("/", 1)[0] for path in run.stdout.splitlines()} <= TOP_LEVEL
