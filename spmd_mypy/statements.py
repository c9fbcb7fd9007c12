"""Walking a function's or a module's statements without mypy's (compiled, unsubclassable) traversers."""

from __future__ import annotations

from typing import Iterator

from mypy.nodes import Block, ForStmt, IfStmt, MatchStmt, Statement, TryStmt, WhileStmt, WithStmt


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
    """The statements of ``block`` and of the control-flow blocks nested in it (not nested defs)."""
    for statement in block.body:
        yield statement
        for inner in nested_blocks(statement):
            yield from statements_in(inner)
