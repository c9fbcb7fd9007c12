"""Gradients the code all-reduces by hand over the plan's axis, after ``backward``.

A module the plan gives no style holds plain parameters (:mod:`.plain`); fed
this rank's sequence shard, each rank's gradient of one of them is a part of
the whole.  Summing the parts by hand is right:

    parallelize_module(block, tp_mesh, plan)
    ...
    loss.backward()
    for p in block.ffn_norm.parameters():
        dist.all_reduce(p.grad, group=tp_mesh.get_group())

makes every parameter of ``block.ffn_norm`` ``R`` on the axis (its gradient a
pending sum, completed).  It is recognised where it is written so, in the
function that calls ``parallelize_module``, after that call and after a
``.backward()`` call: a ``for`` over ``<the planned module>.<path>.parameters()``
whose body (or an ``if p.grad is not None:`` in it) is that one
``all_reduce`` of ``p.grad``, summing (no ``op``, or ``ReduceOp.SUM``),
synchronously, over the group of the plan's own mesh (``<mesh>.get_group()``,
or a local bound once to it).  Any other reduction is not read: the
parameters stay plain.
"""

from __future__ import annotations

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    IfStmt,
    IndexExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    Statement,
    StrExpr,
)
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.statements import blocks_in, statements_in

_ALL_REDUCE = "torch.distributed.distributed_c10d.all_reduce"


def reduced_by_hand(body: Block, call: CallExpr, module: Expression, mesh: Expression) -> dict[str, int]:
    """The sub-modules (paths from ``module``) whose parameters' gradients ``body`` all-reduces by hand after
    ``call`` (``parallelize_module(module, mesh, ...)``) and after a ``backward`` earlier in the same block,
    each with the line of its reduction."""
    statements = list(statements_in(body))
    found: dict[str, int] = {}
    for block in blocks_in(body):
        backward = False
        for statement in block.body:
            backward = backward or statement.line > call.line and _calls_backward(statement)
            if not (backward and isinstance(statement, ForStmt) and isinstance(statement.index, NameExpr)):
                continue
            path = _parameters_of(statement.expr, module)
            if path and _reduces(statement.body, statement.index.name, mesh, statements):
                found[path] = statement.line
    return found


def _calls_backward(statement: Statement) -> bool:
    return isinstance(statement, ExpressionStmt) and any(
        isinstance(e, CallExpr) and isinstance(e.callee, MemberExpr) and e.callee.name == "backward"
        for e in get_subexpressions(statement.expr))


def _parameters_of(iterable: Expression, module: Expression) -> str | None:
    """``a.b`` for ``<module>.a.b.parameters()``."""
    if not (isinstance(iterable, CallExpr) and isinstance(iterable.callee, MemberExpr) and not iterable.args
            and iterable.callee.name == "parameters"):
        return None
    atoms: list[str] = []
    owner = iterable.callee.expr
    while isinstance(owner, MemberExpr):
        atoms.insert(0, owner.name)
        owner = owner.expr
    same = isinstance(owner, NameExpr) and isinstance(module, NameExpr) and owner.name == module.name
    return ".".join(atoms) if same else None


def _reduces(body: Block, parameter: str, mesh: Expression, statements: list[Statement]) -> bool:
    """Whether ``body`` is one summing, synchronous ``all_reduce(<parameter>.grad)`` over ``mesh``'s group."""
    only = body.body[0] if len(body.body) == 1 else None
    if isinstance(only, IfStmt) and len(only.body) == 1 and len(only.body[0].body) == 1 and (
            only.else_body is None or not only.else_body.body):
        only = only.body[0].body[0]
    call = only.expr if isinstance(only, ExpressionStmt) else None
    if not (isinstance(call, CallExpr) and isinstance(call.callee, RefExpr) and call.callee.fullname == _ALL_REDUCE
            and call.args):
        return False
    positional = [arg for name, arg in zip(call.arg_names, call.args) if name is None]
    given = dict(zip(["tensor", "op", "group", "async_op"], positional))
    given.update({name: arg for name, arg in zip(call.arg_names, call.args) if name is not None})
    tensor, op, group, async_op = (given.get(name) for name in ("tensor", "op", "group", "async_op"))
    return (isinstance(tensor, MemberExpr) and tensor.name == "grad" and isinstance(tensor.expr, NameExpr)
            and tensor.expr.name == parameter
            and (op is None or isinstance(op, MemberExpr) and op.name == "SUM")
            and (async_op is None or isinstance(async_op, NameExpr) and async_op.fullname == "builtins.False")
            and group is not None and _group_of(group, mesh, statements))


def _group_of(group: Expression, mesh: Expression, statements: list[Statement]) -> bool:
    """Whether ``group`` is ``<mesh>.get_group()``, or a local bound once to it."""
    if isinstance(group, NameExpr):
        bound = [s.rvalue for s in statements if isinstance(s, AssignmentStmt)
                 and any(isinstance(t, NameExpr) and t.name == group.name for t in s.lvalues)]
        return len(bound) == 1 and _group_of(bound[0], mesh, [])
    return (isinstance(group, CallExpr) and isinstance(group.callee, MemberExpr) and group.callee.name == "get_group"
            and not group.args and _same(group.callee.expr, mesh))


def _same(expr: Expression, mesh: Expression) -> bool:
    """``tp_mesh`` and ``tp_mesh``, ``mesh["tp"]`` and ``mesh["tp"]``."""
    if isinstance(expr, NameExpr) and isinstance(mesh, NameExpr):
        return expr.name == mesh.name
    return (isinstance(expr, IndexExpr) and isinstance(mesh, IndexExpr) and _same(expr.base, mesh.base)
            and isinstance(expr.index, StrExpr) and isinstance(mesh.index, StrExpr)
            and expr.index.value == mesh.index.value)
