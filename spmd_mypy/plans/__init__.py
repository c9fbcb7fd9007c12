"""DTensor tensor-parallel plans checked as written (docs/spec.md#dtensor-plans).

At a call ``parallelize_module(module, mesh, plan)``, the plan as the code
assembles it is resolved against the module's static class and checked
against the data flow of the owners' ``forward``s: what each planned
sub-module takes and hands on is its style's types
(:mod:`spmd_stubs.core.parallel_styles`).  A mismatch is an ``spmd-plan``
error on the line of the plan entry the fix changes, or on the plan where the
fix adds an entry (a module left without a style holds plain parameters,
unless their gradients are all-reduced by hand).  The bodies are read from
source, so a module that holds a checked plan is checked again on every run
(its cache entry never stays valid): an edit of a planned module's class
elsewhere reaches it.

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.assembled`        the plan's entries as its code builds them
:mod:`.literal`          styles and their literal options
:mod:`.tree`             the sub-modules keys name; ``forward`` sources
:mod:`.flow`             the abstract evaluation of the ``forward``s
:mod:`.plain`            the parameters of a module without a style
:mod:`.other_plans`      whether another plan may give it one
:mod:`.by_hand`          gradients all-reduced by hand after ``backward``
:mod:`.check`            the problems found, reported with their fixes
:mod:`.fixes`            the one-entry change that makes the plan clean
:mod:`.edits`            that change as an edit of the source
:mod:`.boundaries`       strict mode: what of the plan is not read
=======================  ===================================================
"""

from __future__ import annotations

import difflib

from mypy.checker import TypeChecker
from mypy.nodes import (
    Block,
    CallExpr,
    Expression,
    ForStmt,
    FuncItem,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    StrExpr,
    TypeInfo,
)
from mypy.plugin import FunctionContext
from mypy.types import Instance, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import MODULE
from spmd_mypy.inference import type_of
from spmd_mypy.plans import tree
from spmd_mypy.plans.assembled import Entry, read_plan
from spmd_mypy.plans.boundaries import report_boundaries, report_unmodelled
from spmd_mypy.plans.by_hand import reduced_by_hand
from spmd_mypy.plans.check import report_problems
from spmd_mypy.plans.literal import Scope
from spmd_mypy.plans.other_plans import plain_parameters
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_mypy.statements import statements_in


def plan_hook(ctx: FunctionContext) -> Type:
    """``parallelize_module(module, mesh, plan)``: check the plan against the module's data flow."""
    api, args = ctx.api, dict(zip(ctx.callee_arg_names, ctx.args))
    module, mesh, plan = (args.get(name, [])[:1] for name in ("module", "device_mesh", "parallelize_plan"))
    if not isinstance(api, TypeChecker) or not module or not plan or not isinstance(ctx.context, CallExpr):
        return ctx.default_return_type
    function = api.scope.current_function()
    scope = Scope(api.tree, function)
    read = read_plan(plan[0], scope, ctx.context)
    info = _module_class(api, module[0], function)
    axis = axis_name(mesh[0]) if mesh else "mesh"
    if state_of(api).settings.strict:
        report_boundaries(api, read, module[0] if info is None else None, axis)
    if info is None or not read.entries:
        return ctx.default_return_type
    root = tree.build(api, info)
    unmatched = [entry for entry in read.entries if not tree.matches(root, entry.key)]
    for entry in unmatched:
        _no_module(api, entry, root, info, axis)
    if state_of(api).settings.strict:
        report_unmodelled(api, read, root, axis)
    if not unmatched:  # else torch raises before anything runs
        body = function.body if function is not None else Block(api.tree.defs)
        reduced = reduced_by_hand(body, ctx.context, module[0], mesh[0]) if mesh else {}
        report_problems(api, root, read, axis, plain_parameters(api, scope, body, ctx.context, read), reduced)
    return ctx.default_return_type


def mentions_plans(tree: MypyFile, sources: SourceFiles) -> bool:
    """Whether a freshly parsed module may call ``parallelize_module`` (read from its text: mypy writes a
    module's cache entry before checking it)."""
    try:
        return any("parallelize_module" in line for line in sources.lines(tree))
    except (SourceUnreadable, UnicodeDecodeError):
        return False


def _no_module(api: TypeChecker, entry: Entry, root: tree.Node, info: TypeInfo, axis: str) -> None:
    paths = [node.path for node in root.walk() if node.path]
    close = difflib.get_close_matches(entry.key, paths, n=1)
    advice = f'Fix: "{close[0]}"' if close else "Fix: remove the entry"
    report.fail(api, entry.node,
                f'"{entry.key}" names no sub-module of {info.name} (plan on mesh axis {axis}); '
                f"parallelize_module raises for it. {advice}.", errorcodes.PLAN)


def _module_class(api: TypeChecker, module: Expression, function: FuncItem | None) -> TypeInfo | None:
    """The planned module's class: its static type, or for a loop variable ``for block in
    model.layers.values()`` the class of the container's items."""
    static = get_proper_type(type_of(api, module))
    if isinstance(static, Instance) and static.type.has_base(MODULE) and static.type.fullname != MODULE:
        return static.type
    if not (isinstance(module, NameExpr) and function is not None):
        return None
    loops = [s for s in statements_in(function.body) if isinstance(s, ForStmt)
             and isinstance(s.index, NameExpr) and s.index.name == module.name]
    iterable = loops[0].expr if len(loops) == 1 else None
    if isinstance(iterable, CallExpr) and isinstance(iterable.callee, MemberExpr) and not iterable.args \
            and iterable.callee.name == "values":
        iterable = iterable.callee.expr
    if not isinstance(iterable, MemberExpr):
        return None
    owner = get_proper_type(type_of(api, iterable.expr))
    if not isinstance(owner, Instance):
        return None
    defining = next((base for base in owner.type.mro if iterable.name in base.names), None)
    return tree.container_item(api, defining, iterable.name) if defining is not None else None


def axis_name(mesh: Expression) -> str:
    """The mesh axis a plan's 1-D mesh stands for: ``mesh["tp"]`` is ``tp``, ``tp_mesh`` is ``tp``,
    any other name itself."""
    if isinstance(mesh, IndexExpr) and isinstance(mesh.index, StrExpr):
        return mesh.index.value
    name = mesh.name if isinstance(mesh, (NameExpr, MemberExpr)) else "mesh"
    return name[: -len("_mesh")] if name.endswith("_mesh") and len(name) > len("_mesh") else name
