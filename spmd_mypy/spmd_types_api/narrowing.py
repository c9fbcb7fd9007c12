"""spmd_types' ``assert_type(x, ...)`` and ``mutate_type(x, ...)`` written as statements narrow ``x`` in place.

At run time both change the tensor's type attribute and return the tensor
itself, so torchtitan writes them as statements::

    spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})

When mypy has parsed a user module, before its semantic analysis, the
plugin makes each such statement the assignment it stands for::

    loss = spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})

so ``loss`` has the declared type from there on, as after any rebinding
(the value is the same object: nothing else changes).  A run of
``mutate_type`` statements on one name, one after another, is one
assignment of the nested calls (``x = spmd.mutate_type(spmd.mutate_type(x,
"dp", ...), "cp", ...)``): the name then takes no type half-way through the
run.  A statement is rewritten where

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

The same pass first unrolls the loops over axes around such calls
(:mod:`.axis_loops`: ``for axis in ("dp", "cp"): spmd.mutate_type(x, axis,
...)`` is one statement per axis), and last puts the body of each function
decorated ``@spmd.no_typecheck`` in a ``with spmd.no_typecheck():`` block
(:mod:`.unchecked_functions`).
"""

from __future__ import annotations

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ExpressionStmt,
    FuncDef,
    GlobalDecl,
    MypyFile,
    NameExpr,
    NonlocalDecl,
    Statement,
)
from mypy.options import Options

from spmd_mypy.parse_rewrites import ParseRewrite, redefinition_on
from spmd_mypy.sources import SourceFiles
from spmd_mypy.spmd_types_api.axis_loops import unroll_axis_loops
from spmd_mypy.spmd_types_api.spelling import Spellings
from spmd_mypy.spmd_types_api.unchecked_functions import unchecked_bodies
from spmd_mypy.statements import functions_in, names_bound_in, nested_blocks, statements_in

NARROWING = frozenset({"assert_type", "assert_local_type", "mutate_type"})
"""spmd_types' calls that change their argument's type in place."""


def narrowing(options: Options, sources: SourceFiles) -> ParseRewrite:
    """The rewrites of spmd_types' statements for one build: loops over axes unrolled
    (:mod:`.axis_loops`), then the narrowing statements where mypy checks the module with the plugin's
    redefinition, then the bodies of unchecked functions put in a ``no_typecheck()`` block
    (:mod:`.unchecked_functions`)."""

    def rewritten(tree: MypyFile) -> bool:
        spellings = Spellings.of(tree)
        if not spellings.modules and not spellings.calls:
            return False
        unrolled = unroll_axis_loops(tree, spellings)
        narrowed = redefinition_on(options, tree, sources) and rewrite(tree, spellings)
        unchecked = unchecked_bodies(tree, spellings)
        return unrolled or narrowed or unchecked

    return ParseRewrite(
        rewrite=rewritten,
        cache_key="spmd_types_narrowing",
        failure="spmd_types' statements (assert_type/mutate_type, loops over axes, @no_typecheck functions) could "
                "not be rewritten; they are checked as written",
    )


def rewrite(tree: MypyFile, spellings: Spellings) -> bool:
    """Rewrite every narrowing statement of ``tree`` (module docstring); whether any was."""
    done = _rewrite_scope(Block(tree.defs), set(names_bound_in(tree.defs)), spellings)
    for function in functions_in(tree.defs):
        done |= _rewrite_scope(function.node.body, _locals(function.node), spellings)
    return done


def _rewrite_scope(body: Block, bound: set[str], spellings: Spellings) -> bool:
    done = False
    for block in _blocks(body):
        rewritten: list[Statement] = []
        folding: str | None = None  # the name the last rewritten statement relabels with mutate_type
        for statement in block.body:
            target = _narrowed(statement, bound, spellings)
            if target is None:
                rewritten.append(statement)
                folding = None
                continue
            assert isinstance(statement, ExpressionStmt) and isinstance(statement.expr, CallExpr)
            relabels = spellings.called(statement.expr.callee) == "mutate_type"
            previous = rewritten[-1] if rewritten else None
            if relabels and folding == target.name and isinstance(previous, AssignmentStmt):
                # One assignment for a run of relabels of one name: mypy's redefinition would widen the
                # name, where the run sits in a branch, to every type it passes through on the way.
                statement.expr.args[0] = previous.rvalue
                previous.rvalue = statement.expr
            else:
                rewritten.append(_assignment(target, statement))
            folding = target.name if relabels else None
            done = True
        block.body[:] = rewritten
    return done


def _blocks(body: Block) -> list[Block]:
    found = [body]
    for statement in statements_in(body):
        found += nested_blocks(statement)
    return found


def _narrowed(statement: Statement, bound: set[str], spellings: Spellings) -> NameExpr | None:
    """The name a narrowing statement narrows; None for any other statement."""
    call = statement.expr if isinstance(statement, ExpressionStmt) else None
    if not isinstance(call, CallExpr) or not call.args or call.arg_kinds[0] != ARG_POS:
        return None
    tensor = call.args[0]
    spelled = spellings.called(call.callee) in NARROWING
    return tensor if spelled and isinstance(tensor, NameExpr) and tensor.name in bound else None


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
