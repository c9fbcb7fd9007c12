"""A loop over written-out axes around spmd_types' calls, unrolled: one call per axis.

torchtitan relabels several axes one at a time::

    for axis in ("dp", "cp"):
        spmd.mutate_type(offsets, axis, src=spmd.P, dst=spmd.V)

The axis is a variable there, which no hook can read (mypy types it
``str``), so each call would leave its tensor unknown.  When mypy has parsed
a user module, before its semantic analysis, such a loop is replaced by its
body once per element, the loop variable written as that element::

    spmd.mutate_type(offsets, "dp", src=spmd.P, dst=spmd.V)
    spmd.mutate_type(offsets, "cp", src=spmd.P, dst=spmd.V)

which runs the same calls in the same order.  A loop is unrolled where

* it iterates over a tuple or list written out (``("dp", "cp")``), or over
  ``.items()`` of a dict written out with a pair of names as its target
  (``for axis, dst in {"dp": spmd.P, "tp": spmd.I}.items()``), each element
  a string or a dotted name (``MeshAxisName.DP``, ``spmd.P``), and it has
  no ``else``;
* its body is calls of spmd_types' functions alone, each a statement or
  assigned to one name (``loss = spmd.mutate_type(loss, axis, ...)``), the
  loop variables only ever passed to them as arguments;
* the scope reads and binds the loop variables nowhere else (after the
  loop they would hold the last element).

Any other loop is checked as written: its calls on a variable axis leave
their tensors unknown.
"""

from __future__ import annotations

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    DictExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    Node,
    Statement,
    StrExpr,
    TupleExpr,
)
from mypy.server.subexpr import get_subexpressions
from mypy.treetransform import TransformVisitor

from spmd_mypy.spmd_types_api.spelling import Spellings, dotted
from spmd_mypy.statements import blocks_in, functions_in

Binding = dict[str, Expression]
"""One iteration: each loop variable's element."""


def unroll_axis_loops(tree: MypyFile, spellings: Spellings) -> bool:
    """Unroll every such loop of ``tree`` (module docstring); whether any was."""
    scopes: list[tuple[Node, Block]] = [(tree, Block(tree.defs))]
    scopes += [(function.node, function.node.body) for function in functions_in(tree.defs)]
    done = False
    for scope, body in scopes:
        for block in list(blocks_in(body)):
            for index in reversed(range(len(block.body))):
                unrolled = _unrolled(block.body[index], scope, spellings)
                if unrolled is not None:
                    block.body[index:index + 1] = unrolled
                    done = True
    return done


def _unrolled(statement: Statement, scope: Node, spellings: Spellings) -> list[Statement] | None:
    """The loop's body once per element; None where it is not such a loop."""
    if not isinstance(statement, ForStmt) or statement.else_body is not None or statement.is_async:
        return None
    bindings = _bindings(statement.index, statement.expr)
    names = {name for binding in bindings or [] for name in binding}
    if not bindings or not all(_calls_spmd_types(s, spellings) for s in statement.body.body):
        return None
    inside = [e for s in statement.body.body for e in get_subexpressions(s) if _names(e, names)]
    passed = [arg for s in statement.body.body for arg in _arguments(s) if _names(arg, names)]
    in_scope = sum(1 for e in get_subexpressions(scope) if _names(e, names))
    if len(inside) != len(passed) or in_scope != len(inside) + len(names):  # the loop's own target aside
        return None
    return [_written(s, binding) for binding in bindings for s in statement.body.body]


def _bindings(index: Expression, iterated: Expression | None) -> list[Binding] | None:
    """Each iteration's element per loop variable; None where the loop is not over written-out axes."""
    if isinstance(index, NameExpr) and isinstance(iterated, (TupleExpr, ListExpr)):
        elements = iterated.items
        return [{index.name: element} for element in elements] if all(map(_constant, elements)) else None
    pair = index.items if isinstance(index, TupleExpr) else []
    if not (len(pair) == 2 and all(isinstance(name, NameExpr) for name in pair) and _items_call(iterated)):
        return None
    assert isinstance(iterated, CallExpr) and isinstance(iterated.callee, MemberExpr)
    written = iterated.callee.expr
    assert isinstance(written, DictExpr)
    key_name, value_name = (name.name for name in pair if isinstance(name, NameExpr))
    if not all(key is not None and _constant(key) and _constant(value) for key, value in written.items):
        return None
    return [{key_name: key, value_name: value} for key, value in written.items if key is not None]


def _items_call(expr: Expression | None) -> bool:
    return (isinstance(expr, CallExpr) and not expr.args and isinstance(expr.callee, MemberExpr)
            and expr.callee.name == "items" and isinstance(expr.callee.expr, DictExpr))


def _constant(expr: Expression) -> bool:
    """A string or a dotted name: an element written again reads the same."""
    return isinstance(expr, StrExpr) or dotted(expr) is not None


def _calls_spmd_types(statement: Statement, spellings: Spellings) -> bool:
    call = _call(statement)
    target_ok = not isinstance(statement, AssignmentStmt) or (
        len(statement.lvalues) == 1 and isinstance(statement.lvalues[0], NameExpr) and statement.type is None)
    return call is not None and spellings.called(call.callee) is not None and target_ok


def _call(statement: Statement) -> CallExpr | None:
    """The call a statement of the loop's body is, or assigns."""
    value = statement.expr if isinstance(statement, ExpressionStmt) else (
        statement.rvalue if isinstance(statement, AssignmentStmt) else None)
    return value if isinstance(value, CallExpr) else None


def _arguments(statement: Statement) -> list[Expression]:
    call = _call(statement)
    return call.args if call is not None else []


def _names(expr: Expression, names: set[str]) -> bool:
    return isinstance(expr, NameExpr) and expr.name in names


def _written(statement: Statement, binding: Binding) -> Statement:
    """A fresh copy of the body's statement, each loop variable argument written as its element."""
    copier = TransformVisitor()
    call = _call(statement)
    assert call is not None
    written = copier.expr(call)
    assert isinstance(written, CallExpr)
    written.args = [copier.expr(binding[arg.name]) if isinstance(arg, NameExpr) and arg.name in binding else copied
                    for arg, copied in zip(call.args, written.args)]
    if isinstance(statement, AssignmentStmt):
        copy: Statement = AssignmentStmt([copier.expr(statement.lvalues[0])], written)
    else:
        copy = ExpressionStmt(written)
    copy.set_line(statement)
    return copy
