"""Which axes are global where: ``@global_spmd(tp)`` regions, ``@local_map(ep)`` inside them.

The mode of the code being checked comes from the enclosing defs: mypy's
checker keeps the stack of functions it is in (``api.scope.stack``), and a
walk over the module (once per module, cached) records for every ``def`` the
axes that are global in its body: ``@global_spmd(axes)`` adds axes,
``@local_map(axes)`` removes them, an undecorated nested def inherits.
Module-level code is local on every axis.  The walk also records where each
global def's returned values come from, for :mod:`.boundaries`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    Expression,
    FuncDef,
    FuncItem,
    Import,
    ImportAll,
    ImportFrom,
    MypyFile,
    NameExpr,
    RefExpr,
    ReturnStmt,
    Statement,
    TupleExpr,
)
from mypy.plugin import CheckerPluginInterface

from spmd_mypy.annotations import AnnotationError, axes_of
from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import GLOBAL_SPMD, LOCAL_MAP
from spmd_mypy.statements import Function, blocks_in, defining_module, functions_in
from spmd_mypy.wrappers import unwrapped

REGIONS = (GLOBAL_SPMD, LOCAL_MAP)
NONE: frozenset[str] = frozenset()



@dataclass
class Region:
    """A def decorated ``@global_spmd`` / ``@local_map``."""

    func: FuncDef
    axes: frozenset[str]
    """The axes global in its body."""


@dataclass
class Modes:
    tree: MypyFile
    by_def: dict[int, frozenset[str]] = field(default_factory=dict)
    """id(FuncDef) -> the axes global in its body."""
    regions: dict[int, Region] = field(default_factory=dict)
    """id(decorator CallExpr) -> the def it decorates."""
    returned: dict[int, tuple[FuncDef, int | None]] = field(default_factory=dict)
    """id(expression) -> the def whose return value it is, and its index in a returned tuple."""
    returned_params: dict[int, list[tuple[NameExpr, str, int | None]]] = field(default_factory=dict)
    """id(FuncDef) -> the parameters it returns as they are (``return x``)."""


def modes_of(api: object, tree: MypyFile) -> Modes:
    """``tree``'s walk, kept in the build's state until mypy parses the module anew
    (:meth:`spmd_mypy.build_state.BuildState.forget`: a daemon merges an edited module's new tree into
    the old tree object, so neither the tree's identity nor its name says that it changed)."""
    modes = state_of(api).modes
    cached = modes.get(tree.fullname)
    if cached is None or cached.tree is not tree:
        cached = Modes(tree)
        if _imports_spmd_stubs(tree):
            _record_modes(tree, cached)
        modes[tree.fullname] = cached
    return cached


def _imports_spmd_stubs(tree: MypyFile) -> bool:
    """Only a module that imports spmd_stubs can decorate a def (torch's thousand modules are skipped)."""
    for node in tree.imports:
        if isinstance(node, Import):
            names = [name for name, _ in node.ids]
        elif isinstance(node, (ImportFrom, ImportAll)):
            names = [node.id]
        else:
            continue
        if any(name == "spmd_stubs" or name.startswith("spmd_stubs.") for name in names):
            return True
    return False


def _record_modes(tree: MypyFile, modes: Modes) -> None:
    """Record the axes global in each def's body, the regions, and a global def's returned values."""
    for function in functions_in(tree.defs):
        outer = modes.by_def[id(function.enclosing.node)] if function.enclosing is not None else NONE
        inner = _axes_in(function, outer, modes)
        modes.by_def[id(function.node)] = inner
        if inner:
            _scan_returns(function.node, modes)


def _axes_in(function: Function, outer: frozenset[str], modes: Modes) -> frozenset[str]:
    """The axes global in ``function``'s body: ``outer``'s, changed by its region decorators (each
    recorded as a region), innermost first so that the outermost wins."""
    inner = set(outer)
    regions = [(decorator, _region_call(decorator)) for decorator in function.decorators]
    for _, region in reversed(regions):
        if region is not None:
            fullname, region_axes = region
            if fullname == GLOBAL_SPMD:
                inner |= region_axes
            else:
                inner -= region_axes
    for decorator, region in regions:
        if region is not None:
            modes.regions[id(decorator)] = Region(function.node, frozenset(inner))
    return frozenset(inner)


def _scan_returns(func: FuncDef, modes: Modes) -> None:
    """Record where ``func``'s return values come from (it is global on some axis).

    mypy checks function bodies after the decorators are applied, so a
    returned value is checked by the hook that types it: the returned
    expression itself (an op, a call), or for ``return name`` the last
    assignment to ``name`` before it in the same block; a returned parameter
    is checked against its declared type.
    """
    params = {arg.variable.name for arg in func.arguments}
    for block in blocks_in(func.body):
        for index, statement in enumerate(block.body):
            if isinstance(statement, ReturnStmt) and statement.expr is not None:
                _record_return(func, unwrapped(statement.expr), block.body[:index], params, modes)


def _record_return(func: FuncDef, returned: Expression, before: list[Statement], params: set[str],
                   modes: Modes) -> None:
    """``return returned`` in ``func``, after the statements ``before`` of its block."""
    tupled = isinstance(returned, TupleExpr)
    items = returned.items if isinstance(returned, TupleExpr) else [returned]
    for position, item in enumerate(items):
        slot = position if tupled else None
        modes.returned[id(item)] = (func, slot)
        if isinstance(item, NameExpr):
            source = _last_assignment(before, item.name)
            if source is not None:
                modes.returned[id(source)] = (func, slot)
            elif item.name in params:
                modes.returned_params.setdefault(id(func), []).append((item, item.name, slot))


def _last_assignment(before: list[Statement], name: str) -> Expression | None:
    for statement in reversed(before):
        if isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1:
            target = statement.lvalues[0]
            if isinstance(target, NameExpr) and target.name == name:
                return statement.rvalue
    return None


def _region_call(decorator: Expression) -> tuple[str, frozenset[str]] | None:
    """``global_spmd(tp)`` / ``local_map(dp, ep)`` -> (fullname, axes)."""
    if not (isinstance(decorator, CallExpr) and isinstance(decorator.callee, RefExpr)):
        return None
    fullname = decorator.callee.fullname
    if fullname not in REGIONS:
        return None
    axes: set[str] = set()
    for arg in decorator.args:
        named = static_axes(arg)
        if named is not None:
            axes.update(named)
    return fullname, frozenset(axes)


def static_axes(expr: Expression) -> tuple[str, ...] | None:
    """The mesh axes ``expr`` names (``tp``, ``(dp, cp)``), None where it names none statically."""
    try:
        return axes_of(expr)
    except AnnotationError:
        return None


def current_axes(api: CheckerPluginInterface) -> frozenset[str]:
    """The axes global where the checker is now (the innermost enclosing def's)."""
    scope = getattr(api, "scope", None)
    tree = getattr(api, "tree", None)
    if scope is None or tree is None:
        return NONE
    stack = scope.stack
    if len(stack) < 2:
        return NONE
    modes = modes_of(api, tree)
    for item in reversed(stack):
        if isinstance(item, FuncItem) and id(item) in modes.by_def:
            return modes.by_def[id(item)]
    return NONE


def axes_of_def(api: CheckerPluginInterface, func: FuncDef) -> frozenset[str]:
    """The axes global in ``func``'s body (the module holding it is walked once)."""
    tree = getattr(api, "tree", None)
    if tree is not None:
        modes = modes_of(api, tree)
        if id(func) in modes.by_def:
            return modes.by_def[id(func)]
    module = defining_module(func.fullname, getattr(api, "modules", {}))
    if module is None or module.fullname.partition(".")[0] == "torch":
        return NONE
    return modes_of(api, module).by_def.get(id(func), NONE)
