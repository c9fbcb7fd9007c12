"""``spmd_stubs.ring_shift(x, axis, offset=k)``: a ring step, typed (docs/spec.md#ring-steps).

The result is x's type with the axis's type :func:`spmd_stubs.core.point_to_point.ring_shifted`; the
other axes pass through.  ``async_op=True``'s ``Pending`` holds the same type.  An axis that is not
written out keeps mypy's type.
"""

from __future__ import annotations

from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy.annotations import axes_of
from spmd_mypy.call_arguments import arguments
from spmd_mypy.representation import result_type, spmd_members
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
