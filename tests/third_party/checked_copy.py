"""Shared by the third-party tests: an annotated, migrated copy of installed modules, and what mypy says about it.

The installed packages are only read: each module is copied under a root,
the shipped overlay (if it has an entry for the module) and the codemod are
applied to the copy, and the checker's diagnostics are named by module,
function, error code, the expression its first note names, and the
configurations it occurs in.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Callable, Mapping

from spmd_mypy.migrate import migrate_source
from spmd_mypy.migrate.overlay import ModuleOverlay, apply_overlay
from spmd_mypy.migrate.thirdparty import Diagnostic, MypyRun, installed_dir

Finding = tuple[str, str, str, "str | None", str]
"""(module, function, error code, the call or operand the error is "In", the configurations it occurs in)."""


def function_at(tree: ast.Module, line: int) -> str:
    """The dotted name of the innermost function or class around a line."""
    path: list[str] = []

    def visit(node: ast.AST, prefix: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    path[:] = [*prefix, child.name]
                    visit(child, [*prefix, child.name])

    visit(tree, [])
    return ".".join(path) or "<module>"


def module_path(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def installed_source(module: str) -> str:
    """The installed text of a module of an installed package (namespace packages included)."""
    top, _, rest = module.partition(".")
    return module_path(installed_dir(top), rest).read_text()


def write_checked(root: Path, module: str, source: str, overlays: Mapping[str, ModuleOverlay],
                  overlay_of: str | None = None) -> Path:
    """Annotate ``source`` with the overlay of ``overlay_of`` (default: the module's own, if any), migrate it,
    and write it as ``module`` under ``root``, with the ``__init__.py`` of each package above it (copied
    where installed, empty otherwise) so the copy has the module's name."""
    overlay = overlays.get(overlay_of or module)
    code = apply_overlay(source, overlay_of or module, overlay) if overlay else source
    path = module_path(root, module)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(migrate_source(code, module).code)
    top, *packages = module.split(".")[:-1]
    installed = installed_dir(top)
    for depth in range(len(packages) + 1):
        package = Path(*packages[:depth])
        init = root / top / package / "__init__.py"
        if not init.exists() and (installed / package / "__init__.py").exists():
            shutil.copyfile(installed / package / "__init__.py", init)
    return path


def spmd_findings(run: MypyRun, root: Path, files: Mapping[str, str],
                  wanted: Callable[[Diagnostic], bool] | None = None) -> Counter[Finding]:
    """The ``wanted`` errors (default: the checker's, ``spmd-*``) in the ``files`` (path under ``root`` ->
    module), each named by where it is and the expression its first note names."""
    trees = {path: ast.parse((root / path).read_text()) for path in files}
    found: Counter[Finding] = Counter()
    diagnostics = run.diagnostics
    for d, after in zip(diagnostics, (*diagnostics[1:], None)):
        if d.severity == "error" and d.path in files and (d.is_spmd if wanted is None else wanted(d)):
            found[(files[d.path], function_at(trees[d.path], d.line), d.code or "", in_expression(d, after),
                   d.configurations)] += 1
    return found


def in_expression(error: Diagnostic, after: Diagnostic | None) -> str | None:
    """The expression named by the note right after an error on its line (``In `output_ + self.bias`: ...``)."""
    note = after.message if after is not None and (after.path, after.line) == (error.path, error.line) else ""
    where = re.match(r"In `([\w.]+)", note)
    return where and where.group(1)
