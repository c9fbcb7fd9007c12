"""The whole report for one checked run: figures per function, module and overall, and the places.

Every figure counts the tensor-valued expressions of
:mod:`spmd_mypy.coverage.figures` among the expressions each scope counts
(:mod:`spmd_mypy.coverage.scopes`); a module's figures are the sum of its
scopes' (its top level and its functions), the overall figures the sum of
the modules'.  :meth:`Coverage.as_json` is the file a CI keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spmd_mypy.coverage.figures import Figures, is_known, is_tensor_valued
from spmd_mypy.coverage.places import CODES, Place, ordered, places_in, shown_path
from spmd_mypy.coverage.scopes import Scope, scopes_of
from spmd_mypy.typed_run import TypedRun

FORMAT = 1
"""The JSON file's format version."""


@dataclass(frozen=True)
class FunctionCoverage:
    module: str
    name: str
    """``Block.forward``, or ``<module>`` for the module's top level."""
    line: int
    figures: Figures


@dataclass(frozen=True)
class ModuleCoverage:
    module: str
    path: str
    functions: list[FunctionCoverage]

    @property
    def figures(self) -> Figures:
        return sum((f.figures for f in self.functions), Figures())


@dataclass(frozen=True)
class Coverage:
    modules: list[ModuleCoverage]
    places: list[Place]
    """Sorted: the largest cut first."""
    other_errors: int
    """Errors of the strict run that are not places (type errors, SPMD rule violations)."""

    @property
    def figures(self) -> Figures:
        return sum((m.figures for m in self.modules), Figures())

    @property
    def functions(self) -> list[FunctionCoverage]:
        return [f for m in self.modules for f in m.functions]

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "overall": self.figures.as_dict(),
            "modules": [
                {"module": m.module, "path": m.path, **m.figures.as_dict(),
                 "functions": [{"name": f.name, "line": f.line, **f.figures.as_dict()} for f in m.functions]}
                for m in self.modules
            ],
            "places": [p.as_dict() for p in self.places],
            "other_errors": self.other_errors,
        }


def measure(run: TypedRun) -> Coverage:
    """The report for a run of :func:`spmd_mypy.typed_run.check` (strict, for the places)."""
    modules, places = [], []
    for module, tree in sorted(run.trees.items(), key=lambda item: item[1].path):
        scopes = scopes_of(module, tree)
        functions = [FunctionCoverage(module, s.name, s.line, _figures(s, run)) for s in scopes]
        modules.append(ModuleCoverage(module, shown_path(tree.path), functions))
        places += places_in(tree, module, scopes, run)
    others = sum(1 for d in run.diagnostics if d.severity == "error" and d.code not in CODES)
    return Coverage(modules, ordered(places), others)


def _figures(scope: Scope, run: TypedRun) -> Figures:
    typed = [t for t in map(run.type_of, scope.expressions) if t is not None and is_tensor_valued(t)]
    return Figures(len(typed), sum(1 for t in typed if is_known(t)))
