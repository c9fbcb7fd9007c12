"""Calls the checker puts around expressions in mypy's tree, so a hook sees what no hook would.

mypy has no hook for a ``return`` statement, nor for a call of an ``Any``
callee (untyped third-party code).  After a module's semantic analysis the
plugin wraps those expressions in a call of a typed stand-in, at the
expression's own position, whose function hook judges them:

* ``return value`` -> ``return <returned>(value)`` in an autograd
  Function's ``forward``/``backward`` (:mod:`spmd_mypy.function_bodies`)
  and, in strict mode, in a function whose declared return forgets SPMD
  types (:mod:`spmd_mypy.untyped_boundaries`);
* ``kernel(q, k)`` -> ``<called_value>(kernel(q, k))`` where ``kernel`` is a
  value rather than a function or class: a name from an import mypy could
  not resolve, a variable, an attribute of ``self`` that is not a method
  (it may be ``Any``: an untyped kernel kept in a module), in strict mode;
* ``x: torch.Tensor = value`` and ``self.h = value`` -> ``... = <assigned>(value)``
  where the target is declared with a plain tensor type, in strict mode
  (the wrapper's parameter is named after the target, for the message);
* ``dist_all_gather_func(buffer, x, group=g, async_op=True)``, ``dist.irecv(buffer, src)`` ->
  ``<started>(...)``: a call that starts a collective or a transfer in flight, whatever its
  callee's type (a variable holding one of two torch functions is a union
  mypy calls no hook for) (:mod:`spmd_mypy.async_flow`).

The wrapper exists only in mypy's tree (never in the source or the cache).
Its callee is an expression with a type of its own, not a name: when the
daemon re-analyses a function it finds the wrapper already there and no
name to look up again.  It takes ``Any`` and its hook returns the wrapped
value's type, so the rest of the check is as without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    Context,
    Expression,
    FuncDef,
    LambdaExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    ReturnStmt,
    TempNode,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext
from mypy.semanal import SemanticAnalyzer
from mypy.semanal_shared import PRIORITY_FALLBACKS
from mypy.server.subexpr import get_subexpressions
from mypy.traverser import all_return_statements
from mypy.types import AnyType, CallableType, Type, TypeOfAny, get_proper_type

from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import ASSIGNED, CALLED_VALUE, POINT_TO_POINT_STARTS, RETURNED, STARTED
from spmd_mypy.statements import class_of, functions_in, statements_in


@dataclass(frozen=True)
class Wrapping:
    """What to wrap in a module."""

    returns: Callable[[FuncDef], bool]
    """Which functions' returned values."""
    called_values: bool = False
    """Calls of values (unresolved imports, variables, data attributes of ``self``)."""
    assigned_to: Callable[[Type], bool] | None = None
    """Which declared types of an assignment's target have the assigned value wrapped."""
    async_starts: bool = True
    """Calls passing ``async_op=True``."""


def wrapped(value: Expression, marker: str, analyzer: SemanticAnalyzer | TypeChecker,
            name: str | None = None) -> CallExpr:
    """``<marker>(value)`` at ``value``'s position; ``name`` names the stand-in's parameter.  ``analyzer`` names
    ``builtins.function``: the semantic analyser, or the checker for a wrapper put in while a statement is
    checked (:mod:`spmd_mypy.spmd_types_api.unchecked`)."""
    anything = AnyType(TypeOfAny.special_form)
    signature = CallableType([anything], [ARG_POS], [name], anything, analyzer.named_type("builtins.function"),
                             name=marker)
    call = CallExpr(TempNode(signature), [value], [ARG_POS], [None])
    call.set_line(value)
    call.callee.set_line(value)
    return call


def wrapped_value(ctx: FunctionContext) -> tuple[Context, Type]:
    """What a wrapper's hook judges: the wrapped expression and its type."""
    if ctx.args and ctx.args[0]:
        return ctx.args[0][0], ctx.arg_types[0][0]
    return ctx.context, ctx.default_return_type


def marked(expr: Expression, marker: str) -> bool:
    """Whether ``expr`` is a ``<marker>(...)`` wrapper."""
    callee = expr.callee if isinstance(expr, CallExpr) else None
    return isinstance(callee, TempNode) and getattr(get_proper_type(callee.type), "name", None) == marker


def unwrapped(expr: Expression) -> Expression:
    """``expr``, or the expression it wraps where it is a ``<returned>(...)`` wrapper."""
    return expr.args[0] if marked(expr, RETURNED) and isinstance(expr, CallExpr) else expr


def calls_a_value(callee: Expression, owner: TypeInfo | None) -> bool:
    """Whether the callee is a value, which may be ``Any``, rather than a function or a class: (an
    attribute of) a name from an import mypy could not resolve, a variable, or an attribute of ``self``
    that the class (``owner``) does not define as a method."""
    root = callee
    while isinstance(root, MemberExpr):
        root = root.expr
    if isinstance(root, NameExpr) and isinstance(root.node, Var) and root.node.is_suppressed_import:
        return True
    if isinstance(callee, NameExpr):
        return isinstance(callee.node, Var)
    if isinstance(callee, MemberExpr) and isinstance(callee.expr, NameExpr) and callee.expr.name == "self":
        symbol = owner.get(callee.name) if owner is not None else None
        return symbol is not None and isinstance(symbol.node, Var)
    return False


def schedule(analyzer: SemanticAnalyzer, wrapping: Wrapping) -> None:
    """Wrap the current module's expressions (module docstring) once its semantic analysis is done.

    Asked once per analysis of the module: the daemon analyses a module again
    after an edit, and schedules it again.
    """
    tree, scheduled = analyzer.cur_mod_node, state_of(analyzer).scheduled
    if id(tree) in scheduled:
        return
    scheduled.add(id(tree))

    def patch() -> None:
        scheduled.discard(id(tree))
        _wrap(tree, analyzer, wrapping)

    analyzer.schedule_patch(PRIORITY_FALLBACKS, patch)


def _wrap(tree: MypyFile, analyzer: SemanticAnalyzer, wrapping: Wrapping) -> None:
    # the statements are walked by spmd_mypy.statements; the expressions in them are found by mypy's
    # compiled collectors (every return of a function, every subexpression of a node).
    defined = list(functions_in(tree.defs))
    functions = [function.node for function in defined]
    # an overloaded function's callers see its items' declared returns, not its implementation's
    for function in (found.node for found in defined if not found.overloaded):
        if wrapping.returns(function):
            for returned in own_returns(function):
                if returned.expr is not None and not marked(returned.expr, RETURNED):
                    returned.expr = wrapped(returned.expr, RETURNED, analyzer)
    if wrapping.async_starts:
        for function in functions:
            for call in get_subexpressions(function):
                if isinstance(call, CallExpr) and starts_async(call) and not marked(call, STARTED):
                    _wrap_in_place(call, analyzer, STARTED)
    if wrapping.called_values:
        # innermost functions first: a call belongs to the class of the method it is written in
        scopes = [*((class_of(f), f) for f in reversed(functions)), (None, tree)]
        seen: set[int] = set()
        for owner, scope in scopes:
            calls = [e for e in get_subexpressions(scope) if isinstance(e, CallExpr) and id(e) not in seen]
            seen.update(id(call) for call in calls)
            inner = {id(call.args[0]) for call in calls if marked(call, CALLED_VALUE)}
            for call in calls:
                if id(call) not in inner and not marked(call, CALLED_VALUE) and not marked(call, STARTED) \
                        and calls_a_value(call.callee, owner):
                    _wrap_in_place(call, analyzer, CALLED_VALUE)
    if wrapping.assigned_to is not None:
        blocks = [(None, Block(tree.defs)), *((class_of(function), function.body) for function in functions)]
        for owner, block in blocks:
            for statement in statements_in(block):
                if isinstance(statement, AssignmentStmt) and not marked(statement.rvalue, ASSIGNED):
                    target = _declared_target(statement, owner, wrapping.assigned_to)
                    if target is not None:
                        statement.rvalue = wrapped(statement.rvalue, ASSIGNED, analyzer, target)


def _declared_target(statement: AssignmentStmt, owner: TypeInfo | None, wraps: Callable[[Type], bool]) -> str | None:
    """The target's source text where its declared type is one ``wraps``: ``x: T = ...``, or ``self.h = ...``
    in a method of ``owner`` where the class declares ``h: T``."""
    if len(statement.lvalues) != 1:
        return None
    target = statement.lvalues[0]
    if isinstance(target, NameExpr) and statement.type is not None:
        return target.name if wraps(statement.type) else None
    if owner is None or not (isinstance(target, MemberExpr) and isinstance(target.expr, NameExpr)
                             and target.expr.name == "self"):
        return None
    symbol = owner.get(target.name)
    declared = symbol.node.type if symbol is not None and isinstance(symbol.node, Var) else None
    return f"self.{target.name}" if declared is not None and wraps(declared) else None


def own_returns(function: FuncDef) -> list[ReturnStmt]:
    """The function's return statements, not those of nested functions or lambdas."""
    lambdas = {id(e.body.body[0]) for e in get_subexpressions(function) if isinstance(e, LambdaExpr) and e.body.body}
    return [r for r in all_return_statements(function) if id(r) not in lambdas]


def starts_async(call: CallExpr) -> bool:
    """Whether ``call`` may start something in flight: it passes ``async_op`` (anything but a literal
    ``False``), or is an ``isend``/``irecv``/``batch_isend_irecv``."""
    if isinstance(call.callee, RefExpr) and call.callee.fullname in POINT_TO_POINT_STARTS:
        return True
    return any(name == "async_op" and not (isinstance(value, NameExpr) and value.fullname == "builtins.False")
               for name, value in zip(call.arg_names, call.args))


def _wrap_in_place(call: CallExpr, analyzer: SemanticAnalyzer, marker: str) -> None:
    """Turn ``call`` itself into ``<marker>(call)`` (its parent keeps pointing at the same node)."""
    inner = CallExpr(call.callee, call.args, call.arg_kinds, call.arg_names, call.analyzed)
    inner.set_line(call)
    outer = wrapped(inner, marker, analyzer)
    call.callee, call.args, call.arg_kinds, call.arg_names = outer.callee, outer.args, outer.arg_kinds, outer.arg_names
    call.analyzed = None
