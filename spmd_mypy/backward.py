"""The loss rule and gradient types.

* ``loss.backward()``, ``torch.autograd.backward(loss)`` and
  ``torch.autograd.grad(loss, inputs)`` with no explicit gradient seed 1.0 on
  every rank: the loss must be I or P on every typed axis
  (:func:`spmd_stubs.core.check_loss`, ``spmd-backward``).
* ``p.grad`` has the dual of ``p``'s type on every axis (R<->P, I, V).
"""

from __future__ import annotations

import itertools
from typing import Callable

from mypy.nodes import CallExpr, MemberExpr
from mypy.plugin import AttributeContext, FunctionContext, MethodContext
from mypy.types import NoneType, Type, get_proper_type

from spmd_mypy import report
from spmd_mypy.fixes import Operand
from spmd_mypy.inference import Actual, tensors_in
from spmd_mypy.representation import members, result_type, spmd_members
from spmd_stubs import core
from spmd_stubs.core import SpmdTypeError, TensorType


def _explicit(types: list[Type]) -> bool:
    """An explicit gradient was passed (not absent, not None)."""
    return any(not isinstance(get_proper_type(m), NoneType) for t in types for m in members(t))


def _check(losses: list[Actual], call: str, ctx: MethodContext | FunctionContext) -> None:
    for loss in losses:
        for member in spmd_members(loss.type):
            for axis, axis_type in member.axes if member is not None else ():
                try:
                    core.check_loss(axis_type, axis, call)
                except SpmdTypeError as error:
                    report.rule_error(ctx.api, ctx.context, error, [Operand(loss.expr, axis_type)])


def backward_method(ctx: MethodContext) -> Type:
    """``loss.backward(gradient=None)``."""
    gradient = [t for name, types in zip(ctx.callee_arg_names, ctx.arg_types) if name == "gradient" for t in types]
    if not _explicit(gradient):
        receiver = ctx.context.callee.expr if isinstance(ctx.context, CallExpr) and isinstance(
            ctx.context.callee, MemberExpr) else None
        _check([Actual(receiver, ctx.type)], "backward()", ctx)
    return ctx.default_return_type


def autograd_hook(outputs: str, gradients: str, call: str) -> Callable[[FunctionContext], Type]:
    """``torch.autograd.backward(tensors, grad_tensors)`` / ``grad(outputs, inputs, grad_outputs)``."""

    def hook(ctx: FunctionContext) -> Type:
        by_name = {name: (exprs, types) for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)}
        exprs, types = by_name.get(outputs, ([], []))
        if not _explicit(by_name.get(gradients, ([], []))[1]):
            _check(list(tensors_in([Actual(e, t) for e, t in zip(exprs, types)], ctx.api)), call, ctx)
        return ctx.default_return_type

    return hook


def grad_attribute(ctx: AttributeContext) -> Type:
    """``p.grad``: the dual type of ``p`` (or None, as declared).

    Written (``p.grad = ...``), it also takes the gradient after its reduction,
    the data-parallel sync every trainer writes:
    ``p.grad = all_reduce(p.grad, dp, src=P, dst=R)`` (or ``dst=I``).  A read
    is still the dual (the type cannot follow the write), so the update takes
    the synced value from the local it was computed in (docs/porting.md).
    """
    duals = [_dual(member) for member in spmd_members(ctx.type)]
    if not any(d is not None for d in duals):
        return ctx.default_attr_type
    if ctx.is_lvalue:
        return result_type(ctx.api, ctx.default_attr_type, [r for d in duals for r in (_reduced(d) if d is not None else [d])])
    return result_type(ctx.api, ctx.default_attr_type, duals)


def _reduced(tensor_type: TensorType) -> list[TensorType]:
    """The gradient after any of its pending reductions were done (each Partial axis P, R or I)."""
    options = [[(axis, t)] if t.kind is not core.Kind.P else [(axis, t), (axis, core.Replicate), (axis, core.Invariant)]
               for axis, t in tensor_type.axes]
    return [TensorType(tuple(axes)) for axes in itertools.product(*options)]


def _dual(tensor_type: TensorType | None) -> TensorType | None:
    if tensor_type is None:
        return None
    return TensorType(tuple((axis, core.dual(t)) for axis, t in tensor_type.axes))
