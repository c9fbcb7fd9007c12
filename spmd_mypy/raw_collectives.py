"""Raw torch.distributed collectives on typed tensors: reported as ``spmd-untyped-collective``.

A raw collective changes values the checker cannot track, so its result
keeps the type its buffer had, which is wrong afterwards: one error, at
the collective, not one more wherever the value goes.  The report names
the mesh axis the call's ``group=`` stands for (:mod:`spmd_mypy.groups`)
and the typed collective to use on it (for ``all_to_all_single`` given
split sizes, the typed uneven exchange).  In the ``forward`` or ``backward``
of an autograd Function the raw collective is the implementation instead
(:mod:`spmd_mypy.function_bodies`).
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import MypyFile
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.call_arguments import arguments
from spmd_mypy.config import AxisNames
from spmd_mypy.fullnames import RAW_COLLECTIVE_MODULES
from spmd_mypy.function_bodies import collective_result
from spmd_mypy.gradients import implementation
from spmd_mypy.groups import declaration_for, group_axis
from spmd_mypy.representation import has_spmd, spmd_members
from spmd_stubs import core
from spmd_stubs.core import AxisType, Code, TensorType
from spmd_stubs.core.comms import row_exchange_problem

UNTYPED: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "_all_gather_base": "all_gather",
    "all_gather_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast": "redistribute",
    "reduce": "redistribute",
    "scatter": "redistribute",
    "gather": "redistribute",
}
"""Raw torch.distributed collectives -> the typed operation to use instead."""
_INPUT_NAMES = ("input_tensor", "input", "tensor", "input_list")
"""The parameter a raw collective reads (its output buffer, where it has one, comes first)."""
_SPLIT_SIZES = ("output_split_sizes", "input_split_sizes")
"""``all_to_all_single``'s row counts: given, the call is an uneven exchange (a token dispatch)."""


def hooked(fullname: str, declared: dict[str, str]) -> bool:
    """Whether a call of ``fullname`` reaches :func:`untyped_collective_hook`: one of torch's :data:`UNTYPED`, or a
    name ``declared`` in the ``collectives`` setting."""
    module, _, name = fullname.rpartition(".")
    return fullname in declared or (f"{module}." in RAW_COLLECTIVE_MODULES and name in UNTYPED)


def torch_name(public: str) -> str:
    """``torch.distributed.all_reduce`` -> the full name mypy gives it (its defining module's)."""
    return RAW_COLLECTIVE_MODULES[0] + public.rpartition(".")[2]


def untyped_collective_hook(fullname: str, declared: AxisNames, strict: bool) -> Callable[[FunctionContext], Type]:
    """A raw torch.distributed collective on a typed tensor: the checker loses track (reported).

    The message's axis is the one its ``group=`` stands for
    (:func:`spmd_mypy.groups.axis_of_group`), and its fix the typed
    collective on that axis.  Without ``group=`` (the default group) on a
    tensor typed on one axis, that axis.  A group that names no axis gets
    the ``groups`` declaration that would name it instead.  In an autograd
    Function's body the collective is the implementation
    (:func:`spmd_mypy.function_bodies.collective_result`); there a group
    that names no axis leaves the buffer's type as it was, which strict mode
    reports here rather than as a bare return error later.
    """
    name = fullname.rpartition(".")[2]
    typed_op = UNTYPED[name]

    def hook(ctx: FunctionContext) -> Type:
        tensor_type = _typed_input(ctx)
        if tensor_type is None:
            return ctx.default_return_type
        given = arguments(ctx)
        group = given.get("group")
        uneven = typed_op == "all_to_all" and any(name in given for name in _SPLIT_SIZES)
        tree: MypyFile = ctx.api.tree  # type: ignore[attr-defined]
        if implementation(ctx.api) is not None:
            if strict and group is not None and group_axis(ctx, group, declared) is None:
                _report(ctx, name, tensor_type, None, _in_body_on_unknown_group(declaration_for(group[0], tree)))
            return collective_result(ctx, fullname, declared)
        if group is None:
            axis = tensor_type.axes[0][0] if len(tensor_type.axes) == 1 else None
            consequence = _on_default_group(typed_op) if axis is None else _on_axis(typed_op, tensor_type, axis, uneven)
        else:
            axis = group_axis(ctx, group, declared)
            consequence = (_on_axis(typed_op, tensor_type, axis, uneven) if axis is not None
                           else _on_unknown_group(typed_op, declaration_for(group[0], tree)))
        _report(ctx, name, tensor_type, axis, consequence)
        return ctx.default_return_type

    return hook


def _report(ctx: FunctionContext, name: str, tensor_type: TensorType, axis: str | None, consequence: str) -> None:
    on_axis = f" on axis {axis}" if axis is not None else ""
    report.fail(ctx.api, ctx.context, f"torch.distributed {name} on Tensor[{tensor_type}]{on_axis} changes values "
                f"the checker cannot see: {consequence}.", errorcodes.BY_RULE[Code.UNTYPED_COLLECTIVE])


def _in_body_on_unknown_group(declaration: str | None) -> str:
    """A Function body's collective whose group names no axis: its result cannot be typed."""
    declare = (f"declare it in [spmd_mypy] as `groups = {declaration}: AXIS`" if declaration is not None
               else "type the group where it comes in (`group: spmd_stubs.Group[AXIS]` on the parameter or attribute)")
    return ("it implements this Function's transition on the group's axis, which the checker cannot tell from "
            f"this group, so the tensor keeps the type it had before it. Fix: {declare}")


def _typed_input(ctx: FunctionContext) -> TensorType | None:
    """The SPMD type of the tensor a raw collective reads (else of any typed argument); None if none has one."""
    given = {n: types for n, types in zip(ctx.callee_arg_names, ctx.arg_types) if types}
    every = [t for types in ctx.arg_types for t in types]
    read = next((given[n] for n in _INPUT_NAMES if n in given), every)
    typed = [t for t in read if has_spmd(t)] or [t for t in every if has_spmd(t)]
    if not typed:
        return None
    return next(m for m in spmd_members(typed[0]) if m is not None)


def _on_axis(op: str, tensor_type: TensorType, axis: str, uneven: bool = False) -> str:
    """What goes wrong on ``axis``, the group's, and the typed call that does the same there (``uneven``: an
    ``all_to_all`` given split sizes)."""
    current = tensor_type.get(axis)
    if current is None:
        return (f"the tensor has no SPMD type on axis {axis}, the group's axis. Fix: state it with "
                f"assert_type(x, P@{axis}) (or V@{axis}, ...) and use the typed spmd_stubs.{op} on {axis}")
    return (f"the tensor's SPMD type there (and its gradient) would be wrong afterwards. "
            f"Fix: {_exchange_form(current, axis) if uneven else _typed_form(op, current, axis)}")


def _on_default_group(op: str) -> str:
    """No ``group=`` and a tensor typed on several axes: the world, which is none of them."""
    return (f"its SPMD type (and its gradient) would be wrong afterwards, on every axis of the default "
            f"group. Fix: pass the group of one mesh axis (spmd.group_of(AXIS)) and {_then(op)}")


def _on_unknown_group(op: str, declaration: str | None) -> str:
    """A group no rule names: the ``groups`` key that would name it (``declaration``), if any can."""
    if declaration is None:
        return ("its SPMD type (and its gradient) would be wrong afterwards on the group's axis, which the "
                "checker cannot tell from this group. Fix: type the group where it comes in "
                "(`group: spmd_stubs.Group[AXIS]` on the parameter or attribute), or pass spmd.group_of(AXIS), "
                f"mesh.get_group(\"AXIS\") or a group declared in [spmd_mypy] groups, and {_then(op)}")
    return ("its SPMD type (and its gradient) would be wrong afterwards on the group's axis, which is not "
            f"declared. Fix: declare it in [spmd_mypy] as `groups = {declaration}: AXIS` "
            f"(pyproject.toml: [tool.spmd_mypy.groups] \"{declaration}\" = \"AXIS\"), and {_then(op)}")


def _then(op: str) -> str:
    return f"then use the typed spmd_stubs.{op} on that axis"


def _exchange_form(current: AxisType, axis: str) -> str:
    """The typed exchange by row counts that does what a raw ``all_to_all_single`` given split sizes does to a
    ``current`` input; for one that does not vary, what to do first."""
    problem = row_exchange_problem(current, axis)
    if problem is None:
        return f"use the typed spmd_stubs.all_to_all(x, {axis}, src=V, dst=V, input_split_sizes=..., output_split_sizes=...)"
    why, fix = problem
    return f"x is {current.on(axis)}: {why}; {fix}, then use the typed spmd_stubs.all_to_all with the split sizes"


def _typed_form(op: str, current: AxisType, axis: str) -> str:
    """The typed collective that does what the raw one does to a ``current`` input, as a valid call."""
    dsts = [str(AxisType(dst)) for row_op, src, dst, gated in core.transitions()
            if row_op == op and src is current.kind and not gated]
    if dsts:
        return f"use the typed spmd_stubs.{op}(x, {axis}, src={current}, dst={' or '.join(dict.fromkeys(dsts))})"
    return (
        f"x is {current.on(axis)}: the same on every rank of {axis}, so a raw {op} would combine copies "
        f"(an all_reduce multiplies by the axis size). Drop it, or if each rank holds only a part, type x "
        f"so where it is made (P@{axis} for parts of a sum, V@{axis} for per-rank values) and use "
        f"spmd_stubs.{op}"
    )
