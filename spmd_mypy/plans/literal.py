"""A plan's styles and their options, read from the code as written.

A style is a constructor call of one of :data:`~spmd_stubs.core.parallel_styles.STYLES`
whose keyword options are literals: ``Replicate()``, ``Shard(d)``,
``Partial()``, tuples of them and ``None``, ``{"name": placement}`` dicts,
``True``/``False``, ints.  Names bound once stand for what they are bound to:
an alias of a style class (``colwise_parallel = ColwiseParallel``, torchtitan's
tuple of them), a constant (``SEQUENCE = Shard(1)``, ``NORM = SequenceParallel()``),
a local of the calling function.  A call of a function of the same module
whose body returns a style (``def rowwise(output=Replicate()): return
RowwiseParallel(output_layouts=output)``) is that style, each parameter bound
to the call's literal argument or its default; a conditional expression on
such a parameter (``Shard(-1) if loss_parallel else Replicate()``) takes the
branch its value chooses.  Anything else raises :class:`Unreadable`,
which says what was not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    GDEF,
    LDEF,
    AssignmentStmt,
    Block,
    CallExpr,
    ConditionalExpr,
    Context,
    DictExpr,
    Expression,
    FuncDef,
    FuncItem,
    MypyFile,
    NameExpr,
    RefExpr,
    ReturnStmt,
    StrExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
)

from spmd_mypy.call_arguments import int_value
from spmd_mypy.fullnames import STYLE_MODULE
from spmd_mypy.placement_literals import placement_written
from spmd_mypy.statements import statements_in
from spmd_stubs.core.parallel_styles import STYLES, KeywordLayouts, Option, Placement

_DEPTH = 8
"""How many names and helper calls are followed to a literal."""


class Unreadable(Exception):
    """A value that is not read as a literal: the expression, and why (``"is not a literal placement"``)."""

    def __init__(self, node: Context, reason: str) -> None:
        super().__init__(reason)
        self.node, self.reason = node, reason


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
class Scope:
    """Where an expression is read: the module being checked (only its own functions and constants are
    read), the function the expression is written in, and that function's parameters bound to literals."""

    tree: MypyFile
    function: FuncItem | None
    bound: Mapping[str, Option] = field(default_factory=dict)
    depth: int = 0

    def body(self) -> Block:
        return self.function.body if self.function is not None else Block(self.tree.defs)

    def entered(self, at: Context, function: FuncItem | None, bound: Mapping[str, Option] | None = None) -> Scope:
        if self.depth >= _DEPTH:
            raise Unreadable(at, "is followed through too many names and calls")
        return Scope(self.tree, function, bound if bound is not None else {}, self.depth + 1)


def _shown(value: Option) -> str:
    if isinstance(value, tuple):
        return f"({', '.join(map(_shown, value))}{',' if len(value) == 1 else ''})"
    return str(value)


def read_style(expr: Expression, scope: Scope) -> Style:
    """``ColwiseParallel(output_layouts=Shard(1))``, or a name or helper call standing for one."""
    if isinstance(expr, NameExpr):
        value, where = bound_value(expr, scope)
        return read_style(value, where)
    if not isinstance(expr, CallExpr):
        raise Unreadable(expr, "is not a style's constructor call")
    helper = _helper(expr.callee, scope)
    if helper is not None:
        returned, where = returned_value(helper, expr, scope)
        return read_style(returned, where)
    name = _style_class(expr.callee, scope)
    if any(kind != ARG_NAMED for kind in expr.arg_kinds):
        raise Unreadable(expr, "gives options other than by keyword")
    return Style(name, tuple((str(key), option(value, scope)) for key, value in zip(expr.arg_names, expr.args)))


def _style_class(callee: Expression, scope: Scope) -> str:
    """The style class ``callee`` names, through aliases bound once."""
    if isinstance(callee, RefExpr) and callee.fullname.startswith(STYLE_MODULE):
        name = callee.fullname[len(STYLE_MODULE):]
        if name in STYLES:
            return name
    if isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
        raise Unreadable(callee, "is not one of torch's styles the checker models")
    if isinstance(callee, NameExpr) and callee.kind in (LDEF, GDEF) and callee.fullname not in ("", None) and (
            callee.kind == LDEF or in_module(callee.fullname, scope.tree)):
        value, where = bound_value(callee, scope)
        return _style_class(value, where)
    raise Unreadable(callee, "is not one of torch's styles the checker models")


def option(expr: Expression, scope: Scope) -> Option:
    """A literal option: a placement, a tuple or dict of them, a flag, a dim, ``None``."""
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False", "builtins.None"):
        return {"builtins.True": True, "builtins.False": False, "builtins.None": None}[expr.fullname]
    if isinstance(expr, NameExpr):
        if expr.kind == LDEF and expr.name in scope.bound:
            return scope.bound[expr.name]
        value, where = bound_value(expr, scope)
        return option(value, where)
    if isinstance(expr, ConditionalExpr):
        return option(expr.if_expr if condition(expr.cond, scope) else expr.else_expr, scope)
    if isinstance(expr, TupleExpr):
        items = tuple(option(item, scope) for item in expr.items)
        if all(item is None or isinstance(item, Placement) for item in items):
            return items  # type: ignore[return-value]  # checked just above
        raise Unreadable(expr, "is not a tuple of placements")
    if isinstance(expr, DictExpr):
        return _keyword_layouts(expr, scope)
    number = int_value(expr)
    if number is not None:
        return number
    return _placement(expr, scope)


def condition(expr: Expression, scope: Scope) -> bool:
    """A literal flag: ``True``, a parameter bound to one, ``not`` of one."""
    if isinstance(expr, UnaryExpr) and expr.op == "not":
        return not condition(expr.expr, scope)
    value = option(expr, scope)
    if not isinstance(value, bool):
        raise Unreadable(expr, "is not a literal flag")
    return value


def _keyword_layouts(expr: DictExpr, scope: Scope) -> KeywordLayouts:
    items = []
    for key, value in expr.items:
        placement = option(value, scope)
        if not isinstance(key, StrExpr) or not isinstance(placement, Placement):
            raise Unreadable(expr, "is not a dict of placements by input name")
        items.append((key.value, placement))
    return KeywordLayouts(tuple(items))


def _placement(expr: Expression, scope: Scope) -> Placement:
    placement = placement_written(expr, lambda dim: option(dim, scope))
    if placement is None:
        raise Unreadable(expr, "is not a literal placement")
    return placement


def bound_value(name: NameExpr, scope: Scope) -> tuple[Expression, Scope]:
    """The one value a local of ``scope``'s function, or a name of the module being checked, is bound to,
    with the scope it is read in."""
    if name.kind == LDEF and scope.function is not None:
        if any(argument.variable.name == name.name for argument in scope.function.arguments):
            raise Unreadable(name, f"is a parameter of `{scope.function.name}`, given no literal")
        where = scope.entered(name, scope.function, scope.bound)
    elif name.kind == GDEF and in_module(name.fullname, scope.tree):
        where = scope.entered(name, None)
    else:
        raise Unreadable(name, "is not bound in this module")
    values = [value for statement in statements_in(where.body()) if isinstance(statement, AssignmentStmt)
              for target in statement.lvalues for value in _bound_by(target, statement.rvalue, name.name)]
    if len(values) != 1:
        raise Unreadable(name, f"is bound {len(values)} times")
    return values[0], where


def _bound_by(target: Expression, value: Expression, name: str) -> list[Expression]:
    """What ``target = value`` binds ``name`` to (``a, b = (X, Y)`` item by item)."""
    if isinstance(target, NameExpr):
        return [value] if target.name == name else []
    if isinstance(target, TupleExpr) and isinstance(value, TupleExpr) and len(target.items) == len(value.items):
        return [v for t, item in zip(target.items, value.items) for v in _bound_by(t, item, name)]
    if isinstance(target, TupleExpr):  # unpacked from a value not written as a tuple: that value, not read
        return [value] if any(_bound_by(t, value, name) for t in target.items) else []
    return []


def _helper(callee: Expression, scope: Scope) -> FuncDef | None:
    """The function of the module being checked that ``callee`` names (None: not such a function)."""
    node = callee.node if isinstance(callee, RefExpr) else None
    return node if isinstance(node, FuncDef) and in_module(node.fullname, scope.tree) else None


def returned_value(helper: FuncDef, call: CallExpr, scope: Scope) -> tuple[Expression, Scope]:
    """What ``helper``'s body returns, read with its parameters bound to ``call``'s literal arguments (or
    their defaults): its one ``return``, its last statement."""
    bound: dict[str, Option | Unreadable] = {}
    names = [argument.variable.name for argument in helper.arguments]
    for position, (kind, name, value) in enumerate(zip(call.arg_kinds, call.arg_names, call.args)):
        key = names[position] if kind == ARG_POS and position < len(names) else name
        if kind not in (ARG_POS, ARG_NAMED) or key not in names:
            raise Unreadable(call, f"passes `{helper.name}` arguments other than by position or name")
        bound[key] = _bound_option(value, scope)
    for argument in helper.arguments:
        if argument.variable.name not in bound and argument.initializer is not None:
            bound[argument.variable.name] = _bound_option(argument.initializer, Scope(scope.tree, None))
    where = scope.entered(call, helper, {k: v for k, v in bound.items() if not isinstance(v, Unreadable)})
    returns = [s for s in statements_in(helper.body) if isinstance(s, ReturnStmt)]
    last = helper.body.body[-1] if helper.body.body else None
    if len(returns) != 1 or returns[0] is not last or returns[0].expr is None:
        raise Unreadable(call, f"calls `{helper.name}`, which does not end in its one return")
    return returns[0].expr, where


def _bound_option(value: Expression, scope: Scope) -> Option | Unreadable:
    try:
        return option(value, scope)
    except Unreadable as unread:
        return unread


def in_module(fullname: str | None, tree: MypyFile) -> bool:
    return bool(fullname) and fullname.rpartition(".")[0] == tree.fullname  # type: ignore[union-attr]
