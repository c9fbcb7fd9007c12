"""Reading a call's shape arguments: the dims an op's shard propagation rule needs.

An op's record names the parameters that give its dims; this module reads
their values from the call when they are written statically (int literals,
tuples of them, ``x.shape[i]`` pieces of a new shape) and builds the op's
:mod:`~spmd_stubs.core.sharding` behaviour.  A call whose dims are not static
gets an opaque behaviour: the op has no rule there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mypy.nodes import (
    ARG_STAR,
    ArgKind,
    CallExpr,
    Expression,
    IndexExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    SliceExpr,
    StarExpr,
    StrExpr,
    TupleExpr,
)
from mypy.plugin import FunctionContext, MethodContext

from spmd_mypy.call_arguments import int_value
from spmd_stubs.core import sharding
from spmd_stubs.core.torch_ops import REQUIRED, NoRule, Op, Param, Read, Value


@dataclass
class CallArgs:
    """A call's arguments by parameter name (what the shape parameters are read from)."""

    by_name: dict[str, list[tuple[Expression, ArgKind]]]
    receiver: Expression | None

    def get(self, name: str) -> list[tuple[Expression, ArgKind]] | None:
        return self.by_name.get(name) or None


def call_args(ctx: FunctionContext | MethodContext, receiver: Expression | None) -> CallArgs:
    by_name: dict[str, list[tuple[Expression, ArgKind]]] = {}
    for name, exprs, kinds in zip(ctx.callee_arg_names, ctx.args, ctx.arg_kinds):
        if name is not None:
            by_name[name] = list(zip(exprs, kinds))
    return CallArgs(by_name, receiver)


def _int(expr: Expression) -> int:
    value = int_value(expr)
    if value is None:
        raise NoRule("a dim that is not an int literal")
    return value


def _ints(entries: list[tuple[Expression, ArgKind]]) -> tuple[int, ...]:
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        return tuple(_int(item) for item in entries[0][0].items)
    return tuple(_int(expr) for expr, kind in entries if kind != ARG_STAR)


def _literal(args: CallArgs, param: Param) -> Value:
    """An int, a tuple of ints, True, False or None, as written; the default where the call leaves it out."""
    entries = args.get(param.name)
    if entries is None:
        if param.default is REQUIRED:
            raise NoRule(f"{param.name} is not given")
        return param.default
    expr = entries[0][0]
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return None
    if len(entries) == 1 and not isinstance(expr, (TupleExpr, ListExpr)):
        return _int(expr)
    return _ints(entries)


def _given(args: CallArgs, param: Param) -> Value:
    return args.get(param.name) is not None


def _equation(args: CallArgs, param: Param) -> Value:
    """The call's first argument, whatever its parameter is called (``torch.einsum(*args)``)."""
    for entries in args.by_name.values():
        for expr, _ in entries:
            if isinstance(expr, StrExpr):
                return expr.value
            raise NoRule("the equation is not a string literal")
    raise NoRule("no equation")


def _new_shape(args: CallArgs, param: Param) -> Value:
    """``x.view(x.shape[0], -1)``: the new shape, as the input dims it provably keeps at the front and the back."""
    entries = args.get(param.name)
    if entries is None:
        raise NoRule("no shape")
    return _kept(_pieces(args, entries))


_READERS: dict[Read, Callable[[CallArgs, Param], Value]] = {
    Read.LITERAL: _literal,
    Read.GIVEN: _given,
    Read.EQUATION: _equation,
    Read.NEW_SHAPE: _new_shape,
}


def behaviour_of(op: Op | None, args: CallArgs) -> sharding.Behaviour:
    """The shape behaviour of this call: the op's shape rule, built from the dims the call passes."""
    if op is None or op.shape is None:
        return sharding.Opaque("has no shard propagation rule")
    try:
        return op.shape.build([_READERS[param.read](args, param) for param in op.shape.params], op)
    except NoRule as why:
        return sharding.Opaque(f"has no shard propagation rule for this call ({why})")


def _pieces(args: CallArgs, entries: list[tuple[Expression, ArgKind]]) -> list[tuple[str, int]]:
    """The new shape's entries, each read by :func:`_piece`."""
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        items: list[tuple[Expression, bool]] = [
            (item.expr if isinstance(item, StarExpr) else item, isinstance(item, StarExpr))
            for item in entries[0][0].items
        ]
    else:
        items = [(expr, kind == ARG_STAR) for expr, kind in entries]
    source = args.receiver if args.receiver is not None else _first_tensor(args)
    pieces = [_piece(expr, star, source) for expr, star in items]
    if len(items) == 1 and pieces[0][0] == "other" and int_value(items[0][0]) is None:
        return [("star", 0)]  # a lone non-literal may be a whole shape: its length is unknown
    return pieces


def _kept(pieces: list[tuple[str, int]]) -> sharding.View:
    """The new shape's ndim, and how many of the input's first and last dims it keeps in place."""
    ndim: int | None = 0
    for piece in pieces:
        if piece[0] == "star":
            ndim = None
        elif piece[0] in ("front", "back"):
            ndim = None if ndim is None else ndim + piece[1]
        elif ndim is not None:
            ndim += 1
    prefix = 0
    for kind, value in pieces:
        if kind == "dim" and value == prefix:
            prefix += 1
        elif kind == "front" and prefix == 0:
            prefix = value
        else:
            break
    suffix = 0
    for kind, value in reversed(pieces):
        if kind == "dim" and value == -(suffix + 1):
            suffix += 1
        elif kind == "back" and suffix == 0:
            suffix = value
        else:
            break
    return sharding.View(prefix, suffix, ndim)


def _first_tensor(args: CallArgs) -> Expression | None:
    entries = args.get("input") or args.get("self")
    return entries[0][0] if entries else None


def _piece(expr: Expression, star: bool, source: Expression | None) -> tuple[str, int]:
    """One entry of a new shape: ``("dim", i)`` for ``x.shape[i]``, ``("front", k)`` for ``*x.shape[:k]``..."""
    if star:
        if isinstance(expr, IndexExpr) and _shape_of(expr.base, source) and isinstance(expr.index, SliceExpr):
            s = expr.index
            if s.begin_index is None and s.end_index is not None and s.stride is None:
                end = int_value(s.end_index)
                if end is not None and end >= 0:
                    return ("front", end)
            if s.end_index is None and s.begin_index is not None and s.stride is None:
                begin = int_value(s.begin_index)
                if begin is not None and begin < 0:
                    return ("back", -begin)
        return ("star", 0)
    if isinstance(expr, IndexExpr) and _shape_of(expr.base, source):
        index = int_value(expr.index)
        if index is not None:
            return ("dim", index)
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, MemberExpr)
        and expr.callee.name == "size"
        and _same(expr.callee.expr, source)
        and len(expr.args) == 1
    ):
        index = int_value(expr.args[0])
        if index is not None:
            return ("dim", index)
    return ("other", 0)


def _shape_of(expr: Expression, source: Expression | None) -> bool:
    return isinstance(expr, MemberExpr) and expr.name == "shape" and _same(expr.expr, source)


def _same(a: Expression | None, b: Expression | None) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, NameExpr) and isinstance(b, NameExpr):
        return a.name == b.name and (a.node is b.node or a.node is None or b.node is None)
    if isinstance(a, MemberExpr) and isinstance(b, MemberExpr):
        return a.name == b.name and _same(a.expr, b.expr)
    return False
