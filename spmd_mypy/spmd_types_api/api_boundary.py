"""spmd_types' ``@api_boundary`` functions: any function as a value, their own parameters at each call.

spmd_types decorates its public calls (``all_reduce``, ``redistribute``,
``assert_type``, ``mutate_type``, ...) with ``api_boundary``, an untyped
decorator: plain mypy types each of them ``Any``.  A call of ``Any``
reaches no hook, so the plugin types them, in two places:

* the decorated function as a value (:func:`any_function`) is
  ``Callable[..., R]``, ``R`` its own return: what may replace it is any
  function, as for plain mypy's ``Any`` (torchtitan's vLLM wrapper assigns
  ``spmd.redistribute`` its own ``redistribute(x, group, *, src, dst,
  **kwargs)``);
* a call of it by its name (:func:`own_parameters`) sees the function's own
  parameters, each ``Any`` (spmd_types annotates its run-time values,
  ``src: PerMeshAxisSpmdType``, and the plugin reads the call's expressions,
  not their types), so the call's hook finds each argument by its
  parameter's name.
"""

from __future__ import annotations

from mypy.nodes import ARG_STAR, ARG_STAR2, CallExpr, Decorator, RefExpr
from mypy.plugin import FunctionContext, FunctionSigContext
from mypy.typeops import function_type
from mypy.types import AnyType, CallableType, FunctionLike, Type, TypeOfAny, get_proper_type


def any_function(ctx: FunctionContext) -> Type:
    """``api_boundary(fn)``: ``Callable[..., R]``, ``R`` what ``fn`` returns (module docstring)."""
    decorated = get_proper_type(ctx.arg_types[0][0]) if ctx.arg_types and ctx.arg_types[0] else None
    if not isinstance(decorated, CallableType):
        return ctx.default_return_type
    anything = AnyType(TypeOfAny.special_form)
    return decorated.copy_modified(arg_types=[anything, anything], arg_kinds=[ARG_STAR, ARG_STAR2],
                                   arg_names=[None, None], is_ellipsis_args=True)


def own_parameters(ctx: FunctionSigContext) -> FunctionLike:
    """A call by its name of a function of spmd_types whose value is ``Callable[..., R]`` (what
    :func:`any_function` made it: mypy's cache keeps no decorators to ask): its own parameters, each ``Any``."""
    callee = ctx.context.callee if isinstance(ctx.context, CallExpr) else None
    node = callee.node if isinstance(callee, RefExpr) else None
    value = get_proper_type(node.var.type) if isinstance(node, Decorator) else None
    if not (isinstance(node, Decorator) and isinstance(value, CallableType) and value.is_ellipsis_args):
        return ctx.default_signature
    own = get_proper_type(node.func.type) if node.func.type is not None else function_type(
        node.func, ctx.api.named_generic_type("builtins.function", []))
    if not isinstance(own, CallableType):
        return ctx.default_signature
    return own.copy_modified(arg_types=[AnyType(TypeOfAny.special_form)] * len(own.arg_types))
