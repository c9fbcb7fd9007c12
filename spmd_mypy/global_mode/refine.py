"""Refining an op's local result on the global axes (shard propagation), and ``spmd.*`` ops.

In a global region every modelled op's local result (:mod:`spmd_mypy.calls`)
is refined on the global axes with :func:`spmd_stubs.core.sharding.propagate`,
from the op's shape behaviour and the dims the call passes.
``spmd.einsum/matmul/linear/sum/amax/amin`` take ``out_partial_axes`` (in
local mode too: the local op, then reinterpret V -> P on each named axis).
"""

from __future__ import annotations

from typing import Callable, Sequence

from mypy.nodes import CallExpr, Context, Expression, MemberExpr, NameExpr
from mypy.plugin import CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.global_mode.arguments import CallArgs, behaviour_of, call_args
from spmd_mypy.global_mode.boundaries import check_returned
from spmd_mypy.global_mode.regions import current_axes, static_axes
from spmd_mypy.inference import Actual, Choice, Everywhere, OpCall, Refine, op_result
from spmd_mypy.representation import result_type
from spmd_stubs.core import (
    AxisType,
    Code,
    Kind,
    PartialOf,
    Replicate,
    Scalar,
    SpmdTypeError,
    TensorType,
    sharding,
    torch_ops,
)

SPMD_OPS = torch_ops.SPMD_OPS
"""The ``spmd.*`` ops (:data:`spmd_mypy.fullnames.SPMD_OPS_MODULE`) this module hooks."""


def _on_axis(choice: Choice, axis: str, axes: frozenset[str]) -> AxisType | Scalar | None:
    if isinstance(choice, TensorType):
        return sharding.effective(choice, axis, axes)
    if isinstance(choice, Everywhere):
        return Replicate
    return choice


def refiner(
    api: CheckerPluginInterface,
    context: Context,
    record: torch_ops.Op,
    op: str,
    args: CallArgs,
    partial_axes: tuple[str, ...] = (),
) -> Refine | None:
    """The global refinement of an op's local result, or None where nothing is global.

    ``partial_axes``: the call's ``out_partial_axes`` (spmd.* ops); on a local
    axis they reinterpret the local V result as P, on a global one they allow
    a sharded contraction.
    """
    axes = current_axes(api)
    if not axes and not partial_axes:
        return None
    behaviour = behaviour_of(record, args) if axes else sharding.Pointwise()
    partial = record.partial or "sum"
    swap = record.shape is not None and record.shape.swap

    def refine(combination: Sequence[Choice], local: TensorType | None) -> TensorType | None:
        if local is None:
            return None
        mapping = local.as_dict()
        operands = list(combination[1::-1]) + list(combination[2:]) if swap else list(combination)
        if record.bias is not None:
            for axis in partial_axes:
                _check_bias(_on_axis(combination[record.bias], axis, axes), axis)
        for axis in sorted(axes):
            if axis not in mapping:
                continue
            on_axis = [_on_axis(c, axis, axes) for c in operands]
            result = sharding.propagate(
                behaviour, on_axis, axis, op, mapping[axis], partial if axis in partial_axes else None
            )
            if result is None:
                mapping.pop(axis)
            else:
                mapping[axis] = result
        for axis in partial_axes:
            if axis not in axes:
                mapping[axis] = _reinterpret_partial(op, mapping.get(axis), axis, partial)
        refined = TensorType.of(sharding.normalise_orders(mapping))
        if axes:
            check_returned(api, context, [refined])
        return refined

    return refine


def _check_bias(bias: AxisType | Scalar | None, axis: str) -> None:
    """``spmd.linear(x, w, b, out_partial_axes=tp)`` (the one ``spmd.*`` op with a bias): a whole bias
    would join the pending sum once per rank."""
    if isinstance(bias, AxisType) and bias.kind in (Kind.R, Kind.I):
        raise SpmdTypeError(
            Code.PARTIAL_AFFINE,
            axis,
            f"spmd.linear(x, w, b, out_partial_axes={axis}) adds the bias {bias.on(axis)} on every rank to a "
            f"result pending a sum over {axis}, so the bias would be counted once per rank. Fix: add it after "
            f"the reduction: spmd.all_reduce(spmd.linear(x, w, out_partial_axes={axis}), {axis}, src=P, dst=R) + b.",
        )


def _reinterpret_partial(op: str, local: AxisType | None, axis: str, reduce: str) -> AxisType:
    """Local SPMD's ``out_partial_axes``: the local op's result reinterpreted V -> P[reduce]."""
    target = PartialOf(reduce)
    if local is None or local.kind is Kind.V:
        return target
    if local.kind is Kind.R:
        why = (
            "a replicated result would be counted once per rank by the pending reduction"
            if reduce == "sum"
            else "it is already the same on every rank"
        )
        fix = f"drop {axis} from out_partial_axes, or convert(y, {axis}, src=R, dst={target}) to keep its value"
    elif local.kind is Kind.I:
        why = "an invariant result would be counted once per rank by the pending reduction"
        fix = f"drop {axis} from out_partial_axes"
    else:
        why = f"the result already is {local.on(axis)}"
        fix = f"drop {axis} from out_partial_axes"
    raise SpmdTypeError(
        Code.INVALID_TRANSITION,
        axis,
        f"spmd.{op}(..., out_partial_axes={axis}) reinterprets the local result V -> {target} on axis {axis}, "
        f"but the local result is {local.on(axis)}: {why}. Fix: {fix}.",
    )


def op_refiner(ctx: FunctionContext | MethodContext, record: torch_ops.Op, op: str, method: bool) -> Refine | None:
    """For a torch op's hook: the refinement, None where the code is local on every axis."""
    if not current_axes(ctx.api):
        return None
    receiver = None
    if method and isinstance(ctx.context, CallExpr) and isinstance(ctx.context.callee, MemberExpr):
        receiver = ctx.context.callee.expr
    return refiner(ctx.api, ctx.context, record, op, call_args(ctx, receiver))


def attribute_refiner(api: CheckerPluginInterface, context: Context, record: torch_ops.Op, name: str) -> Refine | None:
    """For ``w.T`` / ``w.mT``."""
    if not current_axes(api):
        return None
    return refiner(api, context, record, name, CallArgs({}, None))


def spmd_op_hook(name: str, config: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.einsum/matmul/linear/sum/amax/amin(..., out_partial_axes=...)``: the torch op of that name's record."""
    record = torch_ops.OPS[name]

    def hook(ctx: FunctionContext) -> Type:
        groups = [
            (arg_name, [Actual(e, t) for e, t in zip(exprs, types)])
            for arg_name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)
        ]
        partial_axes: tuple[str, ...] = ()
        for arg_name, actuals in groups:
            if arg_name == "out_partial_axes" and actuals and actuals[0].expr is not None:
                named = static_axes(actuals[0].expr)
                if named is None and not _is_none(actuals[0].expr):
                    report.fail(
                        ctx.api,
                        ctx.context,
                        "out_partial_axes takes a mesh axis or a tuple of them, written statically (e.g. "
                        "out_partial_axes=tp or (dp, tp)); the checker cannot type this call.",
                        errorcodes.BY_RULE[Code.ANNOTATION],
                    )
                    return ctx.default_return_type
                partial_axes = named or ()
        operands = [actuals for arg_name, actuals in groups if arg_name != "out_partial_axes"]
        refinement = refiner(ctx.api, ctx.context, record, name, call_args(ctx, None), partial_axes)
        call = OpCall(name, operands, ctx.context, ctx.api, config, record, refinement)
        typed = op_result(call, ctx.default_return_type)
        if typed is not None:
            return typed
        if not partial_axes:
            return ctx.default_return_type
        return result_type(ctx.api, ctx.default_return_type, [_only_partial(partial_axes, record.partial or "sum")])

    return hook


def _only_partial(partial_axes: tuple[str, ...], reduce: str) -> TensorType:
    """Untyped operands: the result is known only on the out_partial axes."""
    return TensorType.of({axis: PartialOf(reduce) for axis in partial_axes})


def _is_none(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"
