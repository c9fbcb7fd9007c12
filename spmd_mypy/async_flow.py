"""Collectives in flight: a raw ``async_op=True`` collective's buffers until its handle's ``wait()`` (``spmd-async``).

``handle = dist.all_gather_into_tensor(buffer, x, group=g, async_op=True)``
puts ``buffer`` in flight (the output; the tensor of an in-place collective
such as ``all_reduce``; ``irecv``'s tensor), and a typed call's ``Pending``
is in flight with no buffer; the program may compute meanwhile, and
``handle.wait()`` ends it.  Following
the statements after the call, in order, on every path through the ``if``
statements (docs/spec.md#collectives-in-flight):

* reading or writing a buffer in flight (an alias made by ``a = buffer`` is
  the buffer too; one stored in a container or an attribute is not followed),
  or returning before the wait, is an
  error at that line, fixed by the ``wait()`` before it;
* a path that ends (the function returns or falls off its end) with the
  handle never waited, or rebinds the handle first, leaks the collective;
* a handle dropped (the call a statement of its own) is never waited.

A test of the handle itself (``if handle is not None:``) is true while it is in
flight.  Branches on one flag are followed together: ``if ctx.sequence_parallel:``
twice takes the same branch both times (megatron's async linear backward),
``if ctx.sequence_parallel and wgrad_compute:`` the branch both flags allow,
and ``assert not ctx.allreduce_dgrad`` removes the paths where it is true.
A handle stored in an attribute or a container, passed on, or returned (the
caller's to wait, with its buffers: megatron's ``_batched_p2p_ops``) is
followed no further; strict mode names it (``spmd-async``), never trusts it
silently, as it names a call whose ``async_op`` is not a literal (megatron's
bucketed gradient reduction passes a flag).  Loops are read as their body once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssertStmt,
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Context,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncItem,
    IfStmt,
    ListExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    RaiseStmt,
    RefExpr,
    ReturnStmt,
    RevealExpr,
    Statement,
    TryStmt,
    TupleExpr,
    UnaryExpr,
    WhileStmt,
    WithStmt,
)
from mypy.plugin import FunctionContext
from mypy.server.subexpr import get_subexpressions
from mypy.types import Type, UnionType, get_proper_type

from spmd_mypy import errorcodes, raw_collectives, report
from spmd_mypy.annotations import axes_of
from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import CALLED_VALUE, STARTED, TORCH_TRANSFERS
from spmd_mypy.groups import axis_of_group
from spmd_mypy.statements import names_bound_by
from spmd_mypy.wrappers import marked, starts_async, wrapped_value
from spmd_stubs.core.mesh_transitions import written


@dataclass(frozen=True)
class Problem:
    node: Context
    message: str


RACE = "on a GPU it reads or writes before the collective is done, silently"
SPMD_STUBS = "spmd_stubs."
READ_WHILE_IN_FLIGHT = frozenset({"isend", "batch_isend_irecv"})
"""A send's tensor may be read while in flight; ``batch_isend_irecv``'s buffers are its ops', built before."""
"""The typed API: its collectives return a ``Pending``, their inputs not in flight."""

Condition = tuple[tuple[str, bool], ...]
"""A condition the walk reads: flags (dotted names) each true or false, all of them holding (``a and not b``)."""


@dataclass(frozen=True)
class _Path:
    """One way through the statements: the flags it has taken, the buffer names, whether still in flight."""

    assumed: tuple[tuple[str, bool], ...] = ()
    buffers: frozenset[str] = frozenset()
    in_flight: bool = True

    def taking(self, condition: Condition | None, value: bool) -> _Path | None:
        """This path where ``condition`` is ``value``; None where it cannot be (the flags it took say otherwise)."""
        if condition is None:
            return self
        known = dict(self.assumed)
        if value:
            if any(known.get(flag, wanted) != wanted for flag, wanted in condition):
                return None
            return replace(self, assumed=(*self.assumed, *((f, w) for f, w in condition if f not in known)))
        if any(flag in known and known[flag] != wanted for flag, wanted in condition):
            return self  # already false
        open_ = [(flag, wanted) for flag, wanted in condition if flag not in known]
        if not open_:
            return None  # every conjunct holds on this path
        if len(open_) == 1:
            return replace(self, assumed=(*self.assumed, (open_[0][0], not open_[0][1])))
        return self


@dataclass
class _Walk:
    started: CallExpr
    op: str
    handle: str
    strict: bool
    problems: list[Problem] = field(default_factory=list)

    def passed_on(self, statement: Statement) -> None:
        """The handle leaves this function's view at ``statement``: named in strict mode only."""
        if self.strict:
            self.problems.append(Problem(statement, f"the handle {self.handle} is passed on: whether it is waited "
                                                    f"before its buffers are used is not checked. Fix: wait() it "
                                                    f"in this function"))

    def report(self, node: Context, what: str, fix: str, why: str = RACE) -> None:
        message = f"{what} while {self.op} (line {self.started.line}) is in flight: {why}. Fix: {fix}"
        if all(p.node is not node or p.message != message for p in self.problems):
            self.problems.append(Problem(node, message))


def started_hook(ctx: FunctionContext) -> Type:
    """``<started>(call)``: a call passing ``async_op=True`` (:mod:`spmd_mypy.wrappers`), checked in its function,
    except a call of a collective whose own hook checks it (:func:`checking_async`), in every module."""
    call, found = wrapped_value(ctx)
    if isinstance(call, CallExpr) and marked(call, CALLED_VALUE):
        call = call.args[0]
    if isinstance(call, CallExpr) and not _checked_by_its_hook(ctx, call):
        _check_in_function(ctx, call)
    return found


def checking_async(hook: Callable[[FunctionContext], Type]) -> Callable[[FunctionContext], Type]:
    """A raw collective's ``hook``, after checking the call where it passes ``async_op=True``."""

    def checked(ctx: FunctionContext) -> Type:
        if isinstance(ctx.context, CallExpr) and starts_async(ctx.context):
            _check_in_function(ctx, ctx.context)
        return hook(ctx)

    return checked


def transfer_hook(ctx: FunctionContext) -> Type:
    """torch's ``isend``/``irecv``/``batch_isend_irecv``, checked in every module."""
    if isinstance(ctx.context, CallExpr):
        _check_in_function(ctx, ctx.context)
    return ctx.default_return_type


def _checked_by_its_hook(ctx: FunctionContext, call: CallExpr) -> bool:
    """Whether mypy calls a hook of its own for ``call``: torch's transfers (:func:`transfer_hook`), or the
    raw collective hook for a torch collective or a declared name called through a callee type that is not a
    union (a union's items have no name to look a hook up by)."""
    callee = call.callee
    if isinstance(callee, RefExpr) and callee.fullname in TORCH_TRANSFERS:
        return True
    if not isinstance(callee, RefExpr) or not raw_collectives.hooked(
            callee.fullname, dict(state_of(ctx.api).settings.collectives)):
        return False
    callee_type = ctx.api.lookup_type_or_none(callee) if isinstance(ctx.api, TypeChecker) else None
    return not isinstance(get_proper_type(callee_type), UnionType)


def _check_in_function(ctx: FunctionContext, call: CallExpr) -> None:
    function = ctx.api.scope.current_function() if isinstance(ctx.api, TypeChecker) else None
    if function is not None:
        for problem in check(function, call, state_of(ctx.api).settings.strict, _axis(ctx, call, function)):
            report.fail(ctx.api, problem.node, problem.message, errorcodes.ASYNC)


def _axis(ctx: FunctionContext, call: CallExpr, function: FuncItem) -> str | None:
    """The mesh axis the call communicates on: a typed call's axis, a raw one's ``group=``."""
    if _typed(call):
        axes = axes_of(call.args[1]) if len(call.args) > 1 and call.arg_names[1] is None else None
        return written(axes) if axes else None
    group = next((value for name, value in zip(call.arg_names, call.args) if name == "group"), None)
    if group is None or not isinstance(ctx.api, TypeChecker):
        return None
    return axis_of_group(group, state_of(ctx.api).settings.groups, ctx.api.tree, ctx.api.lookup_type_or_none(group),
                         function)


def check(function: FuncItem, call: CallExpr, strict: bool, axis: str | None = None) -> list[Problem]:
    """The problems of ``call``, passing ``async_op=True``, in ``function``'s body.

    A typed collective's result is a ``Pending`` of its own and no buffer is in flight; a raw one's first
    argument is."""
    located = _locate(function.body, call, ())
    if located is None:
        return []
    statement, continuation, assumed = located
    op = f"{_name(call.callee)} on {f'axis {axis}' if axis else 'a group of unknown axis'}"
    flag = next((value for name, value in zip(call.arg_names, call.args) if name == "async_op"), None)
    if flag is not None and not (isinstance(flag, NameExpr) and flag.fullname == "builtins.True"):
        return [Problem(call, f"whether {op} (async_op=...) is in flight depends on a value the checker does "
                              f"not know: its buffers and handle are not checked. Fix: pass async_op=True or "
                              f"False where it is started, one call each")] if strict else []
    buffers = frozenset() if _typed(call) or _name(call.callee) in READ_WHILE_IN_FLIGHT else _buffer(call)
    started = f"{op} (async_op=True)" if "async_op" in call.arg_names else op
    if isinstance(statement, ExpressionStmt):
        return [Problem(call, f"the handle of {started} is dropped: nothing waits for the "
                              f"collective. Fix: handle = {_name(call.callee)}(...), then handle.wait() before its buffers are "
                              f"used")]
    target = statement.lvalues[0] if isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1 else None
    if not isinstance(target, NameExpr):
        return [Problem(call, f"the handle of {started} is stored where the checker does not "
                              f"follow it: whether it is waited before its buffers are used is not checked. "
                              f"Fix: bind it to a local name and wait() it in this function")] if strict else []
    walk = _Walk(call, op, target.name, strict)
    paths = [_Path(assumed, buffers)]
    for block in continuation:
        paths = _run(walk, block, paths)
    for path in paths:
        if path.in_flight:
            walk.problems.append(Problem(call, f"{started} is never waited on a path through "
                                               f"this function ({_shown(path)}): the collective leaks. Fix: "
                                               f"{target.name}.wait() on every path before it ends"))
            break
    return walk.problems


def _typed(call: CallExpr) -> bool:
    """A call of the typed API (its result a ``Pending``, no buffer of the caller's in flight)."""
    return isinstance(call.callee, RefExpr) and call.callee.fullname.startswith(SPMD_STUBS)


def _name(callee: Expression) -> str:
    return callee.name if isinstance(callee, (NameExpr, MemberExpr)) else "the collective"


def _buffer(call: CallExpr) -> frozenset[str]:
    """The name of the buffer in flight: the first argument (the output, or the tensor an in-place op writes)."""
    first = call.args[0] if call.args and call.arg_names[0] is None else None
    return frozenset({first.name}) if isinstance(first, NameExpr) else frozenset()


def _locate(block: Block, call: CallExpr, assumed: tuple[tuple[str, bool], ...]
            ) -> tuple[Statement, list[list[Statement]], tuple[tuple[str, bool], ...]] | None:
    """The statement holding ``call``, the statements after it (innermost block first), the flags around it."""
    for index, statement in enumerate(block.body):
        rest = block.body[index + 1:]
        if _holds(statement, call):
            return statement, [rest], assumed
        for inner, taken in _blocks(statement):
            found = _locate(inner, call, assumed + taken)
            if found is not None:
                return found[0], [*found[1], rest], found[2]
    return None


def _holds(statement: Statement, call: CallExpr) -> bool:
    """Whether ``statement`` is ``h = call`` or ``call`` alone (either possibly in its ``<started>`` wrapper)."""
    held = statement.rvalue if isinstance(statement, AssignmentStmt) else \
        statement.expr if isinstance(statement, ExpressionStmt) else None
    if isinstance(held, CallExpr) and marked(held, STARTED):
        held = held.args[0]
    return held is call


def _blocks(statement: Statement) -> list[tuple[Block, tuple[tuple[str, bool], ...]]]:
    if isinstance(statement, IfStmt):
        condition = _condition(statement.expr[0]) or ()
        otherwise = ((condition[0][0], not condition[0][1]),) if len(condition) == 1 else ()
        return [(statement.body[0], condition), *([(statement.else_body, otherwise)] if statement.else_body else [])]
    if isinstance(statement, (ForStmt, WhileStmt, WithStmt)):
        return [(statement.body, ())]
    if isinstance(statement, TryStmt):
        return [(statement.body, ()), *((b, ()) for b in statement.handlers),
                *((b, ()) for b in (statement.else_body, statement.finally_body) if b is not None)]
    return []


def _condition(expr: Expression) -> Condition | None:
    """``a and not ctx.b`` -> its flags; None where a part is not a flag."""
    if isinstance(expr, OpExpr) and expr.op == "and":
        left, right = _condition(expr.left), _condition(expr.right)
        return left + right if left is not None and right is not None else None
    flag = _flag(expr)
    return (flag,) if flag is not None else None


def _flag(expr: Expression) -> tuple[str, bool] | None:
    """``ctx.sequence_parallel`` -> (its dotted name, True); ``not x`` -> (x, False); else None."""
    if isinstance(expr, UnaryExpr) and expr.op == "not":
        inner = _flag(expr.expr)
        return (inner[0], not inner[1]) if inner else None
    if isinstance(expr, NameExpr):
        return expr.name, True
    if isinstance(expr, MemberExpr):
        owner = _flag(expr.expr)
        return (f"{owner[0]}.{expr.name}", True) if owner and owner[1] else None
    return None


def _run(walk: _Walk, statements: list[Statement], paths: list[_Path]) -> list[_Path]:
    """The paths after ``statements`` (those that return or raise end there)."""
    for statement in statements:
        paths = [after for path in paths for after in _step(walk, statement, path)]
    return paths


def _step(walk: _Walk, statement: Statement, path: _Path) -> list[_Path]:
    if not path.in_flight:
        return [path]
    if isinstance(statement, IfStmt):
        return _branch(walk, statement, path)
    if isinstance(statement, AssertStmt):
        kept = path.taking(_condition(statement.expr), True)
        return [kept] if kept is not None else []
    if _waits_for_each(statement, walk.handle):
        return [replace(path, in_flight=False)]
    if isinstance(statement, (ForStmt, WhileStmt, WithStmt, TryStmt)):
        _uses(walk, statement, path, header_only=True)
        return _run(walk, [s for block, _ in _blocks(statement) for s in block.body], [path])
    if _waits(statement, walk.handle):
        return [replace(path, in_flight=False)]
    if isinstance(statement, RaiseStmt):
        return []
    if isinstance(statement, ReturnStmt) and _passes_on(statement, walk.handle):
        walk.passed_on(statement)
        return []
    if isinstance(statement, ReturnStmt):
        walk.report(statement, "returns", f"{walk.handle}.wait() before the return",
                    "the caller has no handle to wait on, and gets the buffer unfinished")
        return []
    path = _uses(walk, statement, path)
    return [path] if path.in_flight else []


def _branch(walk: _Walk, statement: IfStmt, path: _Path) -> list[_Path]:
    condition = _condition(statement.expr[0])
    known = _handle_test(statement.expr[0], walk.handle)
    _uses(walk, statement, path, header_only=True)  # the condition
    after: list[_Path] = []
    for value, block in ((True, statement.body[0]), (False, statement.else_body)):
        taken = path.taking(condition, value) if known is None else (path if known == value else None)
        if taken is None:
            continue
        after += _run(walk, block.body, [taken]) if block is not None else [taken]
    return after


def _handle_test(expr: Expression, handle: str) -> bool | None:
    """What a test of the handle itself is while it is in flight: ``h is not None`` and ``h`` true, ``h is None``
    and ``not h`` false (``if handle is not None: handle.wait()``); None for any other test."""
    if isinstance(expr, UnaryExpr) and expr.op == "not":
        inner = _handle_test(expr.expr, handle)
        return None if inner is None else not inner
    if isinstance(expr, NameExpr) and expr.name == handle:
        return True
    if isinstance(expr, ComparisonExpr) and len(expr.operators) == 1 and expr.operators[0] in ("is", "is not") \
            and isinstance(expr.operands[0], NameExpr) and expr.operands[0].name == handle \
            and isinstance(expr.operands[1], NameExpr) and expr.operands[1].fullname == "builtins.None":
        return expr.operators[0] == "is not"
    return None


def _waits(statement: Statement, handle: str) -> bool:
    return any(isinstance(e, CallExpr) and isinstance(e.callee, MemberExpr) and e.callee.name == "wait"
               and isinstance(e.callee.expr, NameExpr) and e.callee.expr.name == handle
               for e in get_subexpressions(statement))


def _waits_for_each(statement: Statement, handles: str) -> bool:
    """``for h in handles: h.wait()``: a list of handles (``batch_isend_irecv``'s) waited one by one."""
    return isinstance(statement, ForStmt) and isinstance(statement.expr, NameExpr) and \
        statement.expr.name == handles and isinstance(statement.index, NameExpr) and \
        any(_waits(inner, statement.index.name) for inner in statement.body.body)


def _uses(walk: _Walk, statement: Statement, path: _Path, header_only: bool = False) -> _Path:
    """Report the first buffer ``statement`` touches in flight; follow aliases and rebindings."""
    bound: list[str] = []
    if isinstance(statement, IfStmt):
        expressions: list[Expression] = [e for header in statement.expr for e in get_subexpressions(header)]
    elif header_only and isinstance(statement, (ForStmt, WhileStmt)):
        expressions = list(get_subexpressions(statement.expr))
    elif header_only or (isinstance(statement, ExpressionStmt) and isinstance(statement.expr, CallExpr)
                         and isinstance(statement.expr.analyzed, RevealExpr)):
        expressions = []  # reveal_type() is the checker's, not a read at run time
    elif isinstance(statement, AssignmentStmt):
        value = statement.rvalue
        names = [target for target in statement.lvalues if isinstance(target, NameExpr)]
        if len(statement.lvalues) == 1 and isinstance(value, NameExpr) and value.name in path.buffers:
            if names:
                return replace(path, buffers=path.buffers | {names[0].name})  # an alias, not a read
            return path  # stored in a container or an attribute (a double buffer): not a read, not followed
        bound = [name for target in statement.lvalues for name in names_bound_by(target)]
        written = [e for target in statement.lvalues if not isinstance(target, NameExpr)
                   for e in get_subexpressions(target)]  # buf[i] = ..., a.b = ...
        expressions = [*written, *get_subexpressions(value)]
    else:
        expressions = list(get_subexpressions(statement))
    touched = next((e for e in expressions if isinstance(e, NameExpr) and e.name in path.buffers), None)
    if touched is not None:
        walk.report(touched, f"{touched.name} is used", f"{walk.handle}.wait() before this line")
    if walk.handle in bound:
        walk.report(statement, f"{walk.handle} is bound again", f"{walk.handle}.wait() first",
                    "nothing can wait for the first collective any more")
        return replace(path, in_flight=False)
    if not header_only and not isinstance(statement, IfStmt) and _passes_on(statement, walk.handle):
        walk.passed_on(statement)
        return replace(path, in_flight=False)  # followed no further
    return replace(path, buffers=path.buffers - set(bound)) if bound else path


def _passes_on(statement: Statement, handle: str) -> bool:
    """Whether ``statement`` gives the handle to a call, returns it (itself or as an item of a returned tuple) or
    stores it (``h is None`` does not)."""
    def named(expr: Expression | None) -> bool:
        return isinstance(expr, NameExpr) and expr.name == handle
    if isinstance(statement, ReturnStmt) and statement.expr is not None:
        returned = statement.expr.items if isinstance(statement.expr, (TupleExpr, ListExpr)) else [statement.expr]
        return any(named(e) for e in returned)
    if isinstance(statement, AssignmentStmt) and any(named(e) for e in get_subexpressions(statement.rvalue)):
        return True
    return any(isinstance(e, CallExpr) and any(named(x) for a in e.args for x in get_subexpressions(a))
               for e in get_subexpressions(statement))  # buffer.append((handle, msg)) too


def _shown(path: _Path) -> str:
    return ", ".join(f"{flag}={value}" for flag, value in path.assumed) or "the path without branches"
