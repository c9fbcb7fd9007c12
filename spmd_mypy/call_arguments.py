"""Reading a hooked call's arguments: by parameter name, and the static values they spell.

A value is read only where it is written out (a literal, an SPMD type, a
``TYPE@axis`` entry); held in a variable it reads as None, and the caller
leaves the call's type as mypy inferred it.  A ``TYPE@axis`` argument that
is written out but malformed is an :class:`~spmd_mypy.annotations.AnnotationError`,
reported by :func:`bad_type_argument`.
"""

from __future__ import annotations

from mypy.nodes import (
    CallExpr,
    Expression,
    IntExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    RefExpr,
    StrExpr,
    TypeInfo,
    UnaryExpr,
)
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.annotations import AnnotationError, DimText, Missing, axes_of, axis_type_of, shard_group
from spmd_stubs.core import AxisType, Code

Argument = tuple[Expression, Type]
"""An argument as written, and its type."""


def arguments(ctx: FunctionContext) -> dict[str, Argument]:
    """The call's arguments by the name of the parameter each is passed to (the first, for a ``*args``)."""
    return {
        name: (exprs[0], types[0])
        for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)
        if name is not None and exprs
    }


_REDUCE_OPS = ("ReduceOp", "RedOpType")
"""torch.distributed's classes whose members name a reduction (``ReduceOp.SUM``, ``ReduceOp.RedOpType.SUM``)."""


def sums(op: Argument | None) -> bool:
    """Whether a torch.distributed collective's ``op=`` argument is the default sum, the only reduction whose
    transitions (and backward) the table has for these calls: left out, ``ReduceOp.SUM``, or a string the
    functional collectives lower-case to ``"sum"`` (``"sum"``, ``ReduceOp.SUM.name``, which is ``"SUM"``).
    Anything else, a variable holding a sum included, is not read as one."""
    if op is None:
        return True
    expr = op[0]
    if isinstance(expr, StrExpr):
        return expr.value.lower() == "sum"
    if isinstance(expr, MemberExpr) and expr.name == "name":  # the member's name: the functional collectives' string
        expr = expr.expr
    return (isinstance(expr, MemberExpr) and expr.name == "SUM" and isinstance(expr.expr, RefExpr)
            and isinstance(expr.expr.node, TypeInfo) and expr.expr.node.name in _REDUCE_OPS)


def int_value(expr: Expression) -> int | None:
    """An int literal, negative ones included; None for anything else."""
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


def flag(expr: Expression | None, default: bool) -> bool | None:
    """``True`` or ``False`` as written, ``default`` where the argument is left out; None for anything else."""
    if expr is None:
        return default
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    return None


def spmd_type_of(expr: Expression) -> AxisType | None:
    """``P`` / ``spmd.R`` / ``S(-1)`` as a value -> the type; None when not static."""
    if isinstance(expr, RefExpr) and isinstance(expr.node, TypeInfo):
        return axis_type_of(expr.node, expr.node.name, None)
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and isinstance(expr.callee.node, TypeInfo):
        dim: DimText = Missing() if not expr.args else "a non-int argument"
        if len(expr.args) == 1 and int_value(expr.args[0]) is not None:
            dim = int_value(expr.args[0])  # type: ignore[assignment]
        return axis_type_of(expr.callee.node, expr.callee.node.name, dim)
    return None


def annotation_entries(expr: Expression, taker: str) -> list[tuple[str, AxisType]]:
    """A ``TYPE@axis`` value (``V@dp``, ``S(0)@(dp, tp)``) -> ``(axis, type)`` per axis."""
    usage = f"{taker} takes TYPE@axis arguments such as V@dp, S(0)@tp or S(0)@(dp, tp)"
    if not (isinstance(expr, OpExpr) and expr.op == "@"):
        raise AnnotationError(usage)
    axes = axes_of(expr.right)
    axis_type = spmd_type_of(expr.left)
    if axes is None or axis_type is None:
        raise AnnotationError(usage)
    return shard_group(axis_type, list(axes), f"{axis_type}@({', '.join(axes)})")


def bad_type_argument(ctx: FunctionContext, error: AnnotationError) -> Type:
    """Report a malformed SPMD type argument; the call keeps the type mypy inferred."""
    report.fail(ctx.api, ctx.context, f"Bad SPMD type argument: {error}", errorcodes.BY_RULE[Code.ANNOTATION])
    return ctx.default_return_type
