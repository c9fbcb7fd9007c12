"""How a module spells spmd_types' calls, and the fixes the checker writes in that spelling.

The algebra's fixes name the spec's calls as ``spmd_stubs`` spells them
(``all_reduce(x, tp, src=P, dst=I)``); a module written for spmd_types
(it imports ``spmd_types`` and not ``spmd_stubs``) gets them as spmd_types
spells them (``spmd.all_reduce(x, "tp", src=spmd.P, dst=spmd.I)``), so the
fix applies in the user's own vocabulary.

Before semantic analysis (the rewrites of :mod:`.narrowing`) no name is
resolved yet: :class:`Spellings` reads a parsed module's own imports of
spmd_types to tell which calls are spmd_types' (``spmd.mutate_type``,
``mutate_type`` imported from ``spmd_types.runtime``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from mypy.nodes import Expression, Import, ImportAll, ImportBase, ImportFrom, MemberExpr, MypyFile, NameExpr

from spmd_stubs.core import SpmdTypeError

_RUNTIME_CHECKER = "spmd_types"
_OURS = "spmd_stubs"


def speaks_spmd_types(module: MypyFile | None) -> bool:
    """Whether ``module`` imports spmd_types and not spmd_stubs."""
    if module is None:
        return False
    imported = {name.split(".")[0] for node in module.imports for name in _imported(node)}
    return _RUNTIME_CHECKER in imported and _OURS not in imported


_MODULES = ("spmd_types", "spmd_types.runtime")
"""Where spmd_types' public calls are imported from."""


@dataclass(frozen=True)
class Spellings:
    """A parsed module's names for spmd_types: the modules, and the calls imported by name."""

    modules: set[str] = field(default_factory=set)
    """``spmd`` of ``import spmd_types as spmd``."""
    calls: dict[str, str] = field(default_factory=dict)
    """The name bound -> spmd_types' name of the call (``from spmd_types import mutate_type as relabel``)."""

    @staticmethod
    def of(tree: MypyFile) -> Spellings:
        found = Spellings()
        for imported in tree.imports:
            if isinstance(imported, Import):
                found.modules.update(alias or name for name, alias in imported.ids if name in _MODULES)
            elif isinstance(imported, ImportFrom) and imported.relative == 0 and imported.id in _MODULES:
                found.calls.update((alias or name, name) for name, alias in imported.names)
        return found

    def called(self, callee: Expression) -> str | None:
        """spmd_types' name of the function ``callee`` spells (``spmd.no_typecheck`` -> ``no_typecheck``); None
        where it spells none."""
        if isinstance(callee, NameExpr):
            return self.calls.get(callee.name)
        if isinstance(callee, MemberExpr) and dotted(callee.expr) in self.modules:
            return callee.name
        return None


def dotted(expr: Expression) -> str | None:
    """``a.b.c`` as written; None for any other expression."""
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        owner = dotted(expr.expr)
        return f"{owner}.{expr.name}" if owner is not None else None
    return None


def _imported(node: ImportBase) -> list[str]:
    """The modules an import statement names (``import a, b``; ``from a import x``)."""
    if isinstance(node, Import):
        return [name for name, _ in node.ids]
    return [node.id] if isinstance(node, (ImportFrom, ImportAll)) else []


_CALL = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|all_to_all|redistribute|convert|reinterpret)"
                   r"\((\{?\w+\}?), (\w+), src=(\w+(?:\(-?\d+\))?), dst=(\w+(?:\(-?\d+\))?)(, expert_mode=True)?\)")


def in_spmd_types_spelling(error: SpmdTypeError, axis_written: str) -> SpmdTypeError:
    """``error`` with each call it names on its axis in spmd_types' spelling, the axis as the call wrote it:
    ``all_reduce(x, tp, src=P, dst=R)`` -> ``spmd.all_reduce(x, group, src=spmd.P, dst=spmd.R)``.

    >>> from spmd_stubs.core import Code
    >>> error = SpmdTypeError(Code.COLLECTIVE, "tp", "Fix: all_reduce(x, tp, src=P, dst=I).")
    >>> in_spmd_types_spelling(error, "group").message
    'Fix (needs your choice): spmd.all_reduce(x, group, src=spmd.P, dst=spmd.I).'
    """

    def spelled(call: re.Match[str]) -> str:
        op, tensor, axis, src, dst, expert = call.groups()
        if axis != error.axis:
            return call.group(0)
        return f"spmd.{op}({tensor}, {axis_written}, src=spmd.{src}, dst=spmd.{dst}{expert or ''})"

    fix = error.fix and replace(error.fix, template=_CALL.sub(spelled, error.fix.template))
    return SpmdTypeError(error.code, error.axis, _CALL.sub(spelled, error.message), fix)


