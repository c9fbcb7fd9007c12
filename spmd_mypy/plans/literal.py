"""A ``parallelize_module`` plan read from the call as written: its entries, styles and literal options.

The plan is a dict display, or a local name of the calling function bound
once, to one.  Each value is a style's constructor call
(:data:`~spmd_stubs.core.parallel_styles.STYLES`) whose options are literals:
``Replicate()``, ``Shard(d)``, ``Partial()``, tuples of them and ``None``,
``True``/``False``, ints.  An entry written otherwise keeps its key (still
resolved against the module) but no style: it decides no type.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.nodes import (
    ARG_NAMED,
    AssignmentStmt,
    CallExpr,
    DictExpr,
    Expression,
    FuncItem,
    IndexExpr,
    IntExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)

from spmd_mypy.fullnames import PLACEMENT_MODULE, STYLE_MODULE
from spmd_mypy.statements import statements_in
from spmd_stubs.core.parallel_styles import STYLES, Option, Placement


class Unreadable(Exception):
    """A value that is not a literal option."""


@dataclass(frozen=True)
class Style:
    """A style's constructor call: its class name and keyword options."""

    name: str
    options: tuple[tuple[str, Option], ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{key}={_shown(value)}' for key, value in self.options)})"

    def with_options(self, **changes: Option) -> Style:
        """This style with options set (a ``None`` value drops the option: its default applies)."""
        merged = dict(self.options) | changes
        return Style(self.name, tuple((k, v) for k, v in merged.items() if v is not None))


@dataclass(frozen=True)
class Entry:
    """One ``"key": Style(...)`` of the plan; ``style`` None where the value is not a literal style."""

    key: str
    style: Style | None
    node: Expression


def _shown(value: Option) -> str:
    if isinstance(value, tuple):
        return f"({', '.join(map(_shown, value))}{',' if len(value) == 1 else ''})"
    return str(value)


def plan_display(plan: Expression, function: FuncItem | None) -> DictExpr | None:
    """The plan's dict display: the expression itself, or what its local name is bound to once."""
    if isinstance(plan, DictExpr):
        return plan
    if not (isinstance(plan, NameExpr) and function is not None):
        return None
    bound = [s.rvalue for s in statements_in(function.body) if isinstance(s, AssignmentStmt)
             and any(isinstance(t, NameExpr) and t.name == plan.name for t in s.lvalues)]
    return bound[0] if len(bound) == 1 and isinstance(bound[0], DictExpr) else None


def entries(display: DictExpr) -> list[Entry] | None:
    """The display's entries; None where a key is not a string literal (the plan is not read)."""
    found = []
    for key, value in display.items:
        if not isinstance(key, StrExpr):
            return None
        try:
            style = read_style(value)
        except Unreadable:
            style = None
        found.append(Entry(key.value, style, key))
    return found


def read_style(expr: Expression) -> Style:
    """``ColwiseParallel(output_layouts=Shard(1))`` as a :class:`Style`."""
    name = _callee(expr, STYLE_MODULE)
    if name not in STYLES or not isinstance(expr, CallExpr) or any(k != ARG_NAMED for k in expr.arg_kinds):
        raise Unreadable
    return Style(name, tuple((str(key), _option(value)) for key, value in zip(expr.arg_names, expr.args)))


def _callee(expr: Expression, module: str) -> str | None:
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and expr.callee.fullname.startswith(module):
        return expr.callee.fullname[len(module):]
    return None


def _option(expr: Expression) -> Option:
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False", "builtins.None"):
        return {"builtins.True": True, "builtins.False": False, "builtins.None": None}[expr.fullname]
    if isinstance(expr, TupleExpr):
        items = tuple(_option(item) for item in expr.items)
        if all(item is None or isinstance(item, Placement) for item in items):
            return items  # type: ignore[return-value]  # checked just above
        raise Unreadable
    number = _int(expr)
    if number is not None:
        return number
    placement = _callee(expr, PLACEMENT_MODULE)
    assert isinstance(expr, CallExpr) or placement is None
    if placement in ("Replicate", "Partial") and isinstance(expr, CallExpr) and not expr.args:
        return Placement(placement)
    if placement == "Shard" and isinstance(expr, CallExpr) and len(expr.args) == 1:
        dim = _int(expr.args[0])
        if dim is not None:
            return Placement("Shard", dim)
    raise Unreadable


def _int(expr: Expression) -> int | None:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


def axis_name(mesh: Expression) -> str:
    """The mesh axis a plan's 1-D mesh stands for: ``mesh["tp"]`` is ``tp``, ``tp_mesh`` is ``tp``,
    any other name itself."""
    if isinstance(mesh, IndexExpr) and isinstance(mesh.index, StrExpr):
        return mesh.index.value
    name = mesh.name if isinstance(mesh, (NameExpr, MemberExpr)) else "mesh"
    return name[: -len("_mesh")] if name.endswith("_mesh") and len(name) > len("_mesh") else name
