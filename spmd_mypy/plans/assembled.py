"""A ``parallelize_module`` plan as the code assembles it: its entries, and what of it is not read.

The plan is a dict display of ``"key": style`` entries (:mod:`.literal`
reads each style), or a name bound once to one (a local of the calling
function, a constant of the module), or a call of a function of the module
that returns one (its parameters bound to the call's literal arguments).  A
local plan may be built up before it is used: ``plan["key"] = style`` and
``plan.update({...})`` in the block that binds it, also under an ``if`` whose
condition is a literal flag.  Anything else that may change the plan
(another method, a call it is passed to, an ``if`` on something not read, a
change after its use) leaves the plan's keys unknown (:attr:`Plan.complete`
false), as does a key that is not a string; an entry whose style is not read
keeps its key.  Each part not read is kept with its reason, for strict mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    Context,
    DelStmt,
    DictExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    IfStmt,
    IndexExpr,
    MemberExpr,
    NameExpr,
    OperatorAssignmentStmt,
    RefExpr,
    Statement,
    StrExpr,
    WhileStmt,
    WithStmt,
)
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.fullnames import PARALLELIZE_MODULE
from spmd_mypy.plans.literal import (
    Scope,
    Style,
    Unreadable,
    bound_value,
    condition,
    in_module,
    read_style,
    returned_value,
)
from spmd_mypy.statements import names_bound_by, names_bound_in, nested_blocks, statements_in, walk

_READS = frozenset({"items", "keys", "values", "get", "copy"})
"""Methods of a dict that leave it as it is."""
_READING_CALLS = frozenset({"builtins.len", "builtins.print", "builtins.str", "builtins.repr", "builtins.sorted",
                            "builtins.list", "builtins.dict", PARALLELIZE_MODULE})
"""Functions that are given a plan and leave it as it is."""


@dataclass(frozen=True)
class Entry:
    """One ``"key": style`` of the plan; ``style`` None where the value is not read."""

    key: str
    style: Style | None
    node: Expression
    """The key as written: where a diagnostic about the entry is reported."""
    value: Expression | None = None
    """The style as written: what a fix replaces."""
    shared: bool = False
    """Whether it is written where other plans may read it too (a function returning the plan, a module
    constant): a fix of it there is the user's choice."""


@dataclass
class Plan:
    """What is read of a plan."""

    entries: list[Entry] = field(default_factory=list)
    display: DictExpr | None = None
    """The last dict display it is built from: where an entry is added."""
    display_shared: bool = False
    """Whether that display is written where other plans may read it too."""
    unread: list[tuple[Unreadable, str | None]] = field(default_factory=list)
    """Each part not read, with the key of the entry whose style it is (None: a part of the plan itself)."""
    complete: bool = True
    """Whether every key is read (else a sub-module no entry names may have a style)."""
    at: Context = field(default_factory=Context)
    """The plan as the call passes it: where a problem of shared code is reported."""

    def set(self, entry: Entry) -> None:
        """``plan[key] = style``: a key already there keeps its place."""
        at = next((i for i, e in enumerate(self.entries) if e.key == entry.key), None)
        if at is None:
            self.entries.append(entry)
        else:
            self.entries[at] = entry

    def lost(self, unread: Unreadable) -> None:
        self.unread.append((unread, None))
        self.complete = False


def read_plan(plan: Expression, scope: Scope, use: Context) -> Plan:
    """The plan ``plan`` (written at ``use``, in ``scope``) assembles."""
    found = Plan(at=plan)
    try:
        _read(plan, scope, use, found, shared=False)
    except Unreadable as unread:
        found.lost(unread)
    return found


def _read(plan: Expression, scope: Scope, use: Context, found: Plan, shared: bool) -> None:
    if isinstance(plan, DictExpr):
        _update(plan, scope, found, shared)
    elif isinstance(plan, NameExpr):
        value, where = bound_value(plan, scope)
        elsewhere = where.function is not scope.function  # a module constant used in a function
        _read(value, where, use, found, shared or elsewhere)
        _changes(plan, where, use, found, shared or elsewhere, elsewhere)
    elif isinstance(plan, CallExpr) and isinstance(plan.callee, RefExpr) and isinstance(plan.callee.node, FuncDef) \
            and in_module(plan.callee.node.fullname, scope.tree):
        helper = plan.callee.node
        returned, where = returned_value(helper, plan, scope)
        _read(returned, where, helper.body.body[-1], found, shared=True)
    else:
        raise Unreadable(plan, "is not a dict display of styles")


def _update(display: DictExpr, scope: Scope, found: Plan, shared: bool) -> None:
    """``display``'s entries added to the plan."""
    found.display, found.display_shared = display, shared
    for key, value in display.items:
        if not isinstance(key, StrExpr):
            found.lost(Unreadable(key or value, "is not a string key"))
            continue
        found.set(_entry(key, value, scope, found, shared))


def _entry(key: StrExpr, value: Expression, scope: Scope, found: Plan, shared: bool) -> Entry:
    try:
        return Entry(key.value, read_style(value, scope), key, value, shared)
    except Unreadable as unread:
        found.unread.append((unread, key.value))
        return Entry(key.value, None, key, value, shared)


def _changes(name: NameExpr, scope: Scope, use: Context, found: Plan, shared: bool, elsewhere: bool) -> None:
    """The changes of the plan ``name`` (bound in ``scope``) before its ``use``, applied; any other is not
    read.  Used ``elsewhere`` (a module constant used in a function): the module's statements all run
    before it, and a change in any function is not read."""
    body = scope.body()
    binding = next((s for s in statements_in(body) if isinstance(s, AssignmentStmt) and any(
        name.name in names_bound_by(t) for t in s.lvalues)), None)
    block = next((b for b in _blocks(body) if binding in b.body), None)
    if binding is None or block is None:
        return
    start = block.body.index(binding)
    before = [s for s in block.body[start + 1:] if elsewhere or s.line <= use.line]
    applied: set[int] = {id(binding)}
    for statement in before[:-1] if before and not elsewhere and _contains(before[-1], use) else before:
        _apply(statement, name.name, scope, found, applied, shared)
    in_functions = [visit.statement for visit in walk(scope.tree.defs) if visit.scope is not None and not (
        _binds(visit.scope.node, name.name))] if elsewhere else []
    for statement in [*statements_in(body), *in_functions]:
        if id(statement) not in applied and _may_change(statement, name.name, use):
            found.lost(Unreadable(statement, f"may change the plan `{name.name}`"))


def _binds(function: FuncDef, name: str) -> bool:
    """Whether ``name`` is a local of ``function`` (then it is not the module's)."""
    return name in names_bound_in(function.body.body) or any(a.variable.name == name for a in function.arguments)


def _apply(statement: Statement, name: str, scope: Scope, found: Plan, applied: set[int], shared: bool) -> None:
    """One statement between the plan's binding and its use: a change read, or one that leaves it alone."""
    if isinstance(statement, IfStmt) and any(_mentions(s, name) for b in nested_blocks(statement)
                                             for s in statements_in(b)):
        try:
            chosen = next((body for test, body in zip(statement.expr, statement.body) if condition(test, scope)),
                          statement.else_body)
        except Unreadable:
            return  # the statements in it stay unapplied: each change in them is not read
        applied.add(id(statement))
        for block in nested_blocks(statement):
            if block is not chosen:  # never runs
                applied.update(id(s) for s in statements_in(block))
        for inner in chosen.body if chosen is not None else []:
            _apply(inner, name, scope, found, applied, shared)
        return
    target = statement.lvalues[0] if isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1 else None
    if isinstance(target, IndexExpr) and _is(target.base, name) and isinstance(target.index, StrExpr):
        assert isinstance(statement, AssignmentStmt)
        found.set(_entry(target.index, statement.rvalue, scope, found, shared))
        applied.add(id(statement))
        return
    call = statement.expr if isinstance(statement, ExpressionStmt) else None
    if isinstance(call, CallExpr) and isinstance(call.callee, MemberExpr) and _is(call.callee.expr, name) and \
            call.callee.name == "update" and len(call.args) == 1 and isinstance(call.args[0], DictExpr):
        _update(call.args[0], scope, found, shared)
        applied.add(id(statement))


def _may_change(statement: Statement, name: str, use: Context) -> bool:
    """Whether ``statement`` (its own expressions, not its nested blocks') may change the dict ``name``."""
    targets: list[Expression] = []
    if isinstance(statement, AssignmentStmt):
        targets = list(statement.lvalues)
        if _is(statement.rvalue, name):
            return True  # an alias, which may be changed
    elif isinstance(statement, OperatorAssignmentStmt):
        targets = [statement.lvalue]
    elif isinstance(statement, DelStmt):
        targets = [statement.expr]
    if any(isinstance(t, IndexExpr) and _is(t.base, name) for t in targets) or (
            isinstance(statement, OperatorAssignmentStmt) and _is(statement.lvalue, name)):
        return True
    for expr in _own_expressions(statement):
        if isinstance(expr, MemberExpr) and _is(expr.expr, name) and expr.name not in _READS:
            return True
        if isinstance(expr, CallExpr) and expr is not use and any(_is(a, name) for a in expr.args) and not (
                isinstance(expr.callee, RefExpr) and expr.callee.fullname in _READING_CALLS):
            return True
    return False


def _own_expressions(statement: Statement) -> list[Expression]:
    if isinstance(statement, IfStmt):
        heads: list[Expression] = list(statement.expr)
    elif isinstance(statement, (ForStmt, WhileStmt)):
        heads = [statement.expr]
    elif isinstance(statement, WithStmt):
        heads = list(statement.expr)
    elif nested_blocks(statement):
        heads = []
    else:
        return get_subexpressions(statement)
    return [e for head in heads for e in get_subexpressions(head)]


def _mentions(statement: Statement, name: str) -> bool:
    return any(_is(e, name) for e in _own_expressions(statement))


def _is(expr: Expression | None, name: str) -> bool:
    return isinstance(expr, NameExpr) and expr.name == name


def _contains(statement: Statement, node: Context) -> bool:
    """Whether ``node`` is written within ``statement``."""
    end = statement.end_line if statement.end_line is not None else statement.line
    return statement.line <= node.line <= end


def _blocks(body: Block) -> list[Block]:
    blocks = [body]
    for statement in statements_in(body):
        blocks.extend(nested_blocks(statement))
    return blocks

