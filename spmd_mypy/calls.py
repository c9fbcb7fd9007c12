"""Hooks for torch ops: Tensor methods and operators, torch.* and F.* functions, view properties.

Each hook builds an :class:`~spmd_mypy.inference.OpCall` from mypy's call
context and asks :mod:`spmd_mypy.inference` for the result.  In-place forms
(``x.add_(y)``, ``x += y``, ``torch.add(a, b, out=x)``) keep the written
tensor's type, and the out-of-place result must equal it (``spmd-inplace``).
"""

from __future__ import annotations

import itertools
from typing import Callable

from mypy.nodes import Context, Expression, FloatExpr, IntExpr
from mypy.plugin import AttributeContext, CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.global_mode import refine
from spmd_mypy.inference import ABSENT, Actual, OpCall, _on_axis, choices, infer
from spmd_mypy.representation import contains_tensor, has_spmd, result_type, spmd_members
from spmd_stubs import core
from spmd_stubs.core import SpmdTypeError, TensorType
from spmd_stubs.core.torch_ops import Op, lookup, out_of_place

_REFLECTED = {f"__r{n}__": n for n in "add sub mul matmul truediv floordiv mod pow and or xor".split()}


def display_name(name: str) -> str:
    """How an op is named in messages: ``__rmul__`` -> ``mul``, ``add_`` -> ``add_``."""
    if name in _REFLECTED:
        return _REFLECTED[name]
    return name.strip("_") if name.startswith("__") else name


def _actuals(arg_types: list[list[Type]], args: list[list[Expression]]) -> list[list[Actual]]:
    return [[Actual(expr, typ) for expr, typ in zip(exprs, types)] for exprs, types in zip(args, arg_types)]


def method_hook(name: str, config: Config) -> Callable[[MethodContext], Type]:
    """Hook for ``Tensor.<name>``: operand 0 is the receiver."""
    if name == "__setitem__":
        return setitem_hook
    inplace = out_of_place(name)[1]
    record = lookup(name)

    def hook(ctx: MethodContext) -> Type:
        if record is None:
            return _unmodelled(ctx.api, ctx.context, name, [ctx.type], ctx.default_return_type, config)
        receiver = Actual(None, ctx.type)
        operands = [[receiver], *_actuals(ctx.arg_types, ctx.args)]
        call = OpCall(display_name(name), operands, ctx.context, ctx.api, config, record.effect)
        call.refine = refine.op_refiner(ctx, record, call.name, method=True)
        results = infer(record.rule, call)
        if results is None:
            return ctx.default_return_type
        if inplace:
            return _written(call, results, ctx.type, ctx.default_return_type)
        return result_type(ctx.default_return_type, results)

    return hook


def function_hook(name: str, config: Config) -> Callable[[FunctionContext], Type]:
    """Hook for ``torch.<name>`` / ``F.<name>``: operands are the parameters in order."""
    record = lookup(name)

    def hook(ctx: FunctionContext) -> Type:
        if record is None:
            flat = [t for types in ctx.arg_types for t in types]
            return _unmodelled(ctx.api, ctx.context, name, flat, ctx.default_return_type, config)
        actuals = _actuals(ctx.arg_types, ctx.args)
        call = OpCall(display_name(name), actuals, ctx.context, ctx.api, config, record.effect)
        call.refine = refine.op_refiner(ctx, record, call.name, method=False)
        results = infer(record.rule, call)
        if results is None:
            return ctx.default_return_type
        out = _out_argument(ctx)
        if out is not None:
            return _written(call, results, out, ctx.default_return_type)
        return result_type(ctx.default_return_type, results)

    return hook


def attribute_hook(record: Op, name: str, config: Config) -> Callable[[AttributeContext], Type]:
    """Hook for view properties such as ``w.T``: an op on the receiver."""

    def hook(ctx: AttributeContext) -> Type:
        call = OpCall(name, [[Actual(None, ctx.type)]], ctx.context, ctx.api, config, record.effect)
        call.refine = refine.attribute_refiner(ctx.api, ctx.context, record, name)
        results = infer(record.rule, call)
        return ctx.default_attr_type if results is None else result_type(ctx.default_attr_type, results)

    return hook


def _out_argument(ctx: FunctionContext) -> Type | None:
    """The type of a typed ``out=`` tensor, if the call writes into one."""
    for name, types in zip(ctx.callee_arg_names, ctx.arg_types):
        if name == "out" and types and has_spmd(types[0]):
            return types[0]
    return None


def _written(call: OpCall, results: list[TensorType | None], target: Type, default: Type) -> Type:
    """An in-place result: the target keeps its type, which the op's result must have."""
    for written in spmd_members(target):
        for result in results:
            if written is None or result is None:
                continue
            for axis, axis_type in written.axes:
                try:
                    core.check_inplace(call.name, axis_type, result.get(axis), axis)
                except SpmdTypeError as error:
                    report.rule_error(call.api, call.context, error)
    return result_type(default, list(spmd_members(target)))


def setitem_hook(ctx: MethodContext) -> Type:
    """``x[i] = y``: an in-place write, so x keeps its type, which the write must not change.

    Every alternative of x, i and y is judged on each of x's axes by
    :func:`spmd_stubs.core.check_write`; an unknown y (or one that does
    not mention the axis) is accepted.
    """
    targets = [t for t in spmd_members(ctx.type) if t is not None]
    if not targets:
        return ctx.default_return_type
    operands = [choices(group[0]) if group else [ABSENT] for group in _actuals(ctx.arg_types, ctx.args)]
    index, value = (operands + [[ABSENT], [ABSENT]])[:2]
    if len(ctx.args) > 1 and ctx.args[1] and _is_zero(ctx.args[1][0]):
        # Zeros keep every type: the same on every rank, and a part of any
        # pending sum, avg, max or min of zeros (Megatron zeroes masked rows).
        value = [ABSENT]
    for target, i, y in itertools.product(targets, index, value):
        for axis, axis_type in target.axes:
            try:
                core.check_write(axis_type, _on_axis(y, axis), axis, _on_axis(i, axis))
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, error)
    return ctx.default_return_type


def _is_zero(expr: Expression) -> bool:
    return isinstance(expr, (IntExpr, FloatExpr)) and expr.value == 0


def _unmodelled(
    api: CheckerPluginInterface, context: Context, name: str, operands: list[Type], default: Type, config: Config
) -> Type:
    """An op the table does not model: unknown result, reported in strict mode when it makes tensors."""
    if config.strict and contains_tensor(default) and any(has_spmd(t) for t in operands):
        report.fail(
            api,
            context,
            f"{name} is not modelled by the SPMD checker, so its result's SPMD type is unknown. "
            "Fix: x = assert_type(x, <type>@<axis>) on the result, or add the op's record to spmd_stubs/core/torch_ops/table.py.",
            errorcodes.UNMODELLED,
        )
    return default
