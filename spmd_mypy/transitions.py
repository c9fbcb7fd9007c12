"""A collective call as one transition of the typed table, applied to its input's type.

The result is the input's type with ``dst`` on each named axis (several
axes: one collective on the flattened group) and every other axis passed
through, for each member of the input's union.  Validity is the algebra's:
:func:`~spmd_stubs.core.transition` for the src/dst pair (and
``expert_mode``), :func:`~spmd_stubs.core.check_source` for the input's
actual type against ``src``; on an axis that is global where the call is,
only the shard forms (:func:`~spmd_stubs.core.sharding.global_collective`).
Every collective the checker types goes through :func:`apply`: the typed
API, the Megatron helpers, torch's differentiable collectives, and raw
collectives in an autograd Function's body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import report
from spmd_mypy.global_mode import boundaries, regions
from spmd_mypy.representation import result_type, updated_members
from spmd_stubs import core
from spmd_stubs.core import AxisType, SpmdTypeError, TensorType, sharding


@dataclass(frozen=True)
class Request:
    """One typed operation as a call spells it."""

    op: str
    tensor: Type
    axes: tuple[str, ...]
    src: AxisType
    dst: AxisType
    expert_mode: bool


def apply(
    request: Request, report_error: Callable[[SpmdTypeError], None], global_axes: frozenset[str] = frozenset()
) -> list[TensorType | None]:
    """The result types of ``request`` over its input's union members (shard forms only on ``global_axes``)."""

    def update(mapping: dict[str, AxisType]) -> None:
        for axis in request.axes:
            try:
                core.transition(request.op, request.src, request.dst, axis, request.expert_mode)
                if axis in mapping:
                    core.check_source(request.op, request.src, mapping[axis], axis, request.dst, request.expert_mode)
                if axis in global_axes:
                    sharding.global_collective(request.op, request.src, request.dst, mapping, axis, global_axes)
                    continue
            except SpmdTypeError as error:
                report_error(error)
            mapping[axis] = request.dst

    return updated_members(request.tensor, update)


def typed_result(ctx: FunctionContext, request: Request) -> Type:
    """The call's result type: ``request`` applied where the call is, each violation reported, and the
    result checked against the declared spec where it is a global def's returned value."""
    results = apply(request, lambda error: report.rule_error(ctx.api, ctx.context, error), regions.current_axes(ctx.api))
    boundaries.check_returned(ctx.api, ctx.context, results)
    return result_type(ctx.api, ctx.default_return_type, results)
