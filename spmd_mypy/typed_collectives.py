"""The typed collectives and casts: ``spmd_stubs.<op>(x, axis, src=, dst=, expert_mode=)``.

Each call is the transition its arguments name (:mod:`spmd_mypy.transitions`);
one whose axis, ``src``, ``dst`` or ``expert_mode`` is not written out
keeps the type mypy inferred.  ``redistribute`` between partition specs,
rather than on one axis, is :mod:`spmd_mypy.redistribute`.  ``all_to_all``
given row counts (``input_split_sizes=``/``output_split_sizes=``) is a token
dispatch, V to V from an input that varies on the axis
(:func:`spmd_stubs.core.comms.check_row_exchange`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import LDEF, AssignmentStmt, CallExpr, Expression, ListExpr, MemberExpr, NameExpr, TupleExpr
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import backward, redistribute, report
from spmd_mypy.annotations import AnnotationError, axes_of
from spmd_mypy.call_arguments import Argument, arguments, bad_type_argument, flag, spmd_type_of
from spmd_mypy.representation import result_type, spmd_members
from spmd_mypy.statements import names_bound_in, statements_in
from spmd_mypy.transitions import Request, apply, typed_result
from spmd_stubs import core
from spmd_stubs.core import AxisType, Partial, SpmdTypeError, TensorType, Varying
from spmd_stubs.core.comms import ROW_COUNTS, check_row_exchange, row_exchange_elsewhere

IN_PLACE = {"all_reduce_": "all_reduce"}
"""In-place forms -> the operation they write over their input: typed the same, on a target
whose type the checker can still follow (:func:`check_in_place_target`)."""

TYPED_OPS = frozenset({*core.COLLECTIVES, *core.CASTS, "redistribute", *IN_PLACE})
"""The members of ``spmd_stubs.collectives`` this module types."""


def collective_hook(name: str) -> Callable[[FunctionContext], Type]:
    """``spmd_stubs.<name>(x, axis, src=, dst=, expert_mode=)``."""
    op = IN_PLACE.get(name, name)

    def hook(ctx: FunctionContext) -> Type:
        if op == "redistribute" and "axis" not in ctx.callee_arg_names:
            return redistribute.between_specs(ctx)
        args = arguments(ctx)
        try:
            request = _request(op, args)
        except AnnotationError as error:
            return bad_type_argument(ctx, error)
        if request is None:
            return ctx.default_return_type
        if name in IN_PLACE:
            check_in_place_target(ctx, name, request, args["x"][0])
        if op == "all_to_all" and any(passed(args.get(count)) for count in ROW_COUNTS):
            sent = args.get("input_split_sizes")
            return _row_exchange(ctx, request, sent[0] if passed(sent) and sent is not None else None)
        return typed_result(ctx, request)

    return hook


def _request(op: str, args: dict[str, Argument]) -> Request | None:
    if "x" not in args or "axis" not in args or "dst" not in args:
        return None
    axes = axes_of(args["axis"][0])
    dst = spmd_type_of(args["dst"][0])
    src = spmd_type_of(args["src"][0]) if "src" in args else _default_source(op)
    expert = flag(args.get("expert_mode", (None, None))[0], False)
    if axes is None or src is None or dst is None or expert is None:
        return None
    return Request(op, args["x"][1], axes, src, dst, expert)


def passed(argument: Argument | None) -> bool:
    """An argument passed, and not as the literal ``None`` (its default)."""
    return argument is not None and not (isinstance(argument[0], NameExpr) and argument[0].fullname == "builtins.None")


def _row_exchange(ctx: FunctionContext, request: Request, counts: Expression | None) -> Type:
    """``all_to_all`` with row counts: V to V, from an input that varies on each axis, and on the other axes
    as :func:`rows_elsewhere` says.

    A violation is reported once per axis (the input's first type there that
    does not vary, for a union), and the result is V there all the same: the
    exchange's, not the rejected ``dst``'s.
    """
    errors: list[SpmdTypeError] = []
    for axis in request.axes:
        actuals = [member.get(axis) if member is not None else None for member in spmd_members(request.tensor)]
        for actual in dict.fromkeys(actuals or [None]):
            try:
                check_row_exchange(request.src, request.dst, axis, actual)
            except SpmdTypeError as error:
                errors.append(error)
                break
    if errors:
        for found in errors:
            report.rule_error(ctx.api, ctx.context, found)
        exchanged = dataclasses.replace(request, src=Varying, dst=Varying)
        moved = result_type(ctx.api, ctx.default_return_type, apply(exchanged, lambda _: None))
    else:
        moved = typed_result(ctx, request)
    rows = rows_elsewhere(ctx, request.axes, spmd_members(moved), counts)
    return result_type(ctx.api, ctx.default_return_type, rows) if rows is not None else moved


def rows_elsewhere(ctx: FunctionContext, axes: tuple[str, ...], results: list[TensorType | None],
                   counts: Expression | None) -> list[TensorType | None] | None:
    """Rows exchanged by counts on ``axes``, on every other axis: their type where the counts are the same
    on each rank there, else V, or reported (:func:`spmd_stubs.core.comms.row_exchange_elsewhere`).

    The counts' type is read from ``input_split_sizes`` written as ``counts.tolist()``, or a local name given
    that once (:func:`_counts_type`).  None where a result is unknown.
    """
    if not results or None in results:
        return None
    counted = _counts_type(ctx, counts) if counts is not None else None
    problems: dict[str, SpmdTypeError] = {}
    rows: list[TensorType | None] = []
    for result in results:
        assert result is not None
        mapping = result.as_dict()
        for other, actual in list(mapping.items()):
            if other in axes:
                continue
            try:
                mapping[other] = row_exchange_elsewhere(actual, other, axes[0],
                                                        counted.get(other) if counted is not None else None)
            except SpmdTypeError as problem:
                problems.setdefault(str(problem), problem)
                mapping[other] = Varying
        rows.append(TensorType.of(mapping))
    for reported in problems.values():
        report.rule_error(ctx.api, ctx.context, reported)
    return rows


def _counts_type(ctx: FunctionContext, counts: Expression) -> TensorType | None:
    """The SPMD type of the tensor ``counts`` lists: ``c.tolist()`` as written, or a local name bound once to
    one (``sent = c.tolist()``, ``sent, received = c.tolist(), d.tolist()``); None where it is not read."""
    if isinstance(counts, NameExpr) and counts.kind == LDEF:
        counts = _bound_once(ctx, counts.name) or counts
    if not (isinstance(counts, CallExpr) and isinstance(counts.callee, MemberExpr) and counts.callee.name == "tolist"):
        return None
    listed = ctx.api.lookup_type_or_none(counts.callee.expr)  # type: ignore[attr-defined]
    found = spmd_members(listed) if listed is not None else []
    return found[0] if len(found) == 1 else None


def _bound_once(ctx: FunctionContext, name: str) -> Expression | None:
    """The value the enclosing function's one binding of ``name`` gives it (an item of a tuple display for a
    tuple target); None where it binds it otherwise or more than once."""
    function = ctx.api.scope.current_function() if isinstance(ctx.api, TypeChecker) else None
    if function is None or any(argument.variable.name == name for argument in function.arguments):
        return None
    values: list[Expression | None] = []
    for statement in statements_in(function.body):
        if isinstance(statement, AssignmentStmt):
            for target in statement.lvalues:
                values += _values_bound(target, statement.rvalue, name)
        elif name in names_bound_in([statement]):
            values.append(None)
    return values[0] if len(values) == 1 else None


def _values_bound(target: Expression, value: Expression | None, name: str) -> list[Expression | None]:
    if isinstance(target, NameExpr):
        return [value] if target.name == name else []
    if isinstance(target, (TupleExpr, ListExpr)):
        items = value.items if isinstance(value, (TupleExpr, ListExpr)) and len(value.items) == len(target.items) \
            else [None] * len(target.items)
        return [bound for item, given in zip(target.items, items) for bound in _values_bound(item, given, name)]
    return []


def _default_source(op: str) -> AxisType | None:
    """``src`` left out: P where the signature defaults it (all_reduce, reduce_scatter)."""
    return Partial if op in core.IMPLICIT_PARTIAL else None


def check_in_place_target(ctx: FunctionContext, name: str, request: Request, target: Expression) -> None:
    """``all_reduce_(x, ...)``: x keeps its type, as any tensor written in place (``spmd-inplace``).

    Except a gradient buffer, a tensor's ``.grad`` or a local bound to one
    (:func:`spmd_mypy.backward.gradient_buffer`): read, it is the pending
    gradient whether or not a sync wrote it (:func:`spmd_mypy.backward.grad_attribute`),
    as after ``p.grad = all_reduce(p.grad, ...)``; the call's result has the
    synced type.  (Another object's ``grad`` attribute keeps its declared
    type.)  An untyped ``x`` has no type to keep.
    """
    if backward.gradient_buffer(target, ctx.api):
        return
    for member in spmd_members(request.tensor):
        for axis in request.axes:
            written = member.get(axis) if member is not None else None
            if written is None:
                continue
            try:
                core.check_inplace(name, written, request.dst, axis)
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, error)
