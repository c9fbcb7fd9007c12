"""DTensor tensor-parallel plans checked as written (docs/spec.md#dtensor-plans).

At a call ``parallelize_module(module, mesh, plan)`` whose plan is a literal
(:mod:`.literal`), each key is resolved against the module's static class
(:mod:`.tree`) and the plan against the data flow of the owners'
``forward``s (:mod:`.flow`): what each planned sub-module takes and hands
on is its style's types (:mod:`spmd_stubs.core.parallel_styles`).  A
mismatch is an ``spmd-plan`` error on the line of the plan entry the fix
changes (:mod:`.fixes`), or on the plan where the fix adds an entry (a torch
module left without a style holds plain parameters, :mod:`.plain`).  The bodies are read from source, so a module that
holds a checked plan is checked again on every run (its cache entry never
stays valid): an edit of a planned module's class elsewhere reaches it.

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.literal`          the plan's entries, styles and literal options
:mod:`.tree`             the sub-modules keys name; ``forward`` sources
:mod:`.flow`             the abstract evaluation of the ``forward``s
:mod:`.plain`            the parameters of a torch module without a style
:mod:`.fixes`            the one-entry change that makes the plan clean
=======================  ===================================================
"""

from __future__ import annotations

import difflib
from typing import Sequence

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    Context,
    DictExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncItem,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    TypeInfo,
)
from mypy.plugin import FunctionContext
from mypy.types import Instance, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.fullnames import MODULE, PARALLELIZE_MODULE
from spmd_mypy.inference import type_of
from spmd_mypy.plans import tree
from spmd_mypy.plans.fixes import best_fix
from spmd_mypy.plans.flow import Flow, Planned, Problem
from spmd_mypy.plans.literal import Entry, axis_name, entries, plan_display
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_mypy.statements import statements_in
from spmd_stubs.core.parallel_styles import style_types


def plan_hook(ctx: FunctionContext) -> Type:
    """``parallelize_module(module, mesh, plan)``: check a literal plan against the module's data flow."""
    api, args = ctx.api, dict(zip(ctx.callee_arg_names, ctx.args))
    module, mesh, plan = (args.get(name, [])[:1] for name in ("module", "device_mesh", "parallelize_plan"))
    if not isinstance(api, TypeChecker) or not module or not plan:
        return ctx.default_return_type
    function = api.scope.current_function()
    display = plan_display(plan[0], function)
    found = entries(display) if display is not None else None
    info = _module_class(api, module[0], function)
    if found is None or info is None:
        return ctx.default_return_type
    root = tree.build(api, info)
    axis = axis_name(mesh[0]) if mesh else "mesh"
    unmatched = [entry for entry in found if not tree.matches(root, entry.key)]
    for entry in unmatched:
        _no_module(api, entry, root, info, axis)
    if not unmatched:  # else torch raises before anything runs
        plain = _only_plan(api, function)
        assert display is not None
        _report(api, problems(api, root, found, axis, plain=plain), root, found, axis, display, plain)
    return ctx.default_return_type


def mentions_plans(tree: MypyFile, sources: SourceFiles) -> bool:
    """Whether a freshly parsed module may call ``parallelize_module`` (read from its text: mypy writes a
    module's cache entry before checking it)."""
    try:
        return any("parallelize_module" in line for line in sources.lines(tree))
    except (SourceUnreadable, UnicodeDecodeError):
        return False


def problems(api: TypeChecker, root: tree.Node, found: Sequence[Entry], axis: str, changed: str | None = None,
             strict: bool = False, as_written: Sequence[Entry] = (), plain: bool = True) -> list[Problem] | None:
    """What the plan's modules' data flow finds wrong, each once (``strict``, ``plain``: as :class:`Flow`
    says).
    A module whose entry is not a modelled style hands on unknown values; None where that entry is the
    ``changed`` one.  The inputs are seeded as the plan ``as_written`` (default: this one) has them: a
    fix does not change what the caller passes."""
    planned = _planned(root, found, changed)
    seeding = _planned(root, as_written, None) if as_written else planned
    if planned is None or seeding is None:
        return None
    flow = Flow(api, axis, planned, strict, plain)
    owners = [root, *(n for n in root.walk() if any(c.path in planned for c in n.children.values()))]
    for owner in owners:
        if owner is root or owner.path not in flow.reached:
            flow.owner(owner, seeding)
    return list({problem.message: problem for problem in flow.problems}.values())


def _planned(root: tree.Node, found: Sequence[Entry], changed: str | None) -> dict[str, Planned] | None:
    """Each planned sub-module's entry and types; None where the ``changed`` entry is not modelled."""
    planned: dict[str, Planned] = {}
    for entry in found:
        for node in tree.matches(root, entry.key):
            try:
                if entry.style is None:
                    raise ValueError(f"{entry.key}: not a literal style")
                types = style_types(entry.style.name, dict(entry.style.options), node.kind)
            except ValueError:
                if entry.key == changed:
                    return None
                types = None
            planned[node.path] = Planned(entry.key, str(entry.style), types)
    return planned


def _report(api: TypeChecker, found_problems: list[Problem] | None, root: tree.Node, found: Sequence[Entry],
            axis: str, display: DictExpr, plain: bool) -> None:
    """Each problem with the fix that removes it and adds none (checked strictly), at the entry the fix
    changes, or at the plan where it adds one; problems one fix removes together (a mismatch and what
    follows from it) are reported once."""
    by_key = {entry.key: entry for entry in found}
    before = {p.message for p in problems(api, root, found, axis, strict=True, plain=plain) or ()}
    grouped: dict[tuple[str, str], tuple[Problem, Entry | None]] = {}
    for problem in found_problems or ():
        if not problem.keys or problem.keys[0] not in by_key and not problem.unplanned:
            continue

        def removed(plan: Sequence[Entry], key: str, message: str = problem.message) -> int | None:
            after = problems(api, root, plan, axis, key, strict=True, as_written=found, plain=plain)
            left = {p.message for p in after} if after is not None else {message}
            return len(before - left) if left <= before - {message} else None

        fix = best_fix(problem.keys, found, removed, display if problem.unplanned else None)
        grouped.setdefault((fix.key, str(fix.style)) if fix is not None else ("", problem.message), (problem, fix))
    for problem, fix in grouped.values():
        written = by_key.get(fix.key if fix is not None else problem.keys[0])
        if written is None:  # an entry to add: reported on the plan
            advice = f'Fix: add "{fix.key}": {fix.style}.' if fix is not None else \
                f'Fix: give "{problem.keys[0]}" a style.'
            report.fail(api, Context(display.line, display.column), f"{problem.message}. {advice}", errorcodes.PLAN)
            continue
        advice = (f'Fix: "{fix.key}": {fix.style}.' if fix is not None else
                  f"Fix: make the layouts of {', '.join(repr(k) for k in problem.keys)} agree.")
        report.fail(api, written.node, f"{problem.message}. {advice}", errorcodes.PLAN)


def _only_plan(api: TypeChecker, function: FuncItem | None) -> bool:
    """Whether this is the one ``parallelize_module`` call of the calling function (or module): another may
    plan the modules this plan leaves without a style, so their parameters are plain only where there is
    none."""
    body = function.body if function is not None else Block(api.tree.defs)
    called = [s.expr if isinstance(s, ExpressionStmt) else s.rvalue for s in statements_in(body)
              if isinstance(s, (ExpressionStmt, AssignmentStmt))]
    return sum(isinstance(c, CallExpr) and isinstance(c.callee, RefExpr) and c.callee.fullname == PARALLELIZE_MODULE
               for c in called) <= 1


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
