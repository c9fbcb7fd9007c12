"""``with spmd.no_typecheck():``: a block spmd_types does not check, checked quietly and not trusted after.

Inside the block spmd_types' run time checks nothing; the code there is
what its author chose to leave unchecked (a data-dependent kernel, a
metrics computation).  So, when mypy checks the ``with`` (its context
manager, before the body):

* the body's lines report no SPMD diagnostic (none of the ``spmd-*``
  codes: :func:`spmd_mypy.report.fail` skips the lines); mypy's own errors stay, among them an
  ``arg-type`` where a value meets a parameter declared with an SPMD type;
* every value assigned in the body (to a name, an attribute, an item)
  leaves with its SPMD types forgotten: its tensors are unknown after the
  assignment, in the block and after it, so nothing computed unchecked is
  trusted (:func:`forgotten_hook`);
* except spmd_types' own declarations there: ``spmd.assert_type`` and
  ``spmd.mutate_type`` (:mod:`.narrowing`) declare what leaves, as
  torchtitan writes them at the end of such a block, and are trusted as any
  declaration is.

A function decorated ``@spmd.no_typecheck()`` has its body put in such a
block when its module is parsed (:mod:`.unchecked_functions`: mypy checks a
body before its decorators, so no hook of the decorator runs in time).

``with spmd.local():`` drops spmd_types' global SPMD (its shard
propagation) to local SPMD in the block; the checker's types of spmd_types
code are local SPMD already, so the block is checked as any other.  An
``if spmd.is_type_checking():`` guard is checked as any ``if``: what it
narrows joins with the unguarded path after it.
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.nodes import AssignmentStmt, Block, CallExpr, Context, Expression, WithStmt
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import SPMD_TYPES_FORGOTTEN
from spmd_mypy.representation import retype
from spmd_mypy.spmd_types_api.narrowing import NARROWING
from spmd_mypy.statements import statements_in
from spmd_mypy.wrappers import marked, wrapped, wrapped_value


def no_typecheck_hook(ctx: FunctionContext) -> Type:
    """``spmd.no_typecheck()`` as a ``with`` item: its body quiet, its assignments forgotten (module docstring)."""
    checker = ctx.api
    block = _body_of(checker, ctx.context) if isinstance(checker, TypeChecker) else None
    if block is None or not block.body:
        return ctx.default_return_type
    assert isinstance(checker, TypeChecker)
    last = block.body[-1]
    state_of(checker).quiet_lines.setdefault(checker.tree.fullname, set()).update(
        range(block.body[0].line, (last.end_line or last.line) + 1))
    for statement in statements_in(block):
        if isinstance(statement, AssignmentStmt) and not _declares(statement.rvalue):
            statement.rvalue = _forgetting(statement.rvalue, checker)
    return ctx.default_return_type


def forgotten_hook(ctx: FunctionContext) -> Type:
    """``<forgotten>(value)``: the value's type with every tensor in it unknown."""
    _, value = wrapped_value(ctx)
    return retype(ctx.api, value, None)


def _body_of(checker: TypeChecker, call: Context) -> Block | None:
    """The body of the ``with`` statement, in the function being checked (or the module), whose item is ``call``."""
    function = checker.scope.current_function()
    scope = function.body if function is not None else Block(checker.tree.defs)
    for statement in statements_in(scope):
        if isinstance(statement, WithStmt) and any(item is call for item in statement.expr):
            return statement.body
    return None


def _declares(value: Expression) -> bool:
    """spmd_types' ``assert_type``/``mutate_type`` (the narrowing rewrite's value): a declaration."""
    callee = value.callee if isinstance(value, CallExpr) else None
    return getattr(callee, "fullname", "").rpartition(".")[2] in NARROWING and getattr(
        callee, "fullname", "").startswith("spmd_types.")


def _forgetting(value: Expression, checker: TypeChecker) -> Expression:
    return value if marked(value, SPMD_TYPES_FORGOTTEN) else wrapped(value, SPMD_TYPES_FORGOTTEN, checker)
