"""Which operands carry no gradient: where they are R or I, they are judged as constants.

The rule for Invariant (docs/spec.md#local-rules) exists so that an I value's
gradient is the same on every rank; a value that gets no gradient cannot
break it, and it is the same on every rank whether typed R or I.  So when a
combination of operands breaks a rule, it is judged again with each
gradient-free R or I operand taken as a constant (a scalar): ``out * ~mask``
with an I mask and V activations is V.  The rules for Partial are about
forward values and stay as they are.

An operand carries no gradient when its expression is

* a comparison, ``~x``, ``x & y``, ``x | y``, ``x ^ y`` (bool/int results);
* a call of an op whose record says its result carries no gradient
  (indices, bools, integers, samples, a detached copy: ``argmax``,
  ``nonzero``, ``.long()``, ``.detach()``; in-place spellings too), a cast to
  an integer or bool dtype (``.to(torch.int64)``), or an index into one;
* ``.indices`` of a named-tuple result, or a parameter's ``.grad``;
* a torch op (operator, method, ``torch.*`` function) whose operands all
  carry none, or a python number;
* a local name every assignment in the function gives such a value;

or the code runs under ``torch.no_grad()`` / ``torch.inference_mode()`` (a
``with`` block or a decorator of the enclosing function), or is an autograd
Function's own ``forward`` or ``backward`` (:mod:`spmd_mypy.function_bodies`),
where nothing does.
"""

from __future__ import annotations

from typing import Callable, Iterator

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Context,
    Expression,
    ExpressionStmt,
    FloatExpr,
    ForStmt,
    FuncDef,
    FuncItem,
    IndexExpr,
    IntExpr,
    MemberExpr,
    NameExpr,
    OperatorAssignmentStmt,
    OpExpr,
    RefExpr,
    UnaryExpr,
    WhileStmt,
    WithStmt,
)
from mypy.plugin import CheckerPluginInterface

from spmd_mypy.fullnames import ASSERT_TYPE, AUTOGRAD_FUNCTION, SPMD_TYPES_RELABELS
from spmd_mypy.representation import contains_tensor
from spmd_mypy.statements import functions_in, statements_in
from spmd_stubs.core.torch_ops import CONSTANT_FACTORIES, GRADIENT_FREE_RESULTS, out_of_place

NO_GRADIENT_DTYPES = frozenset(
    "bool uint8 int8 int16 int32 int64 short int long uint16 uint32 uint64".split()
)
NO_GRADIENT_CONTEXTS = frozenset({"no_grad", "inference_mode"})
_TORCH = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special"})
_BITWISE = frozenset({"&", "|", "^"})
BODIES = ("forward", "backward")
"""The methods of a ``torch.autograd.Function`` torch runs with gradients off."""


def carries_no_gradient(expr: Expression | None, context: Context, api: CheckerPluginInterface) -> bool:
    """Whether the operand ``expr``, at ``context``, never carries a gradient."""
    function = current_function(api)
    if _under_no_grad(context, function, api) or implementation(api) is not None:
        return True
    return expr is not None and _Walk(function, api).no_gradient(expr)


def built_without_gradient(expr: Expression, context: Context, api: CheckerPluginInterface) -> bool:
    """Whether ``expr`` is, where it is read, a value made by constant factories and gradient-free ops alone.

    A fresh ``torch.zeros(...)`` / ``x.new_zeros(...)`` / ``torch.arange(...)``
    carries no gradient until something is written into it; so a name bound
    to one counts only by what may run before ``context`` (:func:`_runs_before`):
    its assignments there, and no in-place write there (``buf[i] = y``,
    ``buf.copy_(y)``, ``buf.requires_grad_()``); a factory given
    ``requires_grad=`` never counts.  Where the answer is
    needed about the value itself (a relabel of it), not about an operand
    that a later in-place write may have filled, this is the question.
    """
    function = current_function(api)
    if _under_no_grad(context, function, api) or implementation(api) is not None:
        return True
    return _Walk(function, api, fresh_factories_at=context).no_gradient(expr)


ZERO_FACTORIES = frozenset({"zeros", "zeros_like"})
"""Factories whose value is zero: zero is every type's value (a copy, a part of a sum, a piece)."""


def built_as_zeros(expr: Expression, context: Context, api: CheckerPluginInterface) -> bool:
    """Whether ``expr`` is, where ``context`` reads it, a fresh zero fill (``torch.zeros(...)``,
    ``x.new_zeros(...)``, ``torch.zeros_like(x)``): a name bound to one by every assignment that may run before
    ``context``, and written into in place by none of them (as :func:`built_without_gradient` asks)."""
    if isinstance(expr, CallExpr):
        return isinstance(expr.callee, (NameExpr, MemberExpr)) and _fresh_factory(expr, ZERO_FACTORIES)
    function = current_function(api)
    if not isinstance(expr, NameExpr) or function is None:
        return False
    values = _bound_before(function.body, expr.name, context)
    return bool(values) and all(
        isinstance(value, CallExpr) and isinstance(value.callee, (NameExpr, MemberExpr))
        and _fresh_factory(value, ZERO_FACTORIES) for value in values)


def _bound_before(block: Block, name: str, asked: Context) -> list[Expression]:
    """The values ``name`` is bound to by the assignments of ``block`` that may run before ``asked`` (its
    relabels aside); none where one of those statements writes into it in place."""
    before = _runs_before(block, asked)
    if _written_in_place(block, name, before):
        return []
    return [value for value in _assigned(block, name) if not _relabel_of(value, name) and before(value.line)]


class _Walk:
    """One question about one operand: the names already asked about stop a cycle (``x = x + 1``)."""

    def __init__(self, function: FuncItem | None, api: CheckerPluginInterface,
                 fresh_factories_at: Context | None = None) -> None:
        self.function = function
        self.api = api
        self.fresh_factories_at = fresh_factories_at
        """Where a value is asked about that may be a fresh factory's (None: factories are not asked about)."""
        self.seen: set[str] = set()

    def no_gradient(self, expr: Expression) -> bool:
        if isinstance(expr, (IntExpr, FloatExpr, ComparisonExpr)):
            return True
        if isinstance(expr, UnaryExpr):
            return expr.op == "~" or self.no_gradient(expr.expr)
        if isinstance(expr, OpExpr):
            return expr.op in _BITWISE or (self.no_gradient(expr.left) and self.no_gradient(expr.right))
        if isinstance(expr, MemberExpr):
            return expr.name in ("indices", "grad") or not self._tensor(expr)
        if isinstance(expr, IndexExpr):
            return self.no_gradient(expr.base)
        if isinstance(expr, CallExpr):
            return self._call(expr)
        if isinstance(expr, NameExpr):
            return self._name(expr)
        return False

    def _call(self, call: CallExpr) -> bool:
        callee = call.callee
        if not isinstance(callee, (NameExpr, MemberExpr)):
            return False
        if out_of_place(callee.name)[0] in GRADIENT_FREE_RESULTS:
            return True
        if self.fresh_factories_at is not None and _fresh_factory(call):
            return True
        if callee.name in ("to", "type") and call.args:
            dtype = call.args[0]
            if isinstance(dtype, MemberExpr) and dtype.name in NO_GRADIENT_DTYPES:
                return True
        if isinstance(callee, MemberExpr) and isinstance(callee.expr, RefExpr) and callee.expr.fullname in _TORCH:
            operands = list(call.args)  # torch.f(...): its arguments
        elif isinstance(callee, MemberExpr):
            operands = [callee.expr, *call.args]  # x.f(...): the receiver and the arguments
        else:
            return False
        return bool(operands) and all(self.no_gradient(operand) for operand in operands)

    def _name(self, name: NameExpr) -> bool:
        if not self._tensor(name):
            return True
        if self.function is None or name.name in self.seen:
            return False
        self.seen.add(name.name)
        asked = self.fresh_factories_at
        values = (_bound_before(self.function.body, name.name, asked) if asked is not None else
                  [value for value in _assigned(self.function.body, name.name) if not _relabel_of(value, name.name)])
        return bool(values) and all(self.no_gradient(value) for value in values)

    def _tensor(self, expr: Expression) -> bool:
        """Whether mypy types ``expr`` as (containing) a tensor: anything else is a python value."""
        known = self.api.lookup_type_or_none(expr)  # type: ignore[attr-defined]
        return known is None or contains_tensor(known)


def _fresh_factory(call: CallExpr, factories: frozenset[str] = CONSTANT_FACTORIES) -> bool:
    """``torch.zeros(...)``, ``x.new_zeros(...)``: one of ``factories`` not asked for ``requires_grad``."""
    assert isinstance(call.callee, (NameExpr, MemberExpr))
    name = call.callee.name.removeprefix("new_")
    return name in factories and "requires_grad" not in call.arg_names


def _runs_before(block: Block, asked: Context) -> Callable[[int], bool]:
    """Whether a line of ``block`` may run before ``asked``: one above it, or anywhere in a loop around it (the
    next iteration runs it first).  What runs after it sees the type ``asked`` gives, and is checked there."""
    loops = [(s.line, s.end_line or s.line) for s in statements_in(block)
             if isinstance(s, (ForStmt, WhileStmt)) and s.line <= asked.line <= (s.end_line or s.line)]
    return lambda line: line < asked.line or any(first <= line <= last for first, last in loops)


def _written_in_place(block: Block, name: str, before: Callable[[int], bool]) -> bool:
    """Whether a statement of ``block`` that ``before`` admits writes into ``name`` in place: ``name[i] = y``,
    ``name += y``, ``name.op_(...)``, ``out=name``."""
    for statement in statements_in(block):
        if not before(statement.line):
            continue
        if isinstance(statement, OperatorAssignmentStmt) and _is_name(
            statement.lvalue.base if isinstance(statement.lvalue, IndexExpr) else statement.lvalue, name
        ):
            return True
        if isinstance(statement, AssignmentStmt) and any(
            isinstance(target, IndexExpr) and _is_name(target.base, name) for target in statement.lvalues
        ):
            return True
        if isinstance(statement, ExpressionStmt) and isinstance(statement.expr, CallExpr):
            call = statement.expr
            callee = call.callee
            if isinstance(callee, MemberExpr) and _is_name(callee.expr, name) and callee.name.endswith("_"):
                return True
            if any(arg_name == "out" and _is_name(arg, name) for arg, arg_name in zip(call.args, call.arg_names)):
                return True
    return False


def _is_name(expr: Expression, name: str) -> bool:
    return isinstance(expr, NameExpr) and expr.name == name


def _relabel_of(value: Expression, name: str) -> bool:
    """Whether ``value`` is ``name`` itself, relabelled: ``x = spmd.assert_type(x, ...)`` adds no gradient to x."""
    if not (isinstance(value, CallExpr) and isinstance(value.callee, RefExpr) and value.args):
        return False
    relabels = value.callee.fullname == ASSERT_TYPE or value.callee.fullname.startswith(SPMD_TYPES_RELABELS)
    first = value.args[0]
    return relabels and isinstance(first, NameExpr) and first.name == name


def _assigned(block: Block, name: str) -> Iterator[Expression]:
    """Every value assigned to the local ``name`` in ``block`` (a for-loop target: what it iterates)."""
    for statement in statements_in(block):
        if isinstance(statement, AssignmentStmt):
            if any(isinstance(target, NameExpr) and target.name == name for target in statement.lvalues):
                yield statement.rvalue
        elif isinstance(statement, ForStmt) and isinstance(statement.index, NameExpr) and statement.index.name == name:
            yield statement.expr  # the items of a gradient-free tensor carry none either


def implementation(api: CheckerPluginInterface) -> FuncItem | None:
    """The ``forward`` or ``backward`` of a ``torch.autograd.Function`` subclass the checker is directly in."""
    method = current_function(api)
    if method is None or method.name not in BODIES:
        return None
    owner = api.scope.enclosing_class(method)  # type: ignore[attr-defined]
    return method if owner is not None and owner.has_base(AUTOGRAD_FUNCTION) else None


def current_function(api: CheckerPluginInterface) -> FuncItem | None:
    """The function the checker is in (None at module or class level)."""
    scope = getattr(api, "scope", None)
    return scope.current_function() if scope is not None else None


def _under_no_grad(context: Context, function: FuncItem | None, api: CheckerPluginInterface) -> bool:
    """Whether ``context`` is in a ``with torch.no_grad():`` block or a ``@torch.no_grad()`` function."""
    if function is None:
        return False
    if any(_is_no_grad(d) for d in _decorators(function, api)):
        return True
    return any(
        isinstance(statement, WithStmt)
        and any(_is_no_grad(e) for e in statement.expr)
        and statement.body.line <= context.line <= (statement.body.end_line or statement.body.line)
        for statement in statements_in(function.body)
    )


def _is_no_grad(expr: Expression) -> bool:
    callee = expr.callee if isinstance(expr, CallExpr) else expr
    return isinstance(callee, (NameExpr, MemberExpr)) and callee.name in NO_GRADIENT_CONTEXTS


def _decorators(function: FuncItem, api: CheckerPluginInterface) -> list[Expression]:
    tree = getattr(api, "tree", None)
    if tree is None or not (isinstance(function, FuncDef) and function.is_decorated):
        return []
    return next((found.decorators for found in functions_in(tree.defs) if found.node is function), [])
