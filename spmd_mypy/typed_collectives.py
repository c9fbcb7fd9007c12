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

from mypy.nodes import Expression, NameExpr
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import backward, redistribute, report
from spmd_mypy.annotations import AnnotationError, axes_of
from spmd_mypy.call_arguments import Argument, arguments, bad_type_argument, flag, spmd_type_of
from spmd_mypy.representation import result_type, spmd_members
from spmd_mypy.transitions import Request, apply, typed_result
from spmd_stubs import core
from spmd_stubs.core import AxisType, Partial, SpmdTypeError, Varying
from spmd_stubs.core.comms import ROW_COUNTS, check_row_exchange

IN_PLACE = {"all_reduce_": "all_reduce"}
"""In-place forms -> the operation they write over their input: typed the same, on a target
whose type the checker can still follow (:func:`_check_in_place_target`)."""

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
            _check_in_place_target(ctx, name, request, args["x"][0])
        if op == "all_to_all" and any(_given(args.get(count)) for count in ROW_COUNTS):
            return _row_exchange(ctx, request)
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


def _given(argument: Argument | None) -> bool:
    """An argument passed, and not as the literal ``None`` (its default)."""
    return argument is not None and not (isinstance(argument[0], NameExpr) and argument[0].fullname == "builtins.None")


def _row_exchange(ctx: FunctionContext, request: Request) -> Type:
    """``all_to_all`` with row counts: V to V, from an input that varies on each axis.

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
    if not errors:
        return typed_result(ctx, request)
    for error in errors:
        report.rule_error(ctx.api, ctx.context, error)
    exchanged = dataclasses.replace(request, src=Varying, dst=Varying)
    return result_type(ctx.api, ctx.default_return_type, apply(exchanged, lambda error: None))


def _default_source(op: str) -> AxisType | None:
    """``src`` left out: P where the signature defaults it (all_reduce, reduce_scatter)."""
    return Partial if op in core.IMPLICIT_PARTIAL else None


def _check_in_place_target(ctx: FunctionContext, name: str, request: Request, target: Expression) -> None:
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
