"""Strict mode: where a plan loses what the checker would check (docs/spec.md#unknown-ops-and-strict-mode).

Each part of a plan not read (:mod:`.assembled`: a style with an option that
is not a literal, a style the checker does not model, a change of the plan it
cannot follow), a style read but not modelled on the module its key names
(``SequenceParallel`` on a module holding sub-modules), and a planned module
whose class is not known is ``spmd-untyped-boundary``, naming it and why:
what it decides is not checked.
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.nodes import Expression

from spmd_mypy import errorcodes, report
from spmd_mypy.plans import tree
from spmd_mypy.plans.assembled import Plan
from spmd_stubs.core.parallel_styles import style_types


def report_boundaries(api: TypeChecker, read: Plan, unknown_module: Expression | None, axis: str) -> None:
    """Each part of ``read`` not read; ``unknown_module``: the planned module, where its class is not known."""
    for unread, key in read.unread:
        written = f"`{report.snippet(api, unread.node) or '?'}` {unread.reason}"
        if key is not None:
            report.fail(api, unread.node, f'the style of plan entry "{key}" is not read: {written}, so the layouts '
                        f"it gives on mesh axis {axis} are not checked. Fix: give the style literal options (a "
                        "plan per value of a flag), or build it in a function of this module called with literal "
                        "arguments.", errorcodes.UNTYPED_BOUNDARY)
        else:
            checked = "checked without it" if read.entries else "not checked"
            report.fail(api, unread.node, f"the plan is not read: {written}, so the plan on mesh axis {axis} is "
                        f"{checked}. Fix: build the plan where it is used, from a dict display of styles and "
                        "`plan[key] = style` or `plan.update({...})` before the call.", errorcodes.UNTYPED_BOUNDARY)
    if unknown_module is not None:
        report.fail(api, unknown_module, f"the class of the planned module `{report.snippet(api, unknown_module)}` "
                    f"is not known, so the plan on mesh axis {axis} is not checked. Fix: annotate it with its "
                    "module class.", errorcodes.UNTYPED_BOUNDARY)


def report_unmodelled(api: TypeChecker, read: Plan, root: tree.Node, axis: str) -> None:
    """Each entry whose style is read but not modelled on a module its key names."""
    for entry in read.entries:
        style = entry.style
        if style is None:
            continue
        for node in tree.matches(root, entry.key):
            try:
                style_types(style.name, dict(style.options), node.kind)
            except ValueError as why:
                report.fail(api, entry.node, f'the style of plan entry "{entry.key}", {style}, is not modelled '
                            f"on {node.info.name if node.info else node.path}: {why}, so the layouts it gives on "
                            f"mesh axis {axis} are not checked. Fix: a style the checker models there.",
                            errorcodes.UNTYPED_BOUNDARY)
                break
