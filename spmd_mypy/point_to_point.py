"""Point-to-point, typed: a ring step and a pipeline boundary's gradient.

* ``spmd_stubs.ring_shift(x, axis, offset=k)`` (docs/spec.md#ring-steps): x's type with the axis's
  type :func:`spmd_stubs.core.point_to_point.ring_shifted`; the other axes pass through.
  ``async_op=True``'s ``Pending`` holds the same type.  An axis that is not written out keeps mypy's type.
* ``boundary.gradient()`` of a ``spmd_stubs.pipeline.Boundary[T]`` (docs/spec.md#pipeline-stages):
  ``Boundary`` of ``T``'s dual on every axis.
"""

from __future__ import annotations

from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, Type, get_proper_type

from spmd_mypy.annotations import axes_of
from spmd_mypy.call_arguments import arguments
from spmd_mypy.representation import result_type, retype, spmd_members, spmd_of
from spmd_stubs import core
from spmd_stubs.core import TensorType
from spmd_stubs.core.point_to_point import ring_shifted


def ring_shift_hook(ctx: FunctionContext) -> Type:
    args = arguments(ctx)
    axes = axes_of(args["axis"][0]) if "x" in args and "axis" in args else None
    if axes is None:
        return ctx.default_return_type
    results: list[TensorType | None] = []
    for member in spmd_members(args["x"][1]):
        if member is None:
            results.append(None)
            continue
        mapping = member.as_dict()
        for axis in axes:
            if axis in mapping:
                mapping[axis] = ring_shifted(mapping[axis])
        results.append(TensorType.of(mapping))
    return result_type(ctx.api, ctx.default_return_type, results) if results else ctx.default_return_type


def boundary_gradient_hook(ctx: MethodContext) -> Type:
    """``boundary.gradient()`` of a ``Boundary[T]``: ``Boundary`` of ``T``'s dual on every axis."""
    receiver = get_proper_type(ctx.type)
    result = get_proper_type(ctx.default_return_type)
    if not (isinstance(receiver, Instance) and receiver.args and isinstance(result, Instance)):
        return ctx.default_return_type
    declared = spmd_of(receiver.args[0])
    if declared is None:
        return ctx.default_return_type
    dual = TensorType.of({axis: core.dual(t) for axis, t in declared.axes})
    return result.copy_modified(args=[retype(ctx.api, receiver.args[0], dual)])
