"""A name that holds a spmd_types type expression: its one assignment, where nothing else changes it.

:mod:`.reading` follows a name (``q_local``, ``output_type``, ``q_ps``) to
the expression it holds where it is read: its one assignment ``name =
value`` in the scope (the function read in, or the module for a global),
before the read, with no other binding of it; item assignments
(``t[axis] = T``) and mutating calls (``t.update(...)``) only after it in
the same block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from mypy.nodes import (
    GDEF,
    LDEF,
    AssignmentStmt,
    Block,
    CallExpr,
    DelStmt,
    Expression,
    ExpressionStmt,
    IndexExpr,
    MemberExpr,
    NameExpr,
    OperatorAssignmentStmt,
    Statement,
    Var,
)

from spmd_mypy.statements import names_bound_by, nested_blocks

if TYPE_CHECKING:
    from spmd_mypy.spmd_types_api.reading import Site

_MUTATORS = frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"})


def single_value(name: NameExpr, site: Site) -> Expression | None:
    """What ``name`` holds where it is read: its one assignment's value, where nothing changes it after."""
    found = definition(name, site)
    if found is None:
        return None
    block, index = found
    if any(item_assignment(statement, name.name) is not None for statement in block.body[index + 1:]):
        return None
    statement = block.body[index]
    assert isinstance(statement, AssignmentStmt)
    return statement.rvalue


def definition(name: NameExpr, site: Site) -> tuple[Block, int] | None:
    """The block and index of the one assignment ``name = value`` in the scope that holds ``name`` (the
    function read in, or the module for a global, which nothing may change after), before the read; None
    where it has several, none, another kind of binding, or a change outside that block."""
    if not isinstance(name.node, Var):
        return None
    function = site.function if name.kind == LDEF else None
    if name.kind not in (LDEF, GDEF) or (function is None and name.kind == LDEF):
        return None
    if function is not None and any(argument.variable.name == name.name for argument in function.arguments):
        return None
    top = function.body if function is not None else Block(list(site.tree.defs))
    found: list[tuple[Block, int]] = []
    changed: list[tuple[Block, int]] = []
    for block in _blocks(top):
        for index, statement in enumerate(block.body):
            if _binds(statement, name.name):
                if not (isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1
                        and isinstance(statement.lvalues[0], NameExpr)):
                    return None
                found.append((block, index))
            elif _changes(statement, name.name):
                changed.append((block, index))
    if len(found) != 1:
        return None
    block, index = found[0]
    if function is None:
        return found[0] if not changed else None
    in_order = all(where is block and after > index for where, after in changed)
    return found[0] if in_order and block.body[index].line < site.line else None


def _blocks(block: Block) -> Iterator[Block]:
    """``block`` and every block nested in it, in the same scope."""
    yield block
    for statement in block.body:
        for nested in nested_blocks(statement):
            yield from _blocks(nested)


def _binds(statement: Statement, name: str) -> bool:
    if isinstance(statement, AssignmentStmt):
        return any(name in names_bound_by(target) for target in statement.lvalues)
    return any(name in names_bound_by(target) for target in _other_targets(statement))


def _other_targets(statement: Statement) -> list[Expression]:
    index = getattr(statement, "index", None)
    targets = getattr(statement, "target", None)
    return [*([index] if isinstance(index, Expression) else []),
            *(t for t in (targets if isinstance(targets, list) else []) if isinstance(t, Expression))]


def _changes(statement: Statement, name: str) -> bool:
    """An item assignment to ``name`` or a call of one of its mutating methods."""
    if item_assignment(statement, name) is not None:
        return True
    call = statement.expr if isinstance(statement, ExpressionStmt) else None
    return (isinstance(call, CallExpr) and isinstance(call.callee, MemberExpr) and call.callee.name in _MUTATORS
            and isinstance(call.callee.expr, NameExpr) and call.callee.expr.name == name)


def item_assignment(statement: Statement, name: str) -> IndexExpr | None:
    """The target ``name[key]`` of ``name[key] = value``, ``name[key] += value`` or ``del name[key]``."""
    if isinstance(statement, AssignmentStmt):
        targets: list[Expression] = statement.lvalues
    elif isinstance(statement, OperatorAssignmentStmt):
        targets = [statement.lvalue]
    elif isinstance(statement, DelStmt):
        targets = [statement.expr]
    else:
        targets = []
    for target in targets:
        if isinstance(target, IndexExpr) and isinstance(target.base, NameExpr) and target.base.name == name:
            return target
    return None
