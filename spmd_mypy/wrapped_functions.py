"""A ``local_map`` call typed as the function it wraps: its parameters' and its result's types at the boundary.

Both local regions the checker reads, spmd_types' ``local_map(in_types=,
out_types=)`` (:mod:`spmd_mypy.spmd_types_api.local_map`) and DTensor's
``local_map(func, out_placements, in_placements, ...)``
(:mod:`spmd_mypy.dtensor_local_map`), wrap a function: called with the
function, the call is the wrapped function; called without it, it is a
decorator that gives it.  So ``@local_map(...) def f`` and
``local_map(...)(fn)(args)`` (``local_map(fn, ...)(args)`` for DTensor's)
give callers the same types.
"""

from __future__ import annotations

from mypy.nodes import ARG_POS, ARG_STAR, ARG_STAR2
from mypy.plugin import FunctionContext
from mypy.types import AnyType, CallableType, Instance, NoneType, TupleType, Type, TypeOfAny, UnionType

ANY = AnyType(TypeOfAny.special_form)


def wrapped_function(ctx: FunctionContext, parameters: list[Type], result: Type) -> CallableType:
    """The wrapped function: positional ``parameters``, then any other arguments; it returns ``result``."""
    return CallableType(
        [*parameters, ANY, ANY], [*(ARG_POS for _ in parameters), ARG_STAR, ARG_STAR2],
        [*(None for _ in parameters), "args", "kwargs"], result, _function(ctx),
    )


def decorator(ctx: FunctionContext, wrapped: CallableType) -> CallableType:
    """The decorator a ``local_map`` call without the function is: it takes the function, gives ``wrapped``."""
    return CallableType([ANY], [ARG_POS], ["fn"], wrapped, _function(ctx))


def tensor_or_none(tensor: Type | None) -> Type:
    """A parameter taking a tensor of this type or ``None`` (a pytree with no leaves, which neither region
    checks); ``Any`` for an unknown or non-tensor one."""
    return UnionType([tensor, NoneType()]) if tensor is not None and not isinstance(tensor, AnyType) else ANY


def tuple_of(ctx: FunctionContext, items: list[Type]) -> TupleType:
    """A result of several outputs: the tuple of their types."""
    return TupleType(items, ctx.api.named_generic_type("builtins.tuple", [ANY]))


def _function(ctx: FunctionContext) -> Instance:
    return ctx.api.named_generic_type("builtins.function", [])
