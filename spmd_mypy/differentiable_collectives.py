"""torch's differentiable collectives (``torch.distributed.nn.functional``) as typed transitions.

Each one's backward communicates again, so together with its forward it
is exactly one row of the typed table (docs/collectives.md, "torch's own
differentiable collectives"): ``all_reduce`` sums and its backward
all-reduces the gradient, which is ``all_reduce(P, R)``, not
``all_reduce(P, I)``.  Where the call's ``group=`` names a mesh axis
(:func:`spmd_mypy.groups.axis_of_group`; no ``group=`` is the world, the
input's axis when it is typed on one axis only) the result is that
transition applied to the input on the axis, and an input it does not fit
is ``spmd-collective``.  Elsewhere (a group naming no axis, a reduction
other than a sum) the result stays unknown and nothing is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mypy.nodes import Expression, ListExpr, TupleExpr
from mypy.plugin import FunctionContext
from mypy.types import Instance, TupleType, Type, get_proper_type

from spmd_mypy import report
from spmd_mypy.call_arguments import Argument, arguments, sums
from spmd_mypy.config import AxisNames
from spmd_mypy.global_mode import regions
from spmd_mypy.groups import group_axis
from spmd_mypy.message_parts import with_explanation
from spmd_mypy.representation import result_type, spmd_members, union_of, unknown_tensor
from spmd_mypy.transitions import Request, apply
from spmd_stubs.core import AxisType, Partial, Replicate, Shard, SpmdTypeError, Varying


@dataclass(frozen=True)
class Differentiable:
    """A torch differentiable collective as the typed transition its forward and backward make."""

    op: str
    src: AxisType
    dst: AxisType
    reads: str
    """The parameter holding the input (a list of tensors where ``per_rank``)."""
    backward: str
    per_rank: bool = False
    """Whether the input is a list of tensors, one per rank."""
    returns_per_rank: bool = False
    """Whether the result is a tuple of tensors, one per rank."""

    def typed_call(self, axis: str) -> str:
        return f"spmd_stubs.{self.op}(x, {axis}, src={self.src}, dst={self.dst})"


DIFFERENTIABLE: dict[str, Differentiable] = {
    "all_reduce": Differentiable("all_reduce", Partial, Replicate, "tensor", "all-reduces the gradient (a sum on every rank)"),
    "all_gather": Differentiable(
        "all_gather", Varying, Replicate, "tensor", "reduce-scatters the gradients (a sum of every rank's part)",
        returns_per_rank=True,
    ),
    "_all_gather_base": Differentiable(
        "all_gather", Shard(0), Replicate, "input_tensor", "reduce-scatters the gradient along dim 0 (a sum of every rank's part)"
    ),
    "reduce_scatter": Differentiable(
        "reduce_scatter", Partial, Varying, "input_list", "all-gathers the gradient to every rank", per_rank=True
    ),
    "all_to_all": Differentiable(
        "all_to_all", Varying, Varying, "input_tensor_list", "sends the gradients back by an all_to_all",
        per_rank=True, returns_per_rank=True,
    ),
    "all_to_all_single": Differentiable("all_to_all", Varying, Varying, "input", "sends the gradient back by an all_to_all_single"),
}
"""torch.distributed.nn.functional's collectives by name.  ``broadcast``, ``reduce``, ``gather`` and
``scatter`` keep one rank's value or put it on one rank only: no typed transition does that."""


def differentiable_hook(name: str, declared: AxisNames) -> Callable[[FunctionContext], Type]:
    """``torch.distributed.nn.functional.<name>(...)``: typed as :data:`DIFFERENTIABLE` says, on the group's axis."""
    collective = DIFFERENTIABLE[name]

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        if collective.reads not in args or not sums(args.get("op")):
            return ctx.default_return_type
        tensor = _per_rank_element(ctx, *args[collective.reads]) if collective.per_rank else args[collective.reads][1]
        axis = _axis(ctx, args.get("group"), tensor, declared)
        result = unknown_tensor(ctx.api)
        if axis is None or result is None or not any(spmd_members(tensor)):
            return ctx.default_return_type
        request = Request(collective.op, tensor, (axis,), collective.src, collective.dst, False)
        results = apply(request, _reporter(ctx, name, collective), regions.current_axes(ctx.api))
        shape: Type = ctx.api.named_generic_type("builtins.tuple", [result]) if collective.returns_per_rank else result
        return result_type(ctx.api, shape, results)

    return hook


def _per_rank_element(ctx: FunctionContext, written: Expression, sequence: Type) -> Type:
    """The tensor type of a list (or tuple) of tensors, one per rank.

    A list written out in the call is read item by item: torch's parameter
    is unannotated, so mypy infers ``list[Any]`` for it.
    """
    if isinstance(written, (ListExpr, TupleExpr)):
        return union_of(ctx.api.get_expression_type(item) for item in written.items)
    proper = get_proper_type(sequence)
    if isinstance(proper, TupleType):
        return union_of(proper.items)
    if isinstance(proper, Instance) and proper.args:
        return proper.args[0]
    return sequence


def _axis(ctx: FunctionContext, group: Argument | None, tensor: Type, declared: AxisNames) -> str | None:
    """The mesh axis the collective runs over; None where the group names none.

    No ``group=`` is the world: one mesh axis only when the input is typed on one axis.
    """
    if group is not None:
        return group_axis(ctx, group, declared)
    axes = {axis for member in spmd_members(tensor) if member is not None for axis, _ in member.axes}
    return axes.pop() if len(axes) == 1 else None


def _reporter(ctx: FunctionContext, name: str, collective: Differentiable) -> Callable[[SpmdTypeError], None]:
    """Reports a misfit input as the typed call's error, saying what torch's backward does."""

    def report_error(error: SpmdTypeError) -> None:
        message = with_explanation(
            error.message,
            f"torch.distributed.nn.functional.{name} is {collective.typed_call(error.axis)}: its backward "
            f"{collective.backward}",
        )
        report.rule_error(ctx.api, ctx.context, SpmdTypeError(error.code, error.axis, message))

    return report_error
