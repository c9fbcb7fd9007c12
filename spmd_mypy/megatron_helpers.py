"""Megatron's mapping helpers (``spmd_stubs.megatron.*``): each a fixed call of one typed operation.

The helpers are the operations of :mod:`spmd_stubs.core.megatron_table`
with their axis and src/dst fixed, so a call is typed, and misuse reported,
exactly as the typed collective it stands for (:mod:`spmd_mypy.transitions`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from mypy.plugin import FunctionContext, FunctionSigContext
from mypy.types import CallableType, FunctionLike, Type

from spmd_mypy.call_arguments import arguments, flag
from spmd_mypy.representation import retype
from spmd_mypy.transitions import Request, typed_result
from spmd_mypy.typed_collectives import _row_exchange as row_exchange
from spmd_mypy.typed_collectives import passed
from spmd_stubs import core
from spmd_stubs.core import AxisType, Varying

if TYPE_CHECKING:
    from spmd_stubs.core.megatron_table import Helper


@dataclass(frozen=True)
class Fixed:
    """A Megatron helper: one typed operation with its axis and src/dst fixed."""

    op: str
    axis: str
    src: AxisType
    dst: AxisType
    dst_without_output_grad: AxisType | None = None
    """``gather_from_sequence_parallel_region(..., tensor_parallel_output_grad=False)``'s dst."""
    sent: str | None = None
    """The parameter of the rows sent to each rank, where split sizes make the helper a token dispatch."""
    received: str | None = None
    """The parameter of the rows received from each rank."""


def _fixed(helper: Helper) -> Fixed:
    from spmd_stubs.core.megatron_table import Role

    typed, unless = helper.typed, helper.dst_if_false
    roles = {role: name for name, role in helper.params}
    return Fixed(
        typed.op,
        typed.axis,
        core.parse_axis_type(typed.src),
        core.parse_axis_type(typed.dst),
        None if unless is None else core.parse_axis_type(unless),
        roles.get(Role.INPUT_SPLIT_SIZES) if helper.uneven is not None else None,
        roles.get(Role.OUTPUT_SPLIT_SIZES) if helper.uneven is not None else None,
    )


@functools.cache
def helpers() -> dict[str, Fixed]:
    """The porting table (:mod:`spmd_stubs.core.megatron_table`, shared with ``spmd-migrate``) as typed operations.

    Built when mypy first asks for a hook in :data:`~spmd_mypy.fullnames.MEGATRON_MODULE`,
    not at import: most code bases call no Megatron helper.
    """
    from spmd_stubs.core.megatron_table import HELPERS

    return {name: _fixed(helper) for name, helper in HELPERS.items()}


def helper_hook(helper: Fixed) -> Callable[[FunctionContext], Type]:
    """A Megatron mapping helper: its fixed typed operation on its input tensor."""

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        if "input_" not in args:
            return ctx.default_return_type
        dst = helper.dst
        if helper.dst_without_output_grad is not None:
            output_grad = flag(args.get("tensor_parallel_output_grad", (None, None))[0], True)
            if output_grad is None:
                return ctx.default_return_type
            dst = dst if output_grad else helper.dst_without_output_grad
        sizes = [args.get(name) for name in (helper.sent, helper.received) if name is not None]
        if any(passed(size) for size in sizes):
            # The token dispatch (megatron's all_to_all given split sizes): the typed all_to_all(V, V, ...).
            sent = args.get(helper.sent) if helper.sent is not None else None
            request = Request(helper.op, args["input_"][1], (helper.axis,), Varying, Varying, False)
            return row_exchange(ctx, request, sent[0] if sent is not None and passed(sent) else None)
        return typed_result(ctx, Request(helper.op, args["input_"][1], (helper.axis,), helper.src, dst, False))

    return hook


def helper_signature(ctx: FunctionSigContext) -> FunctionLike:
    """The helper's input is judged by :func:`helper_hook`, not by its annotation."""
    signature = ctx.default_signature
    assert isinstance(signature, CallableType)
    arg_types = [retype(ctx.api, t, None) if name == "input_" else t
                 for name, t in zip(signature.arg_names, signature.arg_types)]
    return signature.copy_modified(arg_types=arg_types)
