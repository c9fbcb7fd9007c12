"""Branches where a mesh axis has one rank: ``if group.size() == 1: return x`` (docs/spec.md#axes-of-size-1).

On an axis of size 1 every SPMD type is the same value: a sum over one
rank, a gather of one shard, a copy to one rank all leave the tensor as it
is, and so does their backward.  Hand-written code skips its collectives
there, and the skip is correct, so a ``return`` in such a branch is judged
with that axis trivial: the returned value takes the declared type on it
(:func:`spmd_mypy.function_bodies.returned_hook`).

A branch is one where an axis has size 1 when its test is

* ``SIZE == 1`` / ``1 == SIZE`` / ``SIZE <= 1`` / ``SIZE < 2`` (the body),
  or ``SIZE != 1`` / ``SIZE > 1`` / ``SIZE >= 2`` (the ``else``),

where ``SIZE`` is the size of an axis's group: ``group.size()`` or
``torch.distributed.get_world_size(group)`` of a group that names an axis
(:mod:`spmd_mypy.groups`), a call or attribute declared in ``[spmd_mypy]
sizes`` (``*.tp_world_size``, which also covers a plain ``tp_world_size``),
a name or attribute named for the size of an axis the function's signature
mentions (``tp_world_size``, ``tp_size``: an underscore-separated part is
the axis, another is ``size``), or a local variable assigned one of these.  Only returns are judged so:
other statements in the branch are checked as everywhere.
"""

from __future__ import annotations

import re

from mypy.checker import TypeChecker
from mypy.nodes import (
    Block,
    CallExpr,
    ComparisonExpr,
    Expression,
    FuncItem,
    IfStmt,
    IntExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    ReturnStmt,
)
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.config import AxisNames, Config
from spmd_mypy.groups import axis_of_group, followed, function_name, named_for
from spmd_mypy.statements import statements_in

GET_WORLD_SIZE = "torch.distributed.distributed_c10d.get_world_size"
_ONE_RANK = {("==", 1), ("<=", 1), ("<", 2)}
"""``SIZE op n`` tests true exactly when the axis has one rank."""
_MORE_RANKS = {("!=", 1), (">", 1), (">=", 2)}
"""``SIZE op n`` tests false exactly when the axis has one rank."""
_SIZE_WORDS = frozenset({"size"})
_SIZE_NAME = re.compile("size|world", re.IGNORECASE)
_MIRRORED = {"==": "==", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


def may_test_size(function: FuncItem, sizes: AxisNames) -> bool:
    """Whether ``function`` has an ``if`` comparing with an int something named like a size (``size`` or
    ``world`` in a name it reads) or declared one in ``sizes``: read before any types, so cheap."""
    return any(isinstance(statement, IfStmt) and any(_compared_with_int(test) and _reads_a_size(test, sizes)
                                                     for test in statement.expr)
               for statement in statements_in(function.body))


def _reads_a_size(test: Expression, sizes: AxisNames) -> bool:
    names = [e.name for e in (test, *get_subexpressions(test)) if isinstance(e, (NameExpr, MemberExpr))]
    return any(_SIZE_NAME.search(name) or sizes.of_attribute(name) or name in sizes.short_function_names()
               for name in names)


def trivial_axes_at(returned: Expression, function: FuncItem, checker: TypeChecker, settings: Config) -> set[str]:
    """The axes of size 1 where ``function`` returns ``returned`` (the expression of one of its returns)."""
    axes: set[str] = set()
    for statement in statements_in(function.body):
        if not isinstance(statement, IfStmt):
            continue
        for test, body in zip(statement.expr, statement.body):
            axis, when_true = _size_test(test, function, checker, settings)
            if axis is None:
                break  # an elif after an undecided test runs only where that test failed: not followed
            branch = body if when_true else statement.else_body
            if branch is not None and _returns_in(branch, returned):
                axes.add(axis)
    return axes


def _returns_in(block: Block, returned: Expression) -> bool:
    return any(isinstance(s, ReturnStmt) and s.expr is returned for s in statements_in(block))


def _compared_with_int(test: Expression) -> bool:
    if isinstance(test, OpExpr) and test.op == "and":
        return _compared_with_int(test.left) or _compared_with_int(test.right)
    return (isinstance(test, ComparisonExpr) and len(test.operators) == 1
            and any(isinstance(operand, IntExpr) for operand in test.operands))


def _size_test(test: Expression, function: FuncItem, checker: TypeChecker, settings: Config,
               ) -> tuple[str | None, bool]:
    """(the axis ``test`` asks the size of, whether the test is true when that size is 1); (None, _) if none.

    ``a and b`` is true only where each is: where one of them is true only on one rank, so is the whole.
    """
    if isinstance(test, OpExpr) and test.op == "and":
        for operand in (test.left, test.right):
            axis, when_true = _size_test(operand, function, checker, settings)
            if axis is not None and when_true:
                return axis, True
        return None, False
    if not _compared_with_int(test):
        return None, False
    assert isinstance(test, ComparisonExpr)
    left, right = test.operands
    operator = test.operators[0]
    if isinstance(left, IntExpr):
        left, right, operator = right, left, _MIRRORED.get(operator, operator)
    if not isinstance(right, IntExpr) or (operator, right.value) not in _ONE_RANK | _MORE_RANKS:
        return None, False
    axis = _axis_of_size(left, function, checker, settings)
    return axis, (operator, right.value) in _ONE_RANK


def _axis_of_size(size: Expression, function: FuncItem, checker: TypeChecker, settings: Config) -> str | None:
    """The axis whose group ``size`` is the size of (module docstring); None where none."""
    tree = checker.tree

    def of_group(group: Expression) -> str | None:
        return axis_of_group(group, settings.groups, tree, checker.lookup_type_or_none(group), function)

    def names(expr: Expression) -> str | None:
        if isinstance(expr, (NameExpr, MemberExpr)):
            return settings.sizes.of_attribute(expr.name) or named_for(expr.name, function, _SIZE_WORDS)
        if not isinstance(expr, CallExpr):
            return None
        callee = expr.callee
        if isinstance(callee, MemberExpr) and callee.name == "size" and not expr.args:
            return of_group(callee.expr)
        fullname = function_name(callee, tree)
        if fullname == GET_WORLD_SIZE and expr.args:
            return of_group(expr.args[0])
        return settings.sizes.of_function(fullname) if fullname is not None else None

    return names(size) or followed(size, function, names, tree)

