"""spmd_types' ``assert_type(x, ...)`` and ``mutate_type(x, ...)`` written as statements narrow ``x`` in place.

At run time both change the tensor's type attribute and return the tensor
itself, so torchtitan writes them as statements::

    spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})

When mypy has parsed a user module, before its semantic analysis, the
plugin makes each such statement the assignment it stands for::

    loss = spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})

so ``loss`` has the declared type from there on, as after any rebinding
(the value is the same object: nothing else changes).  A statement is
rewritten where

* its callee spells ``assert_type``, ``assert_local_type`` or
  ``mutate_type`` through the module's own import of spmd_types
  (``import spmd_types as spmd``, ``from spmd_types import assert_type``,
  ``from spmd_types.runtime import mutate_type``);
* its first argument is a plain name the scope already binds: a parameter
  of the enclosing function or a name it assigns (at module level, one the
  module assigns), never one declared ``global`` or ``nonlocal``, so the
  assignment makes no name local that was not.

An attribute or subscript (``metadata.cu_seq_q``) is checked, not
narrowed.  The module is checked with mypy's redefinition (which the
plugin turns on, docs/checker.md#settings); where the user turned it off,
the statements stay as written and are checked only.  As for
:mod:`spmd_mypy.rebinding`, a rewritten module's cache entry is never
valid, so mypy parses it through the path that rewrites it.
"""

from __future__ import annotations

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    GlobalDecl,
    Import,
    ImportFrom,
    MemberExpr,
    MypyFile,
    NameExpr,
    NonlocalDecl,
    Statement,
)
from mypy.options import Options

from spmd_mypy.parse_rewrites import ParseRewrite, redefinition_on
from spmd_mypy.sources import SourceFiles
from spmd_mypy.statements import functions_in, names_bound_in, nested_blocks, statements_in

NARROWING = frozenset({"assert_type", "assert_local_type", "mutate_type"})
"""spmd_types' calls that change their argument's type in place."""
_MODULES = ("spmd_types", "spmd_types.runtime")
"""Where those calls are imported from."""


def narrowing(options: Options, sources: SourceFiles) -> ParseRewrite:
    """The rewrite for one build: on where mypy checks the module with the plugin's redefinition."""
    return ParseRewrite(
        rewrite=lambda tree: redefinition_on(options, tree, sources) and rewrite(tree),
        cache_key="spmd_types_narrowing",
        failure="spmd_types' assert_type/mutate_type statements could not be read as narrowing; they are "
                "checked only",
    )


def rewrite(tree: MypyFile) -> bool:
    """Rewrite every narrowing statement of ``tree`` (module docstring); whether any was."""
    callees = _callees(tree)
    if not callees[0] and not callees[1]:
        return False
    done = _rewrite_scope(Block(tree.defs), set(names_bound_in(tree.defs)), callees)
    for function in functions_in(tree.defs):
        done |= _rewrite_scope(function.node.body, _locals(function.node), callees)
    return done


def _callees(tree: MypyFile) -> tuple[set[str], set[str]]:
    """How the module spells spmd_types: its names for the modules, and for the narrowing calls themselves."""
    modules: set[str] = set()
    calls: set[str] = set()
    for imported in tree.imports:
        if isinstance(imported, Import):
            modules.update(alias or name for name, alias in imported.ids if name in _MODULES)
        elif isinstance(imported, ImportFrom) and imported.relative == 0 and imported.id in _MODULES:
            calls.update(alias or name for name, alias in imported.names if name in NARROWING)
    return modules, calls


def _rewrite_scope(body: Block, bound: set[str], callees: tuple[set[str], set[str]]) -> bool:
    done = False
    for block in _blocks(body):
        for index, statement in enumerate(block.body):
            target = _narrowed(statement, bound, callees)
            if target is not None:
                assert isinstance(statement, ExpressionStmt)
                block.body[index] = _assignment(target, statement)
                done = True
    return done


def _blocks(body: Block) -> list[Block]:
    found = [body]
    for statement in statements_in(body):
        found += nested_blocks(statement)
    return found


def _narrowed(statement: Statement, bound: set[str], callees: tuple[set[str], set[str]]) -> NameExpr | None:
    """The name a narrowing statement narrows; None for any other statement."""
    call = statement.expr if isinstance(statement, ExpressionStmt) else None
    if not isinstance(call, CallExpr) or not call.args or call.arg_kinds[0] != ARG_POS:
        return None
    callee, (modules, calls) = call.callee, callees
    spelled = ((isinstance(callee, NameExpr) and callee.name in calls)
               or (isinstance(callee, MemberExpr) and callee.name in NARROWING and _dotted(callee.expr) in modules))
    tensor = call.args[0]
    return tensor if spelled and isinstance(tensor, NameExpr) and tensor.name in bound else None


def _dotted(expr: Expression) -> str | None:
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        owner = _dotted(expr.expr)
        return f"{owner}.{expr.name}" if owner is not None else None
    return None


def _assignment(target: NameExpr, statement: ExpressionStmt) -> AssignmentStmt:
    name = NameExpr(target.name)
    name.set_line(target)
    assignment = AssignmentStmt([name], statement.expr)
    assignment.set_line(statement)
    return assignment


def _locals(function: FuncDef) -> set[str]:
    """The names ``function`` binds itself: its parameters and its assignments' targets, less those it
    declares ``global`` or ``nonlocal``."""
    bound = {argument.variable.name for argument in function.arguments} | names_bound_in(function.body.body)
    declared = {name for statement in statements_in(function.body)
                if isinstance(statement, (GlobalDecl, NonlocalDecl)) for name in statement.names}
    return bound - declared


