"""The core (spmd_stubs/core) is pure (no module in it imports torch or mypy) and says each thing once.

Checked twice: statically, every ``import`` statement of every file in the
folder (lazy imports inside functions included), and dynamically, importing
every module of the folder in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "spmd_stubs" / "core"
FORBIDDEN = {"torch", "mypy"}
ALLOWED_SPMD = ("spmd_stubs.core",)


def _modules() -> list[str]:
    root = CORE.parent.parent
    names = []
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _imported(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_the_core_is_a_folder_of_several_modules() -> None:
    assert len(_modules()) >= 8, _modules()


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_no_core_file_imports_torch_mypy_or_the_runtime(path: Path) -> None:
    for name in _imported(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{path.name} imports {name}"
        if top in ("spmd_stubs", "spmd_mypy"):
            assert name.startswith(ALLOWED_SPMD), f"{path.name} imports {name}: the core reads only the core"


def test_importing_the_whole_core_loads_neither_torch_nor_mypy() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {FORBIDDEN!r}))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def _public_definitions(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_")]


def test_the_core_defines_each_name_once() -> None:
    """One rule, one place: a public name is defined in one core module and imported elsewhere."""
    where: dict[str, list[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        for name in _public_definitions(path):
            where.setdefault(name, []).append(str(path.relative_to(CORE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
