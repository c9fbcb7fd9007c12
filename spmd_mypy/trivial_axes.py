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

The same holds where a value returned skipped a branch that runs only where an
axis has more ranks (``if SIZE > 1: x = gather(x)`` and later ``return x``):
the path that skipped it ran on one rank, and the value it brings may take the
declared type there, while the value the branch bound is checked as it is.
mypy's type at the ``return`` is the union of both (``V@tp | R@tp``), so the
rule names the members that cannot have come through the branch.  For a name
``x`` returned (alone or as an item of a returned tuple), in the block of the
``return``, after an ``if`` of that block whose *more-ranks branch* (the body
of the first test ``SIZE != 1`` / ``SIZE > 1`` / ``SIZE >= 2``, or the
``else`` of a lone ``SIZE == 1`` test) binds ``x`` by an assignment of its own
block (so every pass through the branch rebinds it):

* every binding of ``x`` in such branches is an assignment whose value has a
  type on the axis in each member; their types there are the branch's types;
* every other binding of ``x`` from the first such ``if`` to the ``return``
  is an assignment whose value has no type on the axis (the checker knows
  nothing of it there), or ``x`` read through methods (``x.view(...)
  .transpose(0, 1)``) whose result has the same types on the axis as the
  ``x`` read, none of them a shard: a method computes on each rank alone,
  so it never makes a value more alike across ranks, and with no shard dims
  to swap, the same types mean each value kept its own;

then a member of ``x``'s type at the ``return`` whose type on the axis is none
of the branch's types did not come through a branch, so it skipped them all,
on one rank, and takes the declared type on that axis.  A member of one of the
branch's types is checked as it is: a branch that binds the wrong type is
still reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Mapping

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Expression,
    FuncItem,
    IfStmt,
    IntExpr,
    ListExpr,
    MatchStmt,
    MemberExpr,
    NameExpr,
    OpExpr,
    ReturnStmt,
    Statement,
    TupleExpr,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import AnyType, TupleType, Type, get_proper_type

from spmd_mypy.config import AxisNames, Config
from spmd_mypy.groups import axis_of_group, followed, function_name, named_for
from spmd_mypy.representation import members, spmd_members, spmd_of
from spmd_mypy.statements import (
    binding_targets,
    blocks_in,
    names_bound_by,
    names_bound_in,
    nested_blocks,
    statements_in,
)
from spmd_stubs.core import AxisType, TensorType

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


@dataclass(frozen=True)
class TrivialAxes:
    """Where a returned value takes the declared type on an axis of one rank (module docstring)."""

    everywhere: frozenset[str]
    """The axes of one rank wherever the ``return`` runs: it is in a branch where they have one rank."""
    branch_types: Mapping[str, Mapping[str, frozenset[AxisType]]]
    """Per name returned, per axis: the types on it of the values its more-ranks branches bind."""

    def __bool__(self) -> bool:
        return bool(self.everywhere or self.branch_types)

    def of(self, item: Expression | None, tensor_type: TensorType) -> set[str]:
        """The axes where ``tensor_type``, a member of the type of ``item`` (returned), takes the declared type."""
        ran = self.branch_types.get(item.name, {}) if isinstance(item, NameExpr) else {}
        skipped = {axis for axis, types in ran.items() if (found := tensor_type.get(axis)) is not None
                   and found not in types}
        return set(self.everywhere) | skipped


def trivial_axes(returned: Expression, value: Expression, function: FuncItem, checker: TypeChecker,
                 settings: Config) -> TrivialAxes:
    """Where ``function``'s return of ``returned`` (its expression; ``value``, what it wraps) has axes of size 1."""
    everywhere = frozenset(trivial_axes_at(returned, function, checker, settings))
    place = _place_of(returned, function)
    if place is None:
        return TrivialAxes(everywhere, {})
    before = place[0].body[:place[1]]
    names = [item for item in (value.items if isinstance(value, TupleExpr) else [value]) if isinstance(item, NameExpr)]
    found = {name.name: _branch_types(name.name, before, function, checker, settings) for name in names}
    return TrivialAxes(everywhere, {name: ran for name, ran in found.items() if ran})


def _place_of(returned: Expression, function: FuncItem) -> tuple[Block, int] | None:
    """The block whose statement ``return returned`` is, and its index there."""
    for block in blocks_in(function.body):
        for index, statement in enumerate(block.body):
            if isinstance(statement, ReturnStmt) and statement.expr is returned:
                return block, index
    return None


def _branch_types(name: str, statements: list[Statement], function: FuncItem, checker: TypeChecker,
                  settings: Config) -> dict[str, frozenset[AxisType]]:
    """Per axis, the types the more-ranks branches among ``statements`` bind ``name`` to; none where the
    bindings of ``name`` are not those the module docstring allows."""
    ran: dict[str, set[AxisType]] = {}
    branches: list[Block] = []
    start: int | None = None
    for index, statement in enumerate(statements):
        found = _more_ranks_branch(statement, function, checker, settings) if isinstance(statement, IfStmt) else None
        if found is None or not any(_assigns(name, s) for s in found[1].body):
            continue
        axis, branch = found
        types: set[AxisType] = set()
        for inner in statements_in(branch):
            if _binds_otherwise(name, inner):
                return {}
            if not _assigns(name, inner):
                continue
            bound = _bound_type(name, inner, checker)
            on_axis = [t.get(axis) if t is not None else None
                       for t in map(spmd_of, members(bound))] if bound is not None else [None]
            if None in on_axis:
                return {}
            types.update(t for t in on_axis if t is not None)
        ran.setdefault(axis, set()).update(types)
        branches.append(branch)
        start = index if start is None else start
    if start is None or not all(_keeps(name, s, set(ran), checker) for s in _outside(statements[start:], branches)):
        return {}
    return {axis: frozenset(types) for axis, types in ran.items()}


def _more_ranks_branch(statement: IfStmt, function: FuncItem, checker: TypeChecker, settings: Config,
                       ) -> tuple[str, Block] | None:
    """(the axis, the block) where ``statement`` has a block that runs exactly where the axis has more ranks."""
    axis, when_true = _size_test(statement.expr[0], function, checker, settings)
    if axis is None:
        return None
    if not when_true:
        return axis, statement.body[0]
    return (axis, statement.else_body) if len(statement.expr) == 1 and statement.else_body is not None else None


def _outside(statements: list[Statement], branches: list[Block]) -> Iterator[Statement]:
    """``statements`` and those of their blocks, except ``branches``."""
    for statement in statements:
        yield statement
        for block in nested_blocks(statement):
            if not any(block is branch for branch in branches):
                yield from _outside(block.body, branches)


def _assigns(name: str, statement: Statement) -> bool:
    return isinstance(statement, AssignmentStmt) and any(name in names_bound_by(t) for t in statement.lvalues)


def _binds_otherwise(name: str, statement: Statement) -> bool:
    """Whether ``statement`` itself binds ``name`` other than by an assignment (``x += 1``, ``for x in``)."""
    if isinstance(statement, MatchStmt):
        return name in names_bound_in([statement])
    return not isinstance(statement, AssignmentStmt) and any(
        name in names_bound_by(target) for target in binding_targets(statement))


def _bound_type(name: str, statement: Statement, checker: TypeChecker) -> Type | None:
    """The type ``statement``, an assignment, binds ``name`` to; None where it is not known."""
    assert isinstance(statement, AssignmentStmt)
    for target in statement.lvalues:
        if isinstance(target, NameExpr) and target.name == name:
            return checker.lookup_type_or_none(statement.rvalue)
        if isinstance(target, (TupleExpr, ListExpr)):
            for index, item in enumerate(target.items):
                if isinstance(item, NameExpr) and item.name == name:
                    return _item_type(statement.rvalue, index, len(target.items), checker)
    return None


def _item_type(rvalue: Expression, index: int, count: int, checker: TypeChecker) -> Type | None:
    if isinstance(rvalue, (TupleExpr, ListExpr)) and len(rvalue.items) == count:
        return checker.lookup_type_or_none(rvalue.items[index])
    whole = checker.lookup_type_or_none(rvalue)
    proper = get_proper_type(whole) if whole is not None else None
    if isinstance(proper, TupleType) and len(proper.items) == count:
        return proper.items[index]
    return whole if isinstance(proper, AnyType) else None


def _keeps(name: str, statement: Statement, axes: set[str], checker: TypeChecker) -> bool:
    """Whether ``statement``, outside the more-ranks branches, binds ``name`` as the module docstring allows."""
    if _binds_otherwise(name, statement):
        return False
    if not _assigns(name, statement):
        return True
    assert isinstance(statement, AssignmentStmt)
    bound = _bound_type(name, statement, checker)
    if bound is None:
        return False
    root = _method_root(statement.rvalue)
    read = checker.lookup_type_or_none(root) if isinstance(root, NameExpr) and root.name == name else None
    for axis in axes:
        after = _types_on(axis, bound)
        before = _types_on(axis, read) if read is not None else None
        if after and (before != after or any(t.shard is not None for t in after)):
            return False
    return True


def _method_root(expr: Expression) -> Expression:
    """``x`` of ``x.view(...).transpose(0, 1)``."""
    while isinstance(expr, CallExpr) and isinstance(expr.callee, MemberExpr):
        expr = expr.callee.expr
    return expr


def _types_on(axis: str, typ: Type) -> set[AxisType]:
    return {found for t in spmd_members(typ) if t is not None and (found := t.get(axis)) is not None}


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

