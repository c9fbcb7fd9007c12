"""A parameter rebound in a branch that returns keeps its own type after the branch.

mypy's ``allow_redefinition``, which the plugin turns on (docs/checker.md#settings),
retypes ``x = spmd.all_reduce(x, ...)`` by *widening* the variable's declared
type, for the whole function, to the union of the old type and the new one;
each read is then narrowed back by what flows there.  The narrowing keeps
every member of the union that overlaps the type flowing in, and a plain
``torch.Tensor`` (``Tensor[Any]``) overlaps every tensor type, as do two SPMD
types that agree on every axis both mention.  So a rebinding in a branch
that returns leaks into the code after the branch, which never sees it::

    def col(input_: torch.Tensor, flag: bool) -> Tensor[R@tp]:
        if flag:
            input_ = ident(input_)      # input_'s declared type: Tensor[Any] | Tensor[R@tp]
            return input_
        return gather(input_)           # Tensor[Any] | Tensor[R@tp]: a false arg-type

mypy does the same alone, for any generic type with an ``Any`` argument
(tests/plugin/test_branch_rebinding.py keeps that repro).  So, when mypy has
parsed a module, before its semantic analysis (where mypy's own
``allow_redefinition_old`` renames variables), the plugin makes such a
rebinding that of a new variable, named with mypy's own mangling suffix
(``input_'``; mypy prints names unmangled), first bound to the parameter's
value so that the rebinding is checked as before::

    if flag:                            if flag:
        input_ = ident(input_)              input_' = input_
        return input_                       input_' = ident(input_)
                                            return input_'

Every read and rebinding after it in the branch is of the new variable; the
parameter keeps its declared type, and the code after the ``if`` reads it.
Nothing but the leak changes, because nothing that runs after the rebinding
can read the parameter again:

* the branch (of an ``if``, ``elif`` or ``else``) ends in ``return`` or
  ``raise``, and has no ``break`` or ``continue`` that leaves it after the
  rebinding (a ``continue`` carries the new value into the next iteration,
  a ``break`` past the loop: mypy's union is right there);
* the ``if`` is not inside a ``try`` or ``with`` statement of the function (an
  ``except``, a ``finally``, a context manager that swallows the exception
  runs after the branch);
* no nested function, lambda or class of the function names the parameter
  (a closure reads the variable, not the value), the function does not
  import or define that name, and the branch does not bind it before;
* the parameter is annotated (an unannotated one is ``Any``, which mypy does
  not widen), not with a type that spells ``Any`` (:data:`_ANY`), and is not
  ``self`` or ``cls``;
* the module is checked with the ``allow_redefinition`` the plugin turned on
  (a module's own ``# mypy: allow-redefinition=False`` or ``[mypy-module]``
  section wins; where the user chose ``allow_redefinition``, mypy's own
  semantics are theirs, leak included).

A branch nested in a rewritten one is rewritten the same way for the new
variable.  mypy parses a module from its cache entry's source without asking
the plugin when only its imports changed, so :class:`~spmd_mypy.parse_rewrites.ParseRewrite`
keeps the cache entry of a rewritten module from ever being valid: it is
parsed (and checked) afresh each run, as a module whose conditions the
configuration's flags decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    Block,
    BreakStmt,
    ClassDef,
    ContinueStmt,
    Decorator,
    Expression,
    ForStmt,
    FuncDef,
    IfStmt,
    Import,
    ImportAll,
    ImportFrom,
    LambdaExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RaiseStmt,
    ReturnStmt,
    Statement,
    TryStmt,
    WhileStmt,
    WithStmt,
)
from mypy.options import Options
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.parse_rewrites import ParseRewrite, redefinition_on
from spmd_mypy.sources import SourceFiles
from spmd_mypy.statements import functions_in, names_bound_in, names_in, nested_blocks, statements_in

SUFFIX = "'"
"""mypy's mangling suffix (``mypy.util.unmangle`` strips it): no name in a source file ends in it."""

_UNSHADOWED = frozenset({"self", "cls"})
"""Parameters never shadowed: an assignment to an attribute of ``self`` defines one."""

_ANY = re.compile(r"\bAny\b")
"""An annotation that spells ``Any`` (``list[Any]``) is left to mypy: its leak is mypy's own, and the copy
would be one more expression of that type for ``--disallow-any-expr`` (a plain tensor's ``Any`` is not)."""


def shadowing(options: Options, sources: SourceFiles) -> ParseRewrite:
    """The rewrite for one build: on where the plugin turned ``allow_redefinition`` on."""
    return ParseRewrite(
        rewrite=lambda tree: _rewrite(tree, lambda: redefinition_on(options, tree, sources)),
        cache_key="rebindings",
        failure="rebindings in branches that return could not be rewritten; mypy's own redefinition applies "
                "(what was rewritten before is sound on its own)",
    )


def _rewrite(tree: MypyFile, allowed: Callable[[], bool]) -> bool:
    """Shadow every rebinding in ``tree`` that qualifies; whether any did (``allowed`` is asked before the
    first)."""
    asked = False
    done = False
    for function in functions_in(tree.defs):
        rewrite = _Function(function.node)
        if not rewrite.candidates:
            continue
        for _ in rewrite.shadows():
            if not asked:
                asked = True
                if not allowed():
                    return False
            done = True
    return done


@dataclass(frozen=True)
class _Shadow:
    block: Block
    rebinding: AssignmentStmt
    name: str
    shadow: str


class _Function:
    """One function's rebindings to shadow."""

    def __init__(self, function: FuncDef) -> None:
        self.function = function
        self.candidates = frozenset(argument.variable.name for argument in function.arguments
                                    if argument.type_annotation is not None
                                    and not _ANY.search(str(argument.type_annotation))) - _UNSHADOWED
        self._used: set[str] | None = None
        self._unsafe: set[str] | None = None

    def shadows(self) -> Iterator[_Shadow]:
        """Each shadow, outer branches first, applied after it is yielded and before the next is sought
        (a branch nested in a rewritten one is found by its shadow's name)."""
        return self._visit(self.function.body.body, self.candidates, False)

    def _visit(self, statements: list[Statement], names: frozenset[str], guarded: bool) -> Iterator[_Shadow]:
        for statement in statements:
            if isinstance(statement, IfStmt) and not guarded:
                for block in _branches(statement):
                    shadows = []
                    for name in sorted(names):
                        shadow = self._shadow(block, name)
                        if shadow is not None:
                            yield shadow
                            self._apply(shadow)
                            shadows.append(shadow.shadow)
                    yield from self._visit(block.body, names | set(shadows), guarded)
                continue
            inner_guarded = guarded or isinstance(statement, (TryStmt, WithStmt))
            for block in nested_blocks(statement):
                yield from self._visit(block.body, names, inner_guarded)

    def _shadow(self, block: Block, name: str) -> _Shadow | None:
        """The shadow of ``name`` in ``block`` (an ``if`` branch), if its first rebinding there qualifies."""
        body = block.body
        if not body or not isinstance(body[-1], (ReturnStmt, RaiseStmt)):
            return None
        index = next((i for i, s in enumerate(body) if _rebinds(s, name)), None)
        if index is None or name in self.unsafe():
            return None
        rebinding = body[index]
        assert isinstance(rebinding, AssignmentStmt)
        if name in names_bound_in(body[:index]) or _walrus_binds(rebinding.rvalue, name) or _leaves(body[index:]):
            return None
        return _Shadow(block, rebinding, name, self._fresh(name))

    def unsafe(self) -> set[str]:
        """Names a nested function, lambda or class mentions, or an import or definition of the function
        binds: the variable itself (not the value at one place) may be read after the branch."""
        if self._unsafe is None:
            unsafe: set[str] = set()
            for statement in statements_in(self.function.body):
                if isinstance(statement, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
                    unsafe.add(statement.name)
                    unsafe.update(names_in(get_subexpressions(statement)))
                elif isinstance(statement, (Import, ImportFrom)):
                    pairs = statement.ids if isinstance(statement, Import) else statement.names
                    unsafe.update(alias or name.partition(".")[0] for name, alias in pairs)
                elif isinstance(statement, ImportAll):
                    unsafe.update(self.candidates)
            for expr in get_subexpressions(self.function.body):
                if isinstance(expr, LambdaExpr):
                    unsafe.update(names_in(get_subexpressions(expr)))
            self._unsafe = unsafe
        return self._unsafe

    def _fresh(self, name: str) -> str:
        if self._used is None:
            self._used = {argument.variable.name for argument in self.function.arguments}
            self._used.update(names_in(get_subexpressions(self.function.body)))
        shadow = name + SUFFIX
        while shadow in self._used:
            shadow += SUFFIX
        self._used.add(shadow)
        return shadow

    def _apply(self, step: _Shadow) -> None:
        """``name = value`` -> ``shadow = name; shadow = value``, and ``name`` -> ``shadow`` after it."""
        body = step.block.body
        index = next(i for i, s in enumerate(body) if s is step.rebinding)
        target = step.rebinding.lvalues[0]
        assert isinstance(target, NameExpr)
        for later in body[index + 1:]:
            for expr in get_subexpressions(later):
                if isinstance(expr, NameExpr) and expr.name == step.name:
                    expr.name = step.shadow
        target.name = step.shadow
        copied, copy = NameExpr(step.shadow), NameExpr(step.name)
        copied.set_line(target)
        copy.set_line(target)
        binding = AssignmentStmt([copied], copy)
        binding.set_line(step.rebinding)
        body.insert(index, binding)


def _branches(statement: IfStmt) -> list[Block]:
    return [*statement.body, *([statement.else_body] if statement.else_body is not None else [])]


def _rebinds(statement: Statement, name: str) -> bool:
    """``name = value``: one target, no annotation."""
    return (isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1
            and isinstance(statement.lvalues[0], NameExpr) and statement.lvalues[0].name == name
            and statement.unanalyzed_type is None)


def _walrus_binds(expr: Expression, name: str) -> bool:
    return any(isinstance(e, AssignmentExpr) and e.target.name == name for e in get_subexpressions(expr))


def _leaves(statements: list[Statement]) -> bool:
    """Whether a ``break`` or ``continue`` in ``statements`` leaves them (not one of a loop inside them)."""
    for statement in statements:
        if isinstance(statement, (BreakStmt, ContinueStmt)):
            return True
        if isinstance(statement, (ForStmt, WhileStmt)):
            inner = [statement.else_body] if statement.else_body is not None else []  # else: the outer loop's
        else:
            inner = nested_blocks(statement)
        if any(_leaves(block.body) for block in inner):
            return True
    return False
