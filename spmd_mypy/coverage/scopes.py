"""A checked file cut into scopes (functions and the module's top level), each with the expressions it counts.

An expression belongs to the innermost function whose definition holds it
(default values included; lambdas and comprehensions are part of the
function they are written in); one outside every function to the module's
top level, ``<module>`` (class bodies included).  Functions are named by
where they are defined: ``Block.forward``, ``outer.inner``.

The expressions a scope *counts* are its expression nodes as mypy's
:func:`~mypy.server.subexpr.get_subexpressions` finds them, minus

* assignment targets: a name or other target that an assignment (``=``,
  an augmented ``+=``, ``:=``), a ``for``, a ``with ... as``, a
  comprehension's ``for`` or a ``del`` binds or writes, and the tuples,
  lists and starred items that group them (``a, *b = ...``); the
  subexpressions of an attribute or index target (``self`` in ``self.h =
  ...``, ``i`` in ``a[i] = ...``) are read, and counted;
* the calls the checker puts into mypy's tree around an expression (their
  callee is a ``TempNode``: :mod:`spmd_mypy.wrappers`); the expression they
  wrap is counted.

:mod:`spmd_mypy.coverage.figures` then keeps those with a tensor type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    CallExpr,
    DelStmt,
    DictionaryComprehension,
    Expression,
    ForStmt,
    GeneratorExpr,
    ListExpr,
    MypyFile,
    Node,
    OperatorAssignmentStmt,
    StarExpr,
    Statement,
    TempNode,
    TupleExpr,
    WithStmt,
)
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.statements import walk

MODULE_LEVEL = "<module>"


@dataclass
class Scope:
    """A function, or a module's top level: the expressions it counts and the values its assignments bind."""

    module: str
    name: str
    line: int
    root: Node
    expressions: list[Expression] = field(default_factory=list)
    """Its own expressions, targets and the checker's wrappers left out, in the order mypy's traverser finds them
    (of every type: :mod:`spmd_mypy.coverage.figures` keeps the tensor-valued ones)."""
    bindings: list[tuple[list[Expression], Expression]] = field(default_factory=list)
    """(targets, value): each ``=``, ``+=``, ``:=``, ``for``, ``with`` and comprehension ``for`` that binds here."""
    children: list[Scope] = field(default_factory=list)
    deleted: list[Expression] = field(default_factory=list)
    """What its ``del`` statements delete (not counted either)."""


def scopes_of(module: str, tree: MypyFile) -> list[Scope]:
    """The module's top level first, then every function in the order it is defined."""
    top = Scope(module, MODULE_LEVEL, 1, tree)
    scopes = [top]
    by_function: dict[int, Scope] = {}
    for visit in walk(tree.defs):
        scope = by_function[id(visit.scope.node)] if visit.scope is not None else top
        if visit.defines is not None:
            function = Scope(module, visit.defines.name, visit.defines.node.line, visit.defines.node)
            by_function[id(function.root)] = function
            scope.children.append(function)
            scopes.append(function)
        else:
            scope.bindings += _statement_bindings(visit.statement)
            if isinstance(visit.statement, DelStmt):
                scope.deleted.append(visit.statement.expr)
    for scope in scopes:
        nested = {id(e) for child in scope.children for e in get_subexpressions(child.root)}
        own = [e for e in get_subexpressions(scope.root) if id(e) not in nested]
        scope.bindings += _expression_bindings(own)
        targets = {id(part) for targets, _ in scope.bindings for t in targets for part in target_parts(t)}
        targets |= {id(part) for d in scope.deleted for part in target_parts(d)}
        scope.expressions = [e for e in own if id(e) not in targets and not is_wrapper(e)]
    return scopes


def is_wrapper(expr: Expression) -> bool:
    """A call the checker put around an expression (its callee a ``TempNode``: never in the source)."""
    return isinstance(expr, CallExpr) and isinstance(expr.callee, TempNode)


def target_parts(target: Expression) -> list[Expression]:
    """The target itself and the tuples, lists and starred items it is made of, down to what they bind."""
    if isinstance(target, (TupleExpr, ListExpr)):
        return [target, *(part for item in target.items for part in target_parts(item))]
    if isinstance(target, StarExpr):
        return [target, *target_parts(target.expr)]
    return [target]


def _statement_bindings(statement: Statement) -> list[tuple[list[Expression], Expression]]:
    if isinstance(statement, AssignmentStmt):
        return [(statement.lvalues, statement.rvalue)]
    if isinstance(statement, OperatorAssignmentStmt):
        return [([statement.lvalue], statement.rvalue)]
    if isinstance(statement, ForStmt):
        return [([statement.index], statement.expr)]
    if isinstance(statement, WithStmt):
        return [([target], value) for value, target in zip(statement.expr, statement.target) if target is not None]
    return []


def _expression_bindings(expressions: list[Expression]) -> list[tuple[list[Expression], Expression]]:
    """What ``:=`` and comprehensions' ``for`` bind among ``expressions``."""
    found: list[tuple[list[Expression], Expression]] = []
    for expr in expressions:
        if isinstance(expr, AssignmentExpr):
            found.append(([expr.target], expr.value))
        elif isinstance(expr, (GeneratorExpr, DictionaryComprehension)):
            found += [([index], sequence) for index, sequence in zip(expr.indices, expr.sequences)]
    return found
