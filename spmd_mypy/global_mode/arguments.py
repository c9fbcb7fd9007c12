"""Reading a call's shape arguments: the dims an op's shard propagation rule needs.

An op's record names the parameters that give its dims; this module reads
their values from the call when they are written statically (int literals,
tuples of them, ``x.shape[i]`` pieces of a new shape) and builds the op's
:mod:`~spmd_stubs.core.sharding` behaviour.  A call whose dims are not static
gets an opaque behaviour: the op has no rule there.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.nodes import (
    ARG_STAR,
    ArgKind,
    CallExpr,
    Expression,
    IndexExpr,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    SliceExpr,
    StarExpr,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)
from mypy.plugin import FunctionContext, MethodContext

from spmd_mypy.ops import REQUIRED, Shape
from spmd_stubs.core import sharding


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


class _NoRule(Exception):
    """The call's dims are not static: the op has no rule here."""


def _int(expr: Expression) -> int:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    raise _NoRule("a dim that is not an int literal")


def _ints(entries: list[tuple[Expression, ArgKind]]) -> tuple[int, ...]:
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        return tuple(_int(item) for item in entries[0][0].items)
    return tuple(_int(expr) for expr, kind in entries if kind != ARG_STAR)


def _value(args: CallArgs, name: str, default: object) -> object:
    entries = args.get(name)
    if entries is None:
        if default is REQUIRED:
            raise _NoRule(f"{name} is not given")
        return default
    expr = entries[0][0]
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return None
    if len(entries) == 1 and not isinstance(expr, (TupleExpr, ListExpr)):
        return _int(expr)
    return _ints(entries)


def _dims(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise _NoRule("a bool where dims were expected")
    if value == ():
        raise _NoRule("an empty dim list")
    return (value,) if isinstance(value, int) else tuple(value)  # type: ignore[arg-type]


def behaviour_of(shape: Shape | None, args: CallArgs) -> sharding.Behaviour:
    """The shape behaviour of this call (its dims read from the arguments)."""
    if shape is None:
        return sharding.Opaque("has no shard propagation rule")
    try:
        return _behaviour(shape, args)
    except _NoRule as why:
        return sharding.Opaque(f"has no shard propagation rule for this call ({why})")


def _behaviour(shape: Shape, args: CallArgs) -> sharding.Behaviour:
    kind = shape.kind
    if kind == "view":
        if args.get(shape.params[0][0]) is None:
            raise _NoRule("no shape")
        return _view(args, shape.params[0][0])
    values = {name: _value(args, name, default) for name, default in shape.params}
    if kind == "pointwise":
        return sharding.Pointwise()
    if kind in ("matmul", "rmatmul"):
        return sharding.Matmul()
    fixed = {"mm": "ij,jk->ik", "bmm": "bij,bjk->bik", "mv": "ij,j->i", "dot": "i,i->", "outer": "i,j->ij"}
    if kind in fixed:
        return sharding.Matmul((fixed[kind],))
    if kind == "einsum":
        return sharding.Einsum(_equation(args))
    if kind == "linear":
        return sharding.Linear()
    if kind == "attention":
        return sharding.Attention()
    if kind == "reduce_or_pointwise":
        if args.get("other") is not None:
            return sharding.Pointwise()
        kind = "reduce"
    if kind == "reduce":
        return sharding.Reduce(_dims(values.get("dim")), bool(values.get("keepdim", False)), shape.partial)
    if kind == "along":
        dims = _dims(next(iter(values.values())))
        if dims is None:
            raise _NoRule("dim=None")
        return sharding.Along(dims)
    if kind == "along_last_two":
        return sharding.Along((-2, -1))
    if kind == "along_trailing":
        normalized = values["normalized_shape"]
        count = 1 if isinstance(normalized, int) else len(normalized)  # type: ignore[arg-type]
        return sharding.Along(tuple(range(-count, 0)))
    if kind == "transpose":
        first, second = values.values()
        return sharding.Transpose(int(first), int(second))  # type: ignore[call-overload]
    if kind == "matrix_transpose":
        return sharding.Transpose(0, 1, matrix=True)
    if kind == "last_two_transpose":
        return sharding.Transpose(-2, -1)
    if kind == "permute":
        return sharding.Permute(_dims(values["dims"]) or ())
    if kind == "movedim":
        return sharding.Movedim(_dims(values["source"]) or (), _dims(values["destination"]) or ())
    if kind == "unsqueeze":
        return sharding.Unsqueeze(int(values["dim"]))  # type: ignore[call-overload]
    if kind == "squeeze":
        return sharding.Squeeze(_dims(values["dim"]))
    if kind == "flatten":
        return sharding.Flatten(int(values.get("start_dim", 0)), int(values.get("end_dim", -1)))  # type: ignore[call-overload]
    if kind in ("cat", "stack"):
        dim = int(next(iter(values.values())))  # type: ignore[call-overload]
        return sharding.Concat(dim) if kind == "cat" else sharding.Stack(dim)
    raise _NoRule(kind)


def _equation(args: CallArgs) -> str:
    for entries in args.by_name.values():
        for expr, _ in entries:
            if isinstance(expr, StrExpr):
                return expr.value
            raise _NoRule("the equation is not a string literal")
    raise _NoRule("no equation")


def _view(args: CallArgs, name: str) -> sharding.View:
    """``x.view(x.shape[0], -1)``: the dims provably kept at the front and the back."""
    entries = args.get(name) or []
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        items: list[tuple[Expression, bool]] = [
            (item.expr if isinstance(item, StarExpr) else item, isinstance(item, StarExpr))
            for item in entries[0][0].items
        ]
    else:
        items = [(expr, kind == ARG_STAR) for expr, kind in entries]
    source = args.receiver if args.receiver is not None else _first_tensor(args)
    pieces = [_piece(expr, star, source) for expr, star in items]
    if len(items) == 1 and pieces[0][0] == "other" and _maybe_int(items[0][0]) is None:
        pieces = [("star", 0)]  # a lone non-literal may be a whole shape: its length is unknown
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
                end = _maybe_int(s.end_index)
                if end is not None and end >= 0:
                    return ("front", end)
            if s.end_index is None and s.begin_index is not None and s.stride is None:
                begin = _maybe_int(s.begin_index)
                if begin is not None and begin < 0:
                    return ("back", -begin)
        return ("star", 0)
    if isinstance(expr, IndexExpr) and _shape_of(expr.base, source):
        index = _maybe_int(expr.index)
        if index is not None:
            return ("dim", index)
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, MemberExpr)
        and expr.callee.name == "size"
        and _same(expr.callee.expr, source)
        and len(expr.args) == 1
    ):
        index = _maybe_int(expr.args[0])
        if index is not None:
            return ("dim", index)
    return ("other", 0)


def _maybe_int(expr: Expression) -> int | None:
    try:
        return _int(expr)
    except _NoRule:
        return None


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
