"""spmd_types' ``local_map(in_types=, out_types=)``: the wrapped function's boundary types (docs/spec.md#spmd_types-local_map).

At run time ``spmd.local_map(in_types=..., out_types=...)`` returns a
decorator; the wrapped function's body runs untracked (a local region),
each argument is checked against its ``in_types`` leaf on entry (a
conflict raises) and each output is stamped with its ``out_types`` leaf.
Statically the decorator's result is typed as a function whose positional
parameters are the ``in_types`` leaves and whose result is the
``out_types`` pytree, so both ``@spmd.local_map(...)`` on a def and
``spmd.local_map(...)(fn)(args)`` give callers those types:

* a leaf is a type expression (:mod:`.reading`: a dict, a ``PartitionSpec``,
  a ``(dict, PartitionSpec)`` pair, a bare type over ``current_mesh``) or
  ``None`` (not a tensor: ``Any``); ``out_types`` a leaf or a tuple of them
  (``(leaf,) * 3`` too);
* ``in_types`` left out (spmd_types' ``Infer``), or not a tuple of leaves,
  takes any arguments; a tensor argument whose known type conflicts with
  its leaf is mypy's ``arg-type``, as the run time's entry check raises
  (``None`` passes: a pytree without leaves);
* where a leaf of ``out_types`` cannot be read, the result keeps mypy's type.

The body is checked as any other function (the checker is local outside a
``global_spmd`` region already); its parameters have the types they are
annotated with.  Unlike :func:`spmd_stubs.regions.local_map`, which turns
axes of a global region back to local, this one only states types at a
function's boundary.
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import CallExpr, Expression, IntExpr, NameExpr, OpExpr, RefExpr, TupleExpr
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy.call_arguments import arguments
from spmd_mypy.config import Config
from spmd_mypy.representation import unknown_tensor, with_spmd
from spmd_mypy.spmd_types_api.reading import Site, site_of, tensor_type
from spmd_mypy.wrapped_functions import ANY, decorator, tensor_or_none, tuple_of, wrapped_function

PARTITION_SPEC = "spmd_types.types.PartitionSpec"


def local_map_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.local_map(in_types=..., out_types=...)``: a decorator giving the wrapped function these types."""

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        site = site_of(ctx, settings)
        if site is None or "out_types" not in args:
            return ctx.default_return_type
        result = _pytree(ctx, args["out_types"][0], site)
        if result is None:
            return ctx.default_return_type
        inputs = _leaves(args["in_types"][0]) if "in_types" in args else None
        parameters = [tensor_or_none(_leaf(ctx, leaf, site)) for leaf in inputs] if inputs is not None else []
        return decorator(ctx, wrapped_function(ctx, parameters, result))

    return hook


def _pytree(ctx: FunctionContext, expr: Expression, site: Site) -> Type | None:
    """``out_types`` as a type: a leaf, or a tuple of leaves; None where a leaf cannot be read."""
    leaves = _leaves(expr)
    if leaves is None:
        return _leaf(ctx, expr, site)
    items = [_leaf(ctx, leaf, site) for leaf in leaves]
    if any(item is None for item in items):
        return None
    return tuple_of(ctx, items)  # type: ignore[arg-type]


def _leaves(expr: Expression) -> list[Expression] | None:
    """A tuple of leaves as written: ``(a, b)``, ``(a,) * 3``; None for anything else (one leaf)."""
    if isinstance(expr, OpExpr) and expr.op == "*" and isinstance(expr.left, TupleExpr) and isinstance(
            expr.right, IntExpr):
        return list(expr.left.items) * expr.right.value
    if isinstance(expr, TupleExpr) and not _is_pair(expr):
        return list(expr.items)
    return None


def _is_pair(expr: TupleExpr) -> bool:
    """``(dict, PartitionSpec)``: one leaf, not a tuple of two (its second item is a partition spec or None)."""
    if len(expr.items) != 2:
        return False
    second = expr.items[1]
    return (isinstance(second, NameExpr) and second.fullname == "builtins.None") or (
        isinstance(second, CallExpr) and isinstance(second.callee, RefExpr) and second.callee.fullname == PARTITION_SPEC)


def _leaf(ctx: FunctionContext, leaf: Expression, site: Site) -> Type | None:
    """One leaf: ``None`` is ``Any`` (not a tensor); a type expression a tensor of that type; None: unreadable."""
    if isinstance(leaf, NameExpr) and leaf.fullname == "builtins.None":
        return ANY
    parts = list(leaf.items) if isinstance(leaf, TupleExpr) else [leaf]
    declared = tensor_type(parts, site)
    tensor = unknown_tensor(ctx.api)
    if declared is None or tensor is None:
        return None
    return with_spmd(ctx.api, tensor, declared)
