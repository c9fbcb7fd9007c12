"""Calls that declare a tensor's SPMD type with ``TYPE@axis`` arguments: ``assert_type``, ``dtensor.to_local``
and ``dtensor.from_local``.

A declaration contradicting a known axis of the tensor is the algebra's
error (:func:`~spmd_stubs.core.check_asserted`); on an axis that is global
where the call is, so is one that contradicts its partition spec.
"""

from __future__ import annotations

from typing import Callable

from mypy.plugin import FunctionContext
from mypy.types import AnyType, Type, get_proper_type

from spmd_mypy import report
from spmd_mypy.annotations import AnnotationError, tensor_type_of
from spmd_mypy.call_arguments import annotation_entries, bad_type_argument
from spmd_mypy.global_mode import boundaries, regions
from spmd_mypy.representation import result_type, unknown_tensor, updated_members
from spmd_stubs import core
from spmd_stubs.core import AxisType, SpmdTypeError, TensorType

Spelling = Callable[[SpmdTypeError], SpmdTypeError]
"""An error's calls rewritten in the vocabulary the checked call is written in (spmd_types' ``spmd.convert``)."""


def declaring_hook(taker: str) -> Callable[[FunctionContext], Type]:
    """``assert_type(x, V@dp, I@tp)`` and ``dtensor.to_local(dt, V@dp, I@tp)``: the result has the declared type.

    ``assert_type`` refines x's unknown axes and rejects contradicted known
    ones; ``to_local``'s DTensor has no SPMD type, so its result is simply
    the declared one.
    """
    read = _declared_types(taker, 1)

    def hook(ctx: FunctionContext) -> Type:
        declared = read(ctx)
        return declared_result(ctx, declared) if declared is not None else ctx.default_return_type

    return hook


def declared_result(ctx: FunctionContext, declared: TensorType, spelled: Spelling = lambda error: error) -> Type:
    """The result of a call declaring its first argument ``declared`` (also spmd_types' ``assert_type``,
    :mod:`spmd_mypy.spmd_types_api.asserting`): the argument's type with the declared axes set, each
    contradiction of a known axis reported, its calls as ``spelled`` writes them."""
    result = _a_tensor_for_any(ctx)
    return result_type(ctx.api, result, _declare(ctx, declared, result, spelled))


def from_local_hook(ctx: FunctionContext) -> Type:
    """``dtensor.from_local(x, mesh, V@dp, I@tp)``: the declared types must not contradict x's."""
    declared = _declared_types("from_local", 2)(ctx)
    if declared is not None and ctx.arg_types and ctx.arg_types[0]:
        _declare(ctx, declared, ctx.arg_types[0][0])
    return ctx.default_return_type


def _declared_types(taker: str, types_at: int) -> Callable[[FunctionContext], TensorType | None]:
    """Reads the ``TYPE@axis`` arguments of ``taker``'s parameter ``types_at`` (None: reported as malformed)."""

    def read(ctx: FunctionContext) -> TensorType | None:
        written = ctx.args[types_at] if len(ctx.args) > types_at else []
        try:
            return tensor_type_of([entry for e in written for entry in annotation_entries(e, taker)])
        except AnnotationError as error:
            bad_type_argument(ctx, error)
            return None

    return read


def _declare(ctx: FunctionContext, declared: TensorType, known: Type,
             spelled: Spelling = lambda error: error) -> list[TensorType | None]:
    """``known``'s members with the declared axes set, each contradiction reported."""
    global_axes = regions.current_axes(ctx.api)

    def update(mapping: dict[str, AxisType]) -> None:
        before = TensorType.of(mapping)
        for axis, axis_type in declared.axes:
            try:
                if axis in mapping:
                    core.check_asserted(mapping[axis], axis_type, axis)
                    if axis in global_axes:
                        boundaries.check_asserted_spec(before, declared, axis, global_axes)
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, spelled(error))
            mapping[axis] = axis_type

    return updated_members(known, update)


def _a_tensor_for_any(ctx: FunctionContext) -> Type:
    """The declared result; for an ``Any`` argument (an untyped call's result, an autograd
    Function's ``.apply``) an unknown tensor, which the declaration then types."""
    if not isinstance(get_proper_type(ctx.default_return_type), AnyType):
        return ctx.default_return_type
    return unknown_tensor(ctx.api) or ctx.default_return_type
