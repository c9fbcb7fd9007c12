"""Hooks for torch ops: Tensor methods and operators, torch.* and F.* functions, view properties.

Each hook describes mypy's call context as an :class:`~spmd_mypy.inference.OpCall`
and types it with :func:`~spmd_mypy.inference.op_result`.  In-place forms
(``x.add_(y)``, ``x += y``, ``torch.add(a, b, out=x)``) keep the written
tensor's type, and the out-of-place result must equal it (``spmd-inplace``).
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable

from mypy.messages import format_type_bare
from mypy.nodes import (
    CallExpr,
    ComparisonExpr,
    Context,
    Decorator,
    Expression,
    FloatExpr,
    IndexExpr,
    IntExpr,
    MemberExpr,
    OpExpr,
    TempNode,
    UnaryExpr,
)
from mypy.plugin import AttributeContext, CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import AnyType, TupleType, Type, get_proper_type

from spmd_mypy import backward, errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.fixes import Operand
from spmd_mypy.global_mode import refine
from spmd_mypy.gradients import carries_no_gradient
from spmd_mypy.inference import ABSENT, Actual, Everywhere, OpCall, choices, on_axis, op_result
from spmd_mypy.representation import (
    contains_tensor,
    has_spmd,
    members,
    result_type,
    spmd_members,
    tensor_instance,
    typed_tensors_in,
)
from spmd_stubs import core
from spmd_stubs.core import SpmdTypeError
from spmd_stubs.core.torch_ops import BINARY_OPERATORS, CONSTANT_FACTORIES, Op, lookup, out_of_place

_REFLECTED = {f"__r{word}__": word for word in BINARY_OPERATORS}


def is_reflected(name: str) -> bool:
    """Whether ``name`` is a reflected binary operator (``__rmul__``): the receiver is the right operand."""
    return name in _REFLECTED


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
    if name == "copy_":
        return copy_hook
    inplace = out_of_place(name)[1]
    record = lookup(name)
    forward = lookup(f"__{_REFLECTED[name]}__") if name in _REFLECTED else None

    def hook(ctx: MethodContext) -> Type:
        if record is None:
            return _unmodelled(ctx.api, ctx.context, name, [ctx.type], ctx.default_return_type, config)
        receiver = Actual(receiver_expression(ctx.context, name), ctx.type)
        operands = [[receiver], *_actuals(ctx.arg_types, _members_as_operands(ctx.context, name, ctx.args))]
        refiner = refine.op_refiner(ctx, record, display_name(name), method=True)
        judged_as = record
        if forward is not None and refiner is None and len(operands) == 2:
            # a.__rsub__(b) is b - a: judged as written, so messages list the operands in source order.
            judged_as, operands = forward, operands[::-1]
        call = OpCall(display_name(name), operands, ctx.context, ctx.api, config, judged_as, refiner)
        if inplace:
            typed = op_result(call, ctx.default_return_type, written=ctx.type,
                              gradient=lambda: backward.gradient_buffer(receiver.expr, ctx.api))
        else:
            typed = op_result(call, declared_result(ctx.default_return_type, [ctx.type]))
        return ctx.default_return_type if typed is None else typed

    return hook


def receiver_expression(context: Context, name: str) -> Expression | None:
    """The expression a method is called on: ``a`` in ``a.mul_(b)``, ``a + b``, ``b + a`` (``__radd__``)."""
    if isinstance(context, CallExpr) and isinstance(context.callee, MemberExpr):
        return context.callee.expr
    if isinstance(context, OpExpr):
        return context.right if name in _REFLECTED else context.left
    if isinstance(context, ComparisonExpr):
        return context.operands[0]
    if isinstance(context, UnaryExpr):
        return context.expr
    if isinstance(context, IndexExpr):
        return context.base
    return None


def _members_as_operands(context: Context, name: str, args: list[list[Expression]]) -> list[list[Expression]]:
    """The arguments, with the operand expression in place of mypy's stand-in for one of its members.

    mypy checks ``x * y`` over a union operand one member at a time and passes
    the member as a ``TempNode``; the member is still that operand's value, so
    in ``y * y`` both sides take the same member (R*R and I*I, not R*I).
    """
    if isinstance(context, OpExpr) and [len(group) for group in args] == [1] and isinstance(args[0][0], TempNode):
        return [[context.left if is_reflected(name) else context.right]]
    return args


def function_hook(name: str, config: Config) -> Callable[[FunctionContext], Type]:
    """Hook for ``torch.<name>`` / ``F.<name>``: operands are the parameters in order."""
    record = lookup(name)

    def hook(ctx: FunctionContext) -> Type:
        if record is None:
            flat = [t for types in ctx.arg_types for t in types]
            return _unmodelled(ctx.api, ctx.context, name, flat, ctx.default_return_type, config)
        actuals = _actuals(ctx.arg_types, ctx.args)
        refiner = refine.op_refiner(ctx, record, display_name(name), method=False)
        call = OpCall(display_name(name), actuals, ctx.context, ctx.api, config, record, refiner)
        out = _out_argument(ctx)
        if out is not None:
            written, target = out
            typed = op_result(call, ctx.default_return_type, written=written,
                              gradient=lambda: backward.gradient_buffer(target, ctx.api))
        else:
            flat = (t for types in ctx.arg_types for t in types)
            typed = op_result(call, declared_result(ctx.default_return_type, flat))
        return ctx.default_return_type if typed is None else typed

    return hook


def declared_result(default: Type, operands: Iterable[Type]) -> Type:
    """What the op is declared to return; a tensor where torch leaves it ``Any``.

    torch leaves a few modelled ops unannotated (``Tensor.norm``, ``torch.norm``),
    so mypy types their result ``Any`` and the SPMD type would be lost: their
    result is a tensor like their first tensor operand.
    """
    if not isinstance(get_proper_type(default), AnyType):
        return default
    tensors = (tensor_instance(member) for operand in operands for member in members(operand))
    return next((tensor for tensor in tensors if tensor is not None), default)


def attribute_hook(record: Op, name: str, config: Config) -> Callable[[AttributeContext], Type]:
    """Hook for view properties such as ``w.T``: an op on the receiver."""

    def hook(ctx: AttributeContext) -> Type:
        refiner = refine.attribute_refiner(ctx.api, ctx.context, record, name)
        call = OpCall(name, [[Actual(None, ctx.type)]], ctx.context, ctx.api, config, record, refiner)
        typed = op_result(call, ctx.default_attr_type)
        return ctx.default_attr_type if typed is None else typed

    return hook


def named_field(ctx: AttributeContext) -> Type:
    """``x.max(dim).values``: the tuple item the field names, typed like ``x.max(dim)[0]``.

    torch declares the fields as properties returning a plain ``Tensor``;
    the op's hook has typed the tuple's items.
    """
    result = get_proper_type(ctx.type)
    if not isinstance(result, TupleType) or not isinstance(ctx.context, MemberExpr):
        return ctx.default_attr_type
    info = result.partial_fallback.type
    fields = [name for name, symbol in info.names.items()
              if isinstance(symbol.node, Decorator) and symbol.node.func.is_property]
    if ctx.context.name not in fields or fields.index(ctx.context.name) >= len(result.items):
        return ctx.default_attr_type
    return result.items[fields.index(ctx.context.name)]


def _out_argument(ctx: FunctionContext) -> tuple[Type, Expression] | None:
    """The type and expression of a typed ``out=`` tensor, if the call writes into one."""
    for name, types, exprs in zip(ctx.callee_arg_names, ctx.arg_types, ctx.args):
        if name == "out" and types and exprs and has_spmd(types[0]):
            return types[0], exprs[0]
    return None


def setitem_hook(ctx: MethodContext) -> Type:
    """``x[i] = y``: an in-place write, so x keeps its type, which the write must not change.

    Every alternative of x, i and y is judged on each of x's axes by
    :func:`spmd_stubs.core.check_write`; an unknown y (or one that does
    not mention the axis) is accepted.
    """
    actuals = [group[0] if group else None for group in _actuals(ctx.arg_types, ctx.args)]
    index, value = (actuals + [None, None])[:2]
    if value is not None and value.expr is not None and _is_zero(value.expr):
        # Zeros keep every type: the same on every rank, and a part of any
        # pending sum, avg, max or min of zeros (Megatron zeroes masked rows).
        value = None
    _check_writes(ctx, index, value, "x[i] = y")
    return ctx.default_return_type


def copy_hook(ctx: MethodContext) -> Type:
    """``x.copy_(y)``: a write of all of x, checked as ``x[...] = y``; the result is x."""
    actuals = _actuals(ctx.arg_types, ctx.args)
    _check_writes(ctx, None, actuals[0][0] if actuals and actuals[0] else None, "x.copy_(y)")
    return result_type(ctx.api, ctx.default_return_type, spmd_members(ctx.type) or [None])


def _check_writes(ctx: MethodContext, index: Actual | None, value: Actual | None, form: str) -> None:
    """Each alternative of the written tensor x, the index and the value, on each of x's axes
    (a value without a gradient: :func:`spmd_stubs.core.check_write_without_gradient`; into a
    gradient buffer, also the gradient with its reductions done: :func:`spmd_stubs.core.check_gradient_write`)."""
    targets = [t for t in spmd_members(ctx.type) if t is not None]
    indices = choices(index) if index is not None else [ABSENT]
    values = choices(value) if value is not None else [ABSENT]
    free: bool | None = None  # looked for once, and only for a write that does not fit as it is
    gradient: bool | None = None  # likewise
    for target, i, y in itertools.product(targets, indices, values):
        for axis, axis_type in target.axes:
            try:
                core.check_write(axis_type, on_axis(y, axis), axis, on_axis(i, axis), form)
            except SpmdTypeError as error:
                if free is None:
                    free = value is not None and (isinstance(y, Everywhere)
                                                  or carries_no_gradient(value.expr, ctx.context, ctx.api))
                try:
                    core.check_write_without_gradient(axis_type, on_axis(y, axis), free, axis, on_axis(i, axis), form)
                except SpmdTypeError:
                    if gradient is None:
                        gradient = backward.gradient_buffer(receiver_expression(ctx.context, "copy_"), ctx.api)
                    if gradient and _fits_gradient(axis_type, on_axis(y, axis), axis, on_axis(i, axis), form):
                        continue
                    written = [Operand(value.expr if value else None, on_axis(y, axis)),
                               Operand(index.expr if index else None, on_axis(i, axis))]
                    report.rule_error(ctx.api, ctx.context, error, written)


def _fits_gradient(gradient: core.AxisType, y: core.Operand, axis: str, index: core.Operand, form: str) -> bool:
    """A gradient buffer takes ``y`` (:func:`spmd_stubs.core.check_gradient_write`)."""
    try:
        core.check_gradient_write(gradient, y, axis, index, form)
    except SpmdTypeError:
        return False
    return True


def _is_zero(expr: Expression) -> bool:
    return isinstance(expr, (IntExpr, FloatExpr)) and expr.value == 0


def _expected_spmd(api: CheckerPluginInterface) -> bool:
    """Whether the expression being typed is expected to have an SPMD type (a declared target or parameter)."""
    expected = api.expr_checker.type_context[-1]  # type: ignore[attr-defined]
    return expected is not None and bool(typed_tensors_in(expected))


def _unmodelled(
    api: CheckerPluginInterface, context: Context, name: str, operands: list[Type], default: Type, config: Config
) -> Type:
    """An op the table does not model: unknown result, reported in strict mode when it makes tensors."""
    if not config.strict or not contains_tensor(default) or not any(has_spmd(t) for t in operands):
        return default
    if name in CONSTANT_FACTORIES:
        if _expected_spmd(api):
            return default  # ``buf: Tensor[S(0)@tp] = torch.empty_like(x)``: the declaration states it
        typed = next(t for t in operands if has_spmd(t))
        shown = format_type_bare(typed, api.options)
        message = (
            f"{name} takes only the shape of its {shown} operand, not its values, so its result's SPMD type is "
            "what is written into it later, which the checker cannot tell here. Fix: declare the variable that "
            f"holds it with that type (`buf: {shown} = torch.{name}(x)` where it will hold values laid out like "
            "the operand's; the layout of what a collective or an in-place write puts in it otherwise)."
        )
    else:
        message = (
            f"{name} is not modelled by the SPMD checker, so its result's SPMD type is unknown. "
            "Fix: x = assert_type(x, <type>@<axis>) on the result, or add the op's record to "
            "spmd_stubs/core/torch_ops/table.py."
        )
    report.fail(api, context, message, errorcodes.UNMODELLED)
    return default
