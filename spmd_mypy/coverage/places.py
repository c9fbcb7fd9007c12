"""The places where a typed value becomes unknown, and how much typed flow each cuts off.

The places are the checker's own diagnostics in strict mode, in the checked
files: ``spmd-untyped-boundary`` (a typed value passed to or returned
through something that forgets its type; its kind is
:func:`spmd_mypy.untyped_boundaries.kind_of` of the message, reported by
its words, ``unannotated parameter``) and ``spmd-unmodelled`` (an op the
checker does not model got a typed tensor; kind ``unmodelled op``).

A place's expression is the one the diagnostic is about: among the
expressions that start at its line and column, the one whose source text is
the ``In `...``` snippet of its first note (the outermost such), else the
innermost call there.

Its *cut* is the number of expressions counted in the same scope
(:mod:`spmd_mypy.coverage.scopes`) that carry no SPMD type (a tensor whose
type is unknown, or ``Any``) and depend on the value the place produces.
An expression depends on it when it is the place's expression, contains it,
or reads a name that depends on it; a name depends on it when the scope
binds it (``=``, ``+=``, ``:=``, ``for``, ``with``, a comprehension) to a
value that depends on it, anywhere in the scope (the order of statements is
not followed).  Attributes (``self.h = ...``), other functions and the
callers are not followed: a value lost at a ``return`` cuts nothing in its
own function.  Places are sorted by cut, largest first, then by file, line
and column.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Mapping

from mypy.nodes import CallExpr, Expression, MypyFile, NameExpr
from mypy.server.subexpr import get_subexpressions
from mypy.types import Type

from spmd_mypy.coverage.figures import without_spmd_type
from spmd_mypy.coverage.scopes import Scope, target_parts
from spmd_mypy.report import balanced
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_mypy.typed_run import Diagnostic, TypedRun
from spmd_mypy.untyped_boundaries import kind_of

BOUNDARY = "spmd-untyped-boundary"
UNMODELLED = "spmd-unmodelled"
CODES = (BOUNDARY, UNMODELLED)
UNMODELLED_KIND = "unmodelled op"
_SNIPPET = re.compile(r"^In `(?P<snippet>.*?)`(?::|$)")


@dataclass(frozen=True)
class Place:
    """One diagnostic that marks where a typed value becomes unknown."""

    path: str
    line: int
    column: int | None
    """From 1, as mypy prints it."""
    module: str
    function: str | None
    """The scope it is in (None where no expression there matched the diagnostic)."""
    code: str
    kind: str
    message: str
    cut: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def kind_named(diagnostic: Diagnostic) -> str:
    """The place's kind in words: a boundary's kind (``unannotated parameter``), or ``unmodelled op``."""
    if diagnostic.code == UNMODELLED:
        return UNMODELLED_KIND
    kind = kind_of(diagnostic.message)
    return kind.value if kind is not None else "untyped boundary"


def places_in(tree: MypyFile, module: str, scopes: list[Scope], run: TypedRun) -> list[Place]:
    """The places among the run's diagnostics that are in ``tree``'s file, unsorted."""
    found, sources, types = [], SourceFiles(run.native_parser), run.types
    for diagnostic, following in zip(run.diagnostics, [*run.diagnostics[1:], None]):
        if diagnostic.severity != "error" or diagnostic.code not in CODES or not _same_file(diagnostic.path, tree.path):
            continue
        located = _locate(sources, tree, scopes, diagnostic, _snippet(following, diagnostic))
        scope, expr = located if located is not None else (None, None)
        cut = cut_off(expr, scope, types) if scope is not None and expr is not None else 0
        found.append(Place(shown_path(tree.path), diagnostic.line, diagnostic.column, module,
                           scope.name if scope is not None else None, diagnostic.code or "",
                           kind_named(diagnostic), diagnostic.message, cut))
    return found


def ordered(places: list[Place]) -> list[Place]:
    """Largest cut first; ties by file, line, column."""
    return sorted(places, key=lambda p: (-p.cut, p.path, p.line, p.column or 0))


def cut_off(place: Expression, scope: Scope, types: Mapping[Expression, Type]) -> int:
    """How many of ``scope``'s counted expressions carry no SPMD type and depend on ``place``'s value."""
    inside = {id(e): get_subexpressions(e) for e in scope.expressions}
    tainted: set[int] = set()

    def depends(expr: Expression) -> bool:
        parts = inside.get(id(expr)) or get_subexpressions(expr)
        return any(p is place or (isinstance(p, NameExpr) and p.node is not None and id(p.node) in tainted)
                   for p in parts)

    changed = True
    while changed:
        changed = False
        for targets, value in scope.bindings:
            if not depends(value):
                continue
            for part in (p for t in targets for p in target_parts(t)):
                if isinstance(part, NameExpr) and part.node is not None and id(part.node) not in tainted:
                    tainted.add(id(part.node))
                    changed = True
    return sum(1 for e in scope.expressions if without_spmd_type(types.get(e)) and depends(e))


def _snippet(note: Diagnostic | None, error: Diagnostic) -> str | None:
    """The ``In `...``` snippet of ``note``, where it is ``error``'s first note (right after it, on its line)."""
    if note is None or note.severity != "note" or (note.path, note.line) != (error.path, error.line):
        return None
    found = _SNIPPET.match(note.message)
    return found["snippet"] if found is not None else None


def _locate(sources: SourceFiles, tree: MypyFile, scopes: list[Scope], diagnostic: Diagnostic,
            snippet: str | None) -> tuple[Scope, Expression] | None:
    column = diagnostic.column - 1 if diagnostic.column is not None else None
    starting = [(scope, e) for scope in scopes for e in scope.expressions
                if e.line == diagnostic.line and (column is None or e.column == column)]
    if snippet is not None:
        matching = [(s, e) for s, e in starting if _is_snippet(_text(sources, tree, e), snippet)]
        if matching:
            return max(matching, key=lambda m: _span(m[1]))
    calls = [(s, e) for s, e in starting if isinstance(e, CallExpr)]
    return min(calls, key=lambda m: _span(m[1])) if calls else None


def _text(sources: SourceFiles, tree: MypyFile, expr: Expression) -> str | None:
    try:
        return balanced(" ".join(sources.text_of(tree, expr).split()))
    except SourceUnreadable:
        return None


def _is_snippet(text: str | None, snippet: str) -> bool:
    if text is None:
        return False
    return text.startswith(snippet[:-3]) if snippet.endswith("...") else text == snippet


def _span(expr: Expression) -> tuple[int, int]:
    return (expr.end_line or expr.line, expr.end_column or expr.column)


def _same_file(printed: str, path: str) -> bool:
    return os.path.abspath(printed) == os.path.abspath(path)


def shown_path(path: str) -> str:
    """``path`` relative to the current directory where it lies below it, else absolute."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith("..") else relative
