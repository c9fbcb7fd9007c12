"""One configuration's module: the flags' decisions written into mypy's tree before it is analysed.

Called when mypy has parsed a module (a daemon edit included), before its
semantic analysis:

* ``if``/``elif``/``else``: a branch the flags rule out is marked
  unreachable, exactly as mypy marks one under ``sys.version_info`` or
  ``always_false``: neither analysed nor checked;
* ``a if cond else b`` in code: a decided ``cond`` becomes the literal
  ``True``/``False``, so mypy types the expression by the branch that runs
  and reports nothing in the other;
* a module- or class-level assignment of a conditional expression, the
  spelling of a type that depends on the configuration, written once::

      Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]

  is the branch the flags choose, so mypy reads it as a type alias; where
  they do not decide an ``spmd.flags`` condition (no configurations
  declared), it is the union of both, which every configuration accepts.
  The condition stays behind as a statement of its own, so that a flag no
  configuration sets (a typo) is still read, and reported
  (:mod:`spmd_mypy.configurations.unset_flags`).

Each condition is read where it is written (:class:`~.conditions.Place`):
the flags by name, what the module's assignments make a flag in that
function (:mod:`.following`), and the names the module gives enum classes.
A module that names neither a flag nor the class of a flag declared by its
enum type is left as parsed: nothing in it could be decided.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from mypy.nodes import (
    AssignmentStmt,
    Block,
    ClassDef,
    ConditionalExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    IfStmt,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    Statement,
)
from mypy.reachability import mark_block_unreachable
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.configurations.conditions import Flags, Place, truth
from spmd_mypy.configurations.declared import Configuration, by_enum_type, flag_names
from spmd_mypy.configurations.following import Following
from spmd_mypy.configurations.syntax import class_names
from spmd_mypy.statements import functions_in, walk

FLAGS_OBJECT = "flags"
"""The name of ``spmd_stubs.flags``, whose attributes are the flags type aliases are chosen by."""
TENSOR_NAME = "Tensor"
"""The name of ``spmd_stubs.Tensor``, which each branch of a flag-chosen alias subscripts."""


class FlagTests:
    """Which modules' source may test a flag (names a declared flag or the class of a flag declared by its
    enum type, or reads ``flags.``), read once per file version.

    mypy re-parses a module whose imports changed without calling the plugin
    before its analysis; such modules must be parsed afresh instead
    (``SpmdPlugin.report_config_data``).
    """

    def __init__(self, configurations: tuple[Configuration, ...]) -> None:
        enums = {name for c in configurations for name in by_enum_type(c.flags)}  # a comparison with their members
        names = sorted({*flag_names(configurations), *enums})
        reads = [rf"{FLAGS_OBJECT}\s*\.", *(rf"{re.escape(name)}\b" for name in names)]
        self._pattern = re.compile(r"\b(?:%s)" % "|".join(reads))
        self._words = (FLAGS_OBJECT, *names)
        """Every match contains one of these: a file without any skips the (slower) pattern search."""
        self._seen: dict[tuple[str, float], bool] = {}

    def found_in(self, path: str) -> bool:
        try:
            key = (path, Path(path).stat().st_mtime)
            if key not in self._seen:
                text = Path(path).read_text(errors="replace")
                self._seen[key] = any(word in text for word in self._words) and self._pattern.search(text) is not None
            return self._seen[key]
        except OSError:
            return False


def prune(tree: MypyFile, flags: Flags) -> None:
    """Decide every condition in ``tree`` that ``flags`` decide (before its semantic analysis)."""
    places = _Places(tree, flags)
    for block in _declaration_blocks(tree.defs):
        _choose_declared_types(block, places.at(None))
    if not places.decide_anything:
        return
    for visit in walk(tree.defs):
        if isinstance(statement := visit.statement, IfStmt):
            _prune_branches(statement, places.at(visit.scope.node if visit.scope else None))
    for expr, function in _conditional_expressions(tree, places.expressions):
        decided = truth(expr.cond, places.at(function))
        if decided is not None:
            expr.cond = _literal(decided, expr.cond)


class _Places:
    """Each function's :class:`Place` in one module: its flags as named, as followed through assignments
    (:mod:`.following`, computed where the module names a flag), and its names for enum classes."""

    def __init__(self, tree: MypyFile, flags: Flags) -> None:
        self.flags = flags
        self.class_names = class_names(tree)
        self.expressions = get_subexpressions(tree)
        names = {e.name for e in self.expressions if isinstance(e, (NameExpr, MemberExpr))}
        named = not names.isdisjoint(flags)
        enums = set(by_enum_type(dict(flags)))
        compared = not enums.isdisjoint(names) or not enums.isdisjoint(self.class_names.values())
        self.decide_anything = named or compared
        """Whether any condition here could be decided: the module names a flag, or a class of one."""
        self._following = Following(tree, flags) if named else None
        self._places: dict[FuncDef | None, Place] = {}

    def at(self, function: FuncDef | None) -> Place:
        """The place of a condition written in ``function`` (None: at module or class level outside any)."""
        if function not in self._places:
            place = Place(self.flags, class_names=self.class_names)
            if self._following is not None:
                place.followed = self._following.at(function)
            self._places[function] = place
        return self._places[function]


def _conditional_expressions(tree: MypyFile, expressions: list[Expression],
                             ) -> list[tuple[ConditionalExpr, FuncDef | None]]:
    """Every ``a if cond else b`` of ``tree`` (whose subexpressions are ``expressions``), with the innermost
    function it is written in."""
    where: dict[int, tuple[ConditionalExpr, FuncDef | None]] = {
        id(e): (e, None) for e in expressions if isinstance(e, ConditionalExpr)}
    for function in functions_in(tree.defs) if where else ():
        for expr in get_subexpressions(function.node):  # a function's own, then its nested functions' again
            if isinstance(expr, ConditionalExpr):
                where[id(expr)] = (expr, function.node)
    return list(where.values())


def _prune_branches(statement: IfStmt, place: Place) -> None:
    """mypy's own reachability rule (``mypy.reachability``), on the flags' truth."""
    for index, condition in enumerate(statement.expr):
        decided = truth(condition, place)
        if decided is False:
            mark_block_unreachable(statement.body[index])
        elif decided is True:
            for later in statement.body[index + 1 :]:
                mark_block_unreachable(later)
            if statement.else_body is None:
                statement.else_body = Block([])  # so mypy knows every path runs the taken branch
            mark_block_unreachable(statement.else_body)
            return


def _choose_declared_types(block: list[Statement], place: Place) -> None:
    """Each ``X = A if <flag test> else B`` of a module- or class-level block: the chosen branch, or
    the union of both followed by the test itself (``spmd.flags.<flag>``, read for its check)."""
    for index in reversed(range(len(block))):
        statement = block[index]
        if not (isinstance(statement, AssignmentStmt) and isinstance(statement.rvalue, ConditionalExpr)):
            continue
        choice = statement.rvalue
        decided = truth(choice.cond, place)
        if decided is not None:
            statement.rvalue = choice.if_expr if decided else choice.else_expr
        elif reads_flags_object(choice.cond) and all(map(_spells_tensor_type, (choice.if_expr, choice.else_expr))):
            union = OpExpr("|", choice.if_expr, choice.else_expr)
            union.set_line(choice)
            statement.rvalue = union
            test = ExpressionStmt(choice.cond)
            test.set_line(choice.cond)
            block.insert(index + 1, test)


def reads_flags_object(condition: Expression) -> bool:
    """Whether ``condition`` reads an attribute of ``spmd.flags`` (``flags.sequence_parallel``)."""
    return any(isinstance(e, MemberExpr) and isinstance(e.expr, (NameExpr, MemberExpr))
               and e.expr.name == FLAGS_OBJECT for e in [condition, *get_subexpressions(condition)])


def _spells_tensor_type(expr: Expression) -> bool:
    """``Tensor[...]``, ``spmd.Tensor[...]``, optionally ``| None``: a branch of a flag-chosen alias, never a
    value (``1 if cfg.flags.fast else None`` stays as written)."""
    if isinstance(expr, OpExpr) and expr.op == "|":
        return _spells_tensor_type(expr.left) and (_spells_tensor_type(expr.right) or _is_none(expr.right))
    return (isinstance(expr, IndexExpr) and isinstance(expr.base, (NameExpr, MemberExpr))
            and expr.base.name == TENSOR_NAME)


def _is_none(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.name == "None"


def _literal(value: bool, where: Expression) -> NameExpr:
    literal = NameExpr("True" if value else "False")
    literal.set_line(where)
    return literal


def _declaration_blocks(statements: list[Statement]) -> Iterator[list[Statement]]:
    """The statement lists at module and class level (and in their ``if`` blocks), where aliases live."""
    yield statements
    for statement in statements:
        if isinstance(statement, ClassDef):
            yield from _declaration_blocks(statement.defs.body)
        elif isinstance(statement, IfStmt):
            for block in (*statement.body, statement.else_body):
                if block is not None:
                    yield from _declaration_blocks(block.body)


