"""Walking a module's or a function's statements, in source order (mypy's traversers are compiled
classes an interpreted one cannot extend; its collectors of every return and every subexpression,
:func:`mypy.traverser.all_return_statements` and :func:`mypy.server.subexpr.get_subexpressions`,
serve where they fit).

Two depths:

* one scope as it runs: :func:`statements_in` (and :func:`blocks_in`, block by
  block) go into the control-flow statements' blocks, not into nested
  functions or classes;
* everything: :func:`walk` goes into functions, classes and overloads too,
  and says which function each statement is written in; :func:`functions_in`
  keeps the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from mypy.nodes import (
    FUNC_NO_INFO,
    AssignmentExpr,
    AssignmentStmt,
    Block,
    ClassDef,
    Decorator,
    DelStmt,
    Expression,
    ForStmt,
    FuncDef,
    FuncItem,
    IfStmt,
    ListExpr,
    MatchStmt,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    OverloadedFuncDef,
    StarExpr,
    Statement,
    TryStmt,
    TupleExpr,
    TypeInfo,
    WhileStmt,
    WithStmt,
)
from mypy.server.subexpr import get_subexpressions


def nested_blocks(statement: Statement) -> list[Block]:
    """The blocks a control-flow statement runs (``if``/``for``/``while``/``with``/``try``/``match``)."""
    if isinstance(statement, IfStmt):
        return [*statement.body, *([statement.else_body] if statement.else_body else [])]
    if isinstance(statement, (ForStmt, WhileStmt)):
        return [statement.body, *([statement.else_body] if statement.else_body else [])]
    if isinstance(statement, WithStmt):
        return [statement.body]
    if isinstance(statement, TryStmt):
        extra = [b for b in (statement.else_body, statement.finally_body) if b is not None]
        return [statement.body, *statement.handlers, *extra]
    if isinstance(statement, MatchStmt):
        return list(statement.bodies)
    return []


def statements_in(block: Block) -> Iterator[Statement]:
    """The statements of ``block`` and of the control-flow blocks nested in it (not nested defs or classes),
    each followed by those in its own blocks."""
    for statement in block.body:
        yield statement
        for inner in nested_blocks(statement):
            yield from statements_in(inner)


def blocks_in(block: Block) -> Iterator[Block]:
    """``block`` and the control-flow blocks nested in it (not those of nested defs or classes), outer first."""
    yield block
    for statement in block.body:
        for inner in nested_blocks(statement):
            yield from blocks_in(inner)


@dataclass(frozen=True)
class Function:
    """A function definition as :func:`walk` finds it."""

    node: FuncDef
    decorators: list[Expression]
    """Its decorators as mypy keeps them (``Decorator.decorators``), outermost first; empty where it has none."""
    name: str
    """Qualified by the classes and functions it is defined in: ``Block.forward``, ``outer.inner``."""
    enclosing: Function | None
    """The innermost function it is defined in (through classes and control flow); None at module level."""
    overloaded: bool = False
    """Whether it is an item or the implementation of an overloaded function (its callers see the items)."""


@dataclass(frozen=True)
class Visit:
    """A statement as :func:`walk` finds it."""

    statement: Statement
    scope: Function | None
    """The innermost function it is written in; None: the module's top level (a class body is in the scope
    its class is defined in)."""
    defines: Function | None = None
    """The function it defines: a ``def``, decorated or not (an overload's items and implementation each)."""


def walk(statements: list[Statement]) -> Iterator[Visit]:
    """Every statement in ``statements`` and nested in them, each before those nested in it."""
    return _walk(statements, None, "")


def functions_in(statements: list[Statement]) -> Iterator[Function]:
    """Every function defined in ``statements``, nested ones too, each before those defined in it."""
    return (visit.defines for visit in walk(statements) if visit.defines is not None)


def _walk(statements: list[Statement], scope: Function | None, prefix: str, overloaded: bool = False,
          ) -> Iterator[Visit]:
    for statement in statements:
        if isinstance(statement, (FuncDef, Decorator)):
            node, decorators = (statement.func, statement.decorators) if isinstance(statement, Decorator) else (
                statement, [])
            function = Function(node, decorators, prefix + node.name, scope, overloaded)
            yield Visit(statement, scope, function)
            yield from _walk(node.body.body, function, f"{function.name}.")
            continue
        yield Visit(statement, scope)
        if isinstance(statement, OverloadedFuncDef):
            yield from _walk([*statement.items, *([statement.impl] if statement.impl else [])], scope, prefix, True)
        elif isinstance(statement, ClassDef):
            yield from _walk(statement.defs.body, scope, f"{prefix}{statement.name}.")
        for block in nested_blocks(statement):
            yield from _walk(block.body, scope, prefix)


def names_bound_by(target: Expression) -> Iterator[str]:
    """The names an assignment target binds: ``a``, ``a, (b, *c)``."""
    if isinstance(target, NameExpr):
        yield target.name
    elif isinstance(target, (TupleExpr, ListExpr)):
        for item in target.items:
            yield from names_bound_by(item)
    elif isinstance(target, StarExpr):
        yield from names_bound_by(target.expr)


def class_of(function: FuncItem) -> TypeInfo | None:
    """The class ``function`` is a method of; None for a function outside a class."""
    info = getattr(function, "info", None)
    return info if isinstance(info, TypeInfo) and info is not FUNC_NO_INFO else None


def defining_module(fullname: str, modules: Mapping[str, MypyFile]) -> MypyFile | None:
    """The build's module a full name is defined in: the longest prefix of it that is a module
    (``a.b.C.f`` -> ``a.b``), None where none is in the build."""
    parts = fullname.split(".")
    return next((modules[name] for name in (".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1))
                 if name in modules), None)


def names_in(expressions: Iterable[Expression]) -> Iterator[str]:
    """The plain names among ``expressions``."""
    return (expr.name for expr in expressions if isinstance(expr, NameExpr))


def binding_targets(statement: Statement) -> list[Expression]:
    """The targets ``statement`` itself binds (not those of the blocks in it): an assignment's, ``x += 1``'s,
    ``del x``'s, a ``for``'s index, a ``with``'s ``as`` names, a ``try``'s ``except ... as`` names.  A ``match``
    binds in its patterns, which are not targets: see :func:`names_bound_in`."""
    targets: list[Expression | None] = []
    if isinstance(statement, AssignmentStmt):
        targets = list(statement.lvalues)
    elif isinstance(statement, OperatorAssignmentStmt):
        targets = [statement.lvalue]
    elif isinstance(statement, DelStmt):
        targets = [statement.expr]
    elif isinstance(statement, ForStmt):
        targets = [statement.index]
    elif isinstance(statement, WithStmt):
        targets = list(statement.target)
    elif isinstance(statement, TryStmt):
        targets = list(statement.vars)
    return [target for target in targets if target is not None]


def names_bound_in(statements: list[Statement]) -> set[str]:
    """The names ``statements`` (and the blocks in them) may bind: a superset."""
    bound: set[str] = set()
    for statement in statements_in(Block(statements)):
        if isinstance(statement, MatchStmt):
            bound.update(names_in(get_subexpressions(statement)))
        for target in binding_targets(statement):
            bound.update(names_bound_by(target))
    for statement in statements:
        bound.update(e.target.name for e in get_subexpressions(statement) if isinstance(e, AssignmentExpr))
    return bound
