"""Whether a sub-module a plan gives no style holds plain parameters, given the calling function's other plans.

torch leaves the parameters of a module no style touches as they are: plain
tensors.  Another ``parallelize_module`` call of the calling function may give
it a style, so a sub-module's parameters are taken as plain only where every
key of this plan is read and no other call's plan may name the sub-module:
each other plan is read, and none of its keys ends with the sub-module's path,
or is the end of it (a plan of a module above or below this one).  A plan in
another function is taken as another configuration of the model, not applied
on top of this one.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import Block, CallExpr, Expression, RefExpr
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.fullnames import PARALLELIZE_MODULE
from spmd_mypy.plans.assembled import Plan, read_plan
from spmd_mypy.plans.literal import Scope
from spmd_mypy.statements import nested_blocks, statements_in


def plain_parameters(api: TypeChecker, scope: Scope, body: Block, call: CallExpr, read: Plan
                     ) -> Callable[[str], bool]:
    """Whether a sub-module (by path) that ``read`` (the plan of ``call``) gives no style holds plain
    parameters, given the other calls in ``body``."""
    if not read.complete:
        return lambda path: False
    others: list[str] = []
    for statement in statements_in(body):
        for other in [] if nested_blocks(statement) else get_subexpressions(statement):
            if isinstance(other, CallExpr) and other is not call and isinstance(other.callee, RefExpr) \
                    and other.callee.fullname == PARALLELIZE_MODULE:
                plan = plan_argument(other)
                other_read = read_plan(plan, scope, other) if plan is not None else Plan()
                if not other_read.complete:
                    return lambda path: False
                others.extend(entry.key for entry in other_read.entries)
    return lambda path: not any(_may_name(key, path) for key in others)


def _may_name(key: str, path: str) -> bool:
    atoms, written = path.split("."), key.split(".")
    shared = min(len(atoms), len(written))
    return all(a == "*" or fnmatchcase(a, w) for a, w in zip(atoms[-shared:], written[-shared:]))


def plan_argument(call: CallExpr) -> Expression | None:
    """The plan a ``parallelize_module`` call passes (by position or as ``parallelize_plan``)."""
    named = [arg for name, arg in zip(call.arg_names, call.args) if name == "parallelize_plan"]
    positional = [arg for name, arg in zip(call.arg_names, call.args) if name is None]
    return named[0] if named else positional[2] if len(positional) > 2 else None
