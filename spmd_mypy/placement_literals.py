"""DTensor placements as written in source: the one reader plans and local_map share."""

from __future__ import annotations

from typing import Callable

from mypy.nodes import CallExpr, Expression, RefExpr, StrExpr

from spmd_mypy.call_arguments import int_value
from spmd_mypy.fullnames import PLACEMENT_MODULE
from spmd_stubs.core.parallel_styles import Placement


def placement_written(expr: Expression, dim_of: Callable[[Expression], object] = int_value) -> Placement | None:
    """``Replicate()``, ``Partial()`` / ``Partial("sum")``, ``Shard(d)`` / ``Shard(dim=d)``; None for anything else.

    ``dim_of`` reads a shard's dim (a literal by default; a plan reads names
    bound in its scope too).
    """
    if not (isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr)
            and expr.callee.fullname.startswith(PLACEMENT_MODULE)):
        return None
    name = expr.callee.fullname[len(PLACEMENT_MODULE):]
    if name == "Replicate" and not expr.args:
        return Placement(name)
    if name == "Partial" and (not expr.args or (isinstance(expr.args[0], StrExpr) and expr.args[0].value == "sum")):
        return Placement(name)
    if name == "Shard" and len(expr.args) == 1 and expr.arg_names[0] in (None, "dim"):
        dim = dim_of(expr.args[0])
        if isinstance(dim, int) and not isinstance(dim, bool):
            return Placement(name, dim)
    return None
