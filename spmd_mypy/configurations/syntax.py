"""What a statement binds and evaluates, and which parameter a call's argument is: read from mypy's
parsed tree, before semantic analysis (:mod:`.following`, :mod:`.pruning`)."""

from __future__ import annotations

from typing import Iterator

from mypy.nodes import (
    ARG_NAMED,
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    AssignmentStmt,
    CallExpr,
    Expression,
    ForStmt,
    FuncDef,
    IfStmt,
    ImportFrom,
    MatchStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    Statement,
    TryStmt,
    WhileStmt,
    WithStmt,
)
from mypy.patterns import (
    AsPattern,
    ClassPattern,
    MappingPattern,
    OrPattern,
    Pattern,
    SequencePattern,
    StarredPattern,
    ValuePattern,
)


def name_of(expr: Expression) -> str:
    """The last name of ``name``, ``a.name``, ``name(...)``; "" for anything else."""
    if isinstance(expr, CallExpr):
        expr = expr.callee
    return expr.name if isinstance(expr, (NameExpr, MemberExpr)) else ""


def captures(pattern: Pattern | None) -> Iterator[str]:
    """The names a ``case`` pattern binds."""
    if isinstance(pattern, AsPattern):
        if pattern.name is not None:
            yield pattern.name.name
        yield from captures(pattern.pattern)
    elif isinstance(pattern, (OrPattern, SequencePattern)):
        for inner in pattern.patterns:
            yield from captures(inner)
    elif isinstance(pattern, StarredPattern):
        if pattern.capture is not None:
            yield pattern.capture.name
    elif isinstance(pattern, MappingPattern):
        for inner in pattern.values:
            yield from captures(inner)
        if pattern.rest is not None:
            yield pattern.rest.name
    elif isinstance(pattern, ClassPattern):
        for inner in [*pattern.positionals, *pattern.keyword_values]:
            yield from captures(inner)


def header(statement: Statement) -> list[Expression]:
    """The expressions ``statement`` itself evaluates (not those of the blocks it runs)."""
    if isinstance(statement, IfStmt):
        return list(statement.expr)
    if isinstance(statement, WhileStmt):
        return [statement.expr]
    if isinstance(statement, ForStmt):
        return [statement.index, statement.expr]
    if isinstance(statement, WithStmt):
        return [*statement.expr, *(t for t in statement.target if t is not None)]
    if isinstance(statement, TryStmt):
        return [*(t for t in statement.types if t is not None), *(v for v in statement.vars if v is not None)]
    if isinstance(statement, MatchStmt):
        return [statement.subject, *(g for g in statement.guards if g is not None),
                *(e for p in statement.patterns for e in pattern_expressions(p))]
    return [statement]  # type: ignore[list-item]  # a simple statement: get_subexpressions walks any node


def pattern_expressions(pattern: Pattern | None) -> Iterator[Expression]:
    if isinstance(pattern, ValuePattern):
        yield pattern.expr
    elif isinstance(pattern, AsPattern):
        yield from pattern_expressions(pattern.pattern)
    elif isinstance(pattern, (OrPattern, SequencePattern)):
        for inner in pattern.patterns:
            yield from pattern_expressions(inner)
    elif isinstance(pattern, MappingPattern):
        yield from pattern.keys
        for inner in pattern.values:
            yield from pattern_expressions(inner)
    elif isinstance(pattern, ClassPattern):
        yield pattern.class_ref
        for inner in [*pattern.positionals, *pattern.keyword_values]:
            yield from pattern_expressions(inner)


def arguments(call: CallExpr, function: FuncDef, bound: bool) -> dict[str, Expression] | None:
    """Which parameter of ``function`` each argument of ``call`` is; None where they cannot be matched
    (``*args``/``**kwargs`` in the call, too many, an unknown keyword)."""
    if any(kind in (ARG_STAR, ARG_STAR2) for kind in call.arg_kinds):
        return None
    parameters = function.arguments[1:] if bound else function.arguments
    positional = [p.variable.name for p in parameters if p.kind in (ARG_POS, ARG_OPT)]
    by_name = {p.variable.name for p in parameters if p.kind not in (ARG_STAR, ARG_STAR2)}
    takes_more = any(p.kind == ARG_STAR for p in parameters)
    takes_keywords = any(p.kind == ARG_STAR2 for p in parameters)
    passed: dict[str, Expression] = {}
    position = 0
    for argument, kind, name in zip(call.args, call.arg_kinds, call.arg_names):
        if kind == ARG_POS:
            if position < len(positional):
                passed[positional[position]] = argument
            elif not takes_more:
                return None
            position += 1
        elif kind == ARG_NAMED and name is not None:
            if name in by_name:
                passed[name] = argument
            elif not takes_keywords:
                return None
    return passed


def class_names(tree: MypyFile) -> dict[str, str]:
    """The names ``tree`` imports a class under, each -> the name it was defined with (``from .enum
    import TensorParallelLinearMode as Mode``), and its module-level aliases (``Mode = TensorParallelLinearMode``)."""
    found = {alias: name for node in tree.imports if isinstance(node, ImportFrom)
             for name, alias in node.names if alias is not None and alias != name}
    for statement in tree.defs:
        if (isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1
                and isinstance(lvalue := statement.lvalues[0], NameExpr)
                and isinstance(statement.rvalue, (NameExpr, MemberExpr)) and statement.rvalue.name[:1].isupper()):
            found[lvalue.name] = found.get(statement.rvalue.name, statement.rvalue.name)
    return found

