"""A function decorated ``@spmd.no_typecheck``: its body checked as a ``with spmd.no_typecheck():`` block.

spmd_types runs the body of a function decorated ``@spmd.no_typecheck()``
(or ``@spmd.no_typecheck``, or registered with
``@spmd.register_no_typecheck``) unchecked, as it runs a ``with
spmd.no_typecheck():`` block.  mypy checks a function's body before its
decorators, so no hook of the decorator runs in time to say so.  When mypy
has parsed a user module, before its semantic analysis, the plugin puts
each such body (its docstring aside) in that block::

    @spmd.no_typecheck()                     @spmd.no_typecheck()
    def check_positions(positions):    ->    def check_positions(positions):
        torch._assert_async(...)                 with spmd.no_typecheck():
                                                     torch._assert_async(...)

so it is what :mod:`.unchecked` makes of such a block: its lines report no
SPMD diagnostic, and what it assigns leaves unknown.  The block is spelled
with the module's own name for spmd_types' ``no_typecheck`` (the
decorator's module, or the name it imported ``no_typecheck`` as); where it
has none, the function is checked as written.
``@spmd.no_typecheck(out_types=...)``, a typed boundary, is checked as
written too.
"""

from __future__ import annotations

from mypy.nodes import (
    Block,
    CallExpr,
    Expression,
    ExpressionStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    StrExpr,
    WithStmt,
)

from spmd_mypy.spmd_types_api.spelling import Spellings
from spmd_mypy.statements import functions_in

_UNCHECKING = frozenset({"no_typecheck", "register_no_typecheck"})
"""spmd_types' decorators whose function runs unchecked."""
_NO_TYPECHECK = "no_typecheck"


def unchecked_bodies(tree: MypyFile, spellings: Spellings) -> bool:
    """Put the body of every function of ``tree`` decorated so in a ``no_typecheck()`` block; whether any was."""
    done = False
    for function in functions_in(tree.defs):
        block = function.node.body
        body = block.body[1:] if _docstring(block) else list(block.body)
        decorator = next((d for d in function.decorators if _unchecking(d, spellings)), None)
        callee = _no_typecheck(decorator, spellings) if decorator is not None and body else None
        if callee is None:
            continue
        call = CallExpr(callee, [], [], [])
        inner = Block(body)
        with_block = WithStmt([call], [None], inner)
        for node in (callee, call, inner, with_block):
            node.set_line(body[0].line, body[0].column)
        block.body[len(block.body) - len(body):] = [with_block]
        done = True
    return done


def _docstring(block: Block) -> bool:
    first = block.body[0] if block.body else None
    return isinstance(first, ExpressionStmt) and isinstance(first.expr, StrExpr)


def _unchecking(decorator: Expression, spellings: Spellings) -> bool:
    """``@no_typecheck``, ``@no_typecheck()`` or ``@register_no_typecheck`` (not ``@no_typecheck(out_types=...)``)."""
    if isinstance(decorator, CallExpr):
        return not decorator.args and spellings.called(decorator.callee) == _NO_TYPECHECK
    return spellings.called(decorator) in _UNCHECKING


def _no_typecheck(decorator: Expression, spellings: Spellings) -> Expression | None:
    """A fresh ``no_typecheck`` in the module's spelling: through the decorator's module, or the name the
    module imported it as."""
    spelled = decorator.callee if isinstance(decorator, CallExpr) else decorator
    if isinstance(spelled, MemberExpr):
        module = spelled.expr
        return MemberExpr(_copy(module), _NO_TYPECHECK)
    imported = next((name for name, called in sorted(spellings.calls.items()) if called == _NO_TYPECHECK), None)
    return NameExpr(imported) if imported is not None else None


def _copy(expr: Expression) -> Expression:
    """A dotted name written again."""
    if isinstance(expr, MemberExpr):
        return MemberExpr(_copy(expr.expr), expr.name)
    assert isinstance(expr, NameExpr)
    return NameExpr(expr.name)
